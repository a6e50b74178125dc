/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unicode/utf8"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1/v1alpha1test"
)

func durationSamples() []time.Duration {
	s := []time.Duration{0, 1, 999, time.Microsecond, 850 * time.Microsecond, 999999, 999999500, 1250 * time.Microsecond,
		time.Second, 59999999999, time.Minute, 90 * time.Second, time.Hour + 1, 99998 * time.Hour, 99999 * time.Hour, math.MaxInt64}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		s = append(s, time.Duration(math.Exp(r.Float64()*math.Log(float64(99999*time.Hour)))))
	}
	return s
}

type ratioCase struct{ part, whole int64 }

func ratioSamples() []ratioCase {
	s := []ratioCase{{0, 0}, {0, 1}, {1, 1}, {2, 1}, {1, 3}, {3, 240}, {1, 2_000_000}, {1_999_999, 2_000_000}, {math.MaxInt64 - 1, math.MaxInt64}, {1, math.MaxInt64}}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		whole := r.Int64N(1<<40) + 1
		s = append(s, ratioCase{r.Int64N(whole + 1), whole})
	}
	return s
}

func TestDurationOf(t *testing.T) {
	for d, want := range map[time.Duration]v1alpha1.Duration{
		-time.Second:                      "0s",
		0:                                 "0s",
		500:                               "500ns",
		850 * time.Microsecond:            "850us",
		1500:                              "1.5us",
		1250 * time.Microsecond:           "1.25ms",
		1234567:                           "1.235ms",
		999999600:                         "1000ms",
		2 * time.Second:                   "2s",
		12500 * time.Millisecond:          "12.5s",
		90 * time.Second:                  "1m30s",
		2 * time.Hour:                     "2h0m0s",
		time.Hour + 1500*time.Microsecond: "1h0m0.002s",
		math.MaxInt64:                     "99999h",
	} {
		if got := v1alpha1.DurationOf(d); got != want {
			t.Errorf("DurationOf(%d) = %q, want %q", int64(d), got, want)
		}
	}
	// Round trip: DurationOf(d) parses back to d within 0.05% (or a nanosecond).
	for _, d := range durationSamples() {
		if d >= 99999*time.Hour {
			continue
		}
		got, err := v1alpha1.DurationOf(d).Duration()
		if err != nil {
			t.Fatalf("DurationOf(%v) = %q does not parse: %v", d, v1alpha1.DurationOf(d), err)
		}
		if diff := math.Abs(float64(got - d)); diff > math.Max(1, float64(d)*0.0005) {
			t.Errorf("DurationOf(%v) = %q parses to %v (off by %v)", d, v1alpha1.DurationOf(d), got, time.Duration(diff))
		}
	}
	// Monotone: a larger duration never formats to a smaller value (NewLatencySummary
	// relies on it to keep quantiles ordered after formatting).
	samples := durationSamples()
	for i := 1; i < len(samples); i++ {
		a, b := min(samples[i-1], samples[i]), max(samples[i-1], samples[i])
		pa, _ := v1alpha1.DurationOf(a).Duration()
		pb, _ := v1alpha1.DurationOf(b).Duration()
		if pa > pb {
			t.Errorf("DurationOf not monotone: %v -> %q, %v -> %q", a, v1alpha1.DurationOf(a), b, v1alpha1.DurationOf(b))
		}
	}
	if d, err := v1alpha1.Duration("").Duration(); err != nil || d != 0 {
		t.Errorf("empty Duration = %v, %v", d, err)
	}
	for _, bad := range []v1alpha1.Duration{"-1ms", "abc"} {
		if _, err := bad.Duration(); err == nil {
			t.Errorf("Duration(%q) parsed", bad)
		}
	}
}

func TestRatio(t *testing.T) {
	for _, c := range []struct {
		part, whole int64
		want        v1alpha1.Ratio
	}{
		{0, 0, "0"}, {5, 0, "0"}, {0, 10, "0"}, {10, 10, "1"}, {11, 10, "1"},
		{1, 5, "0.2"}, {3, 240, "0.0125"}, {1, 3, "0.333333"}, {2, 3, "0.666667"},
		{1, 10_000_000, "0.000001"},         // any loss stays visible
		{9_999_999, 10_000_000, "0.999999"}, // and is never rounded up to total loss
		{math.MaxInt64 / 2, math.MaxInt64, "0.5"},
	} {
		if got := v1alpha1.RatioOf(c.part, c.whole); got != c.want {
			t.Errorf("RatioOf(%d, %d) = %q, want %q", c.part, c.whole, got, c.want)
		}
	}
	for _, c := range ratioSamples() {
		r := v1alpha1.RatioOf(c.part, c.whole)
		f, err := r.Float64()
		if err != nil {
			t.Fatalf("RatioOf(%d, %d) = %q: %v", c.part, c.whole, r, err)
		}
		exact := float64(c.part) / float64(c.whole)
		if c.whole > 0 && c.part <= c.whole && math.Abs(f-exact) > 1.000001e-6 { // rounding, or the clamp that keeps 0 < loss < 1 visible
			t.Errorf("RatioOf(%d, %d) = %q, exact %v", c.part, c.whole, r, exact)
		}
	}
	for f, want := range map[float64]v1alpha1.Ratio{math.NaN(): "0", -1: "0", 0: "0", 0.0125: "0.0125", 0.9999999: "1", 1.5: "1", 1e-7: "0"} {
		if got := v1alpha1.RatioFromFloat(f); got != want {
			t.Errorf("RatioFromFloat(%v) = %q, want %q", f, got, want)
		}
	}
	for _, bad := range []v1alpha1.Ratio{"1.5", "-0.1", "x"} {
		if _, err := bad.Float64(); err == nil {
			t.Errorf("Ratio(%q).Float64() succeeded", bad)
		}
	}
}

func TestNewLatencySummaryOrders(t *testing.T) {
	// An interpolated p99 above the exact maximum is raised into order, not rejected later.
	l := v1alpha1.NewLatencySummary(2*time.Millisecond, time.Millisecond, 5*time.Millisecond, 4*time.Millisecond)
	want := v1alpha1.LatencySummary{P50: "2ms", P90: "2ms", P99: "5ms", Max: "5ms"}
	if *l != want {
		t.Errorf("NewLatencySummary = %+v, want %+v", *l, want)
	}
}

func TestTruncateMessage(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"this is too long", 10, "this is..."},
		{"ééééééé", 5, "éé..."}, // characters, not bytes
		{"abcdef", 2, "ab"},
		{"abc", 0, ""},
	} {
		got := v1alpha1.TruncateMessage(c.in, c.max)
		if got != c.want || utf8.RuneCountInString(got) > c.max {
			t.Errorf("TruncateMessage(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestDeepCopy(t *testing.T) {
	orig := v1alpha1test.Valid("ns", "pnh")
	cp := orig.DeepCopy()
	if !apiequality.Semantic.DeepEqual(orig, cp) {
		t.Fatal("DeepCopy differs from the original")
	}
	// Mutating every reference-typed part of the copy leaves the original alone.
	cp.Labels["x"] = "y"
	cp.Spec.TargetPodRef.Name = "changed"
	cp.Status.Latency.P50 = "9s"
	cp.Status.LastObservedTime.Time = cp.Status.LastObservedTime.Add(time.Hour)
	cp.Status.Probes[1].Latency.P99 = "9s"
	cp.Status.Probes[1].LastFailure.Message = "changed"
	cp.Status.Probes[1].LastSuccessTime.Time = time.Time{}
	cp.Status.Outages[0].End.Time = time.Time{}
	cp.Status.Outages[1].Message = "changed"
	cp.Status.Conditions[0].Message = "changed"
	cp.Status.Probes = append(cp.Status.Probes[:0], cp.Status.Probes[3])
	if !apiequality.Semantic.DeepEqual(orig, v1alpha1test.Valid("ns", "pnh")) {
		t.Fatal("mutating the deep copy changed the original")
	}

	var obj runtime.Object = orig
	if c, ok := obj.DeepCopyObject().(*v1alpha1.PodNetworkHealth); !ok || !apiequality.Semantic.DeepEqual(c, orig) {
		t.Fatalf("DeepCopyObject = %T", obj.DeepCopyObject())
	}
	list := &v1alpha1.PodNetworkHealthList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: []v1alpha1.PodNetworkHealth{*orig}}
	lc, ok := list.DeepCopyObject().(*v1alpha1.PodNetworkHealthList)
	if !ok || !apiequality.Semantic.DeepEqual(lc, list) {
		t.Fatal("list DeepCopyObject differs")
	}
	lc.Items[0].Status.Outages[0].Message = "changed"
	if list.Items[0].Status.Outages[0].Message == "changed" {
		t.Fatal("list deep copy shares items")
	}
	var nilObj *v1alpha1.PodNetworkHealth
	if nilObj.DeepCopy() != nil {
		t.Fatal("nil DeepCopy is not nil")
	}
}

func TestScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	gvks, _, err := s.ObjectKinds(&v1alpha1.PodNetworkHealth{})
	if err != nil || len(gvks) != 1 || gvks[0] != v1alpha1.SchemeGroupVersionKind {
		t.Fatalf("ObjectKinds = %v, %v", gvks, err)
	}
	if got := v1alpha1.Resource(v1alpha1.Plural).String(); got != v1alpha1.CRDName {
		t.Errorf("Resource = %q, want %q", got, v1alpha1.CRDName)
	}
}
