/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package test

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1/v1alpha1test"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// healthTable creates the objects of a small health table: a reachable pod pair, an
// unreachable pod pair, a node target and an external target, observed seconds ago.
func healthTable(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	seen := metav1.NewTime(time.Now().Add(-30 * time.Second).Truncate(time.Second))

	ok := v1alpha1test.Valid(ns, "agent-a-to-agent-b")
	ok.Status.LastObservedTime = &seen

	down := v1alpha1test.Valid(ns, "agent-a-to-agent-c")
	down.Spec = v1alpha1test.PodSpec(ns, "agent-a", "agent-c")
	down.Status = v1alpha1.PodNetworkHealthStatus{
		Reachability: v1alpha1.Unreachable, LossRatio: "1", Window: "5m0s", LastObservedTime: &seen,
		ObservedFromNode: "node-a", ObserverCount: 1,
		Probes: []v1alpha1.ProbeResult{{Type: v1alpha1.ProbeTypeICMP, Sent: 60, Lost: 60,
			LastFailure: &v1alpha1.ProbeFailure{Time: seen, Reason: v1alpha1.FailureReasonTimeout, Message: "no echo reply within 1s"}}},
		Outages: []v1alpha1.Outage{{Start: metav1.NewTime(seen.Add(-2 * time.Minute)), Reason: v1alpha1.FailureReasonTimeout, Message: "all probes failing"}},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(seen.Add(-2 * time.Minute)),
			Reason: v1alpha1.ReasonProbesFailed, Message: "60 of 60 probes lost in the last 5m"}},
	}

	other := v1alpha1test.Valid(ns, "agent-d-to-agent-b")
	other.Spec = v1alpha1test.PodSpec(ns, "agent-d", "agent-b")
	other.Status.LastObservedTime = &seen
	other.Status.ObservedFromNode = "node-d"

	node := v1alpha1test.Valid(ns, "agent-a-to-node-b")
	node.Spec = v1alpha1test.NodeSpec(ns, "agent-a", "node-b")
	node.Status.LastObservedTime = &seen
	node.Status.Latency = v1alpha1.NewLatencySummary(310*time.Microsecond, 400*time.Microsecond, 700*time.Microsecond, 900*time.Microsecond)
	node.Status.LossRatio = "0"

	ext := v1alpha1test.Valid(ns, "agent-a-to-dns")
	ext.Spec = v1alpha1test.ExternalSpec(ns, "agent-a", "192.0.2.53")
	ext.Status = v1alpha1.PodNetworkHealthStatus{Reachability: v1alpha1.ReachabilityUnknown}

	for _, o := range []*v1alpha1.PodNetworkHealth{ok, down, other, node, ext} {
		create(t, ctx, o)
	}
}

// TestPrinterColumns requests the server-side Table kubectl uses and checks the columns and
// the cells of the health table.
func TestPrinterColumns(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	healthTable(t, ctx, ns)

	raw, err := pnhClient.NetpulseV1alpha1().RESTClient().Get().Namespace(ns).Resource(v1alpha1.Plural).
		SetHeader("Accept", tableAccept).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatalf("not a Table: %v\n%s", err, raw)
	}
	if table.Kind != "Table" {
		t.Fatalf("kind %q", table.Kind)
	}
	type col struct {
		name, typ string
		priority  int32
	}
	want := []col{
		{"Name", "string", 0}, {"Source", "string", 0}, {"Target", "string", 0}, {"Reachable", "string", 0},
		{"RTT P50", "string", 0}, {"Loss", "string", 0}, {"Degraded", "string", 0}, {"Since", "date", 0}, {"Age", "date", 0},
		{"Target Kind", "string", 1}, {"Target Node", "string", 1}, {"Target Address", "string", 1},
		{"RTT P99", "string", 1}, {"Observer", "string", 1}, {"Written", "date", 1},
	}
	var got []col
	for _, c := range table.ColumnDefinitions {
		got = append(got, col{c.Name, c.Type, c.Priority})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("columns:\n got %v\nwant %v", got, want)
	}

	age := regexp.MustCompile(`^[0-9]+s$`) // seconds-old timestamps print as "30s"
	// Since is the Reachable condition's last transition: the fixture's is months old.
	since := regexp.MustCompile(`^[0-9]+(d|y[0-9]*d?)$`)
	twoMinutes := regexp.MustCompile(`^2m[0-9]*s?$`)
	rows := map[string][]any{}
	for _, r := range table.Rows {
		rows[r.Cells[0].(string)] = r.Cells
	}
	check := func(name string, want ...any) {
		t.Helper()
		cells, ok := rows[name]
		if !ok {
			t.Errorf("no row %q", name)
			return
		}
		if len(cells) != len(want) {
			t.Errorf("row %q: %d cells, want %d: %v", name, len(cells), len(want), cells)
			return
		}
		for i := range want {
			if re, ok := want[i].(*regexp.Regexp); ok {
				if s, _ := cells[i].(string); !re.MatchString(s) {
					t.Errorf("row %q column %q = %v, want to match %s", name, table.ColumnDefinitions[i].Name, cells[i], re)
				}
				continue
			}
			if cells[i] != want[i] {
				t.Errorf("row %q column %q = %#v, want %#v", name, table.ColumnDefinitions[i].Name, cells[i], want[i])
			}
		}
	}
	check("agent-a-to-agent-b", "agent-a-to-agent-b", "agent-a", "agent-b", "Reachable", "850us", "0.0125", "WithinThresholds", since, age, "Pod", nil, nil, "4ms", "node-a", age)
	check("agent-a-to-agent-c", "agent-a-to-agent-c", "agent-a", "agent-c", "Unreachable", nil, "1", nil, twoMinutes, age, "Pod", nil, nil, nil, "node-a", age)
	check("agent-a-to-node-b", "agent-a-to-node-b", "agent-a", nil, "Reachable", "310us", "0", "WithinThresholds", since, age, "Node", "node-b", nil, "700us", "node-a", age)
	check("agent-a-to-dns", "agent-a-to-dns", "agent-a", nil, "Unknown", nil, nil, nil, nil, age, "External", nil, "192.0.2.53", nil, nil, nil)
	if len(table.Rows) != 5 {
		t.Errorf("%d rows, want 5", len(table.Rows))
	}
}

func names(items []v1alpha1.PodNetworkHealth) []string {
	var n []string
	for _, i := range items {
		n = append(n, i.Name)
	}
	slices.Sort(n)
	return n
}

// TestFieldSelectors lists and watches with field selectors on the selectable fields.
func TestFieldSelectors(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	healthTable(t, ctx, ns)
	c := pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns)

	for selector, want := range map[string][]string{
		"spec.sourcePodRef.name=agent-a":                                {"agent-a-to-agent-b", "agent-a-to-agent-c", "agent-a-to-dns", "agent-a-to-node-b"},
		"spec.targetPodRef.name=agent-b":                                {"agent-a-to-agent-b", "agent-d-to-agent-b"},
		"spec.sourcePodRef.name=agent-a,spec.targetPodRef.name=agent-b": {"agent-a-to-agent-b"},
		"spec.targetPodRef.namespace=" + ns:                             {"agent-a-to-agent-b", "agent-a-to-agent-c", "agent-d-to-agent-b"},
		"spec.targetKind=Node":                                          {"agent-a-to-node-b"},
		"spec.targetNodeRef.name=node-b":                                {"agent-a-to-node-b"},
		"status.reachability=Unreachable":                               {"agent-a-to-agent-c"},
		"status.observedFromNode=node-d":                                {"agent-d-to-agent-b"},
		"spec.sourcePodRef.name=nobody":                                 nil,
	} {
		list, err := c.List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			t.Errorf("%s: %v", selector, err)
			continue
		}
		if got := names(list.Items); !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", selector, got, want)
		}
	}
	// Fields that are not selectable are refused, not silently ignored.
	_, err := c.List(ctx, metav1.ListOptions{FieldSelector: "status.lossRatio=1"})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("selector on a non-selectable field: err = %v, want BadRequest", err)
	}

	// A watch with a field selector sees only matching objects.
	w, err := c.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.targetPodRef.name=agent-x"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	nonMatching := v1alpha1test.Valid(ns, "agent-a-to-agent-y")
	nonMatching.Spec = v1alpha1test.PodSpec(ns, "agent-a", "agent-y")
	matching := v1alpha1test.Valid(ns, "agent-a-to-agent-x")
	matching.Spec = v1alpha1test.PodSpec(ns, "agent-a", "agent-x")
	create(t, ctx, nonMatching)
	create(t, ctx, matching)
	var events []string
	timeout := time.After(30 * time.Second)
	for len(events) < 2 { // ADDED, then MODIFIED by the status update
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			o, isPNH := ev.Object.(*v1alpha1.PodNetworkHealth)
			if !isPNH {
				t.Fatalf("watch event %s with %T", ev.Type, ev.Object)
			}
			if o.Name != matching.Name {
				t.Fatalf("watch with a field selector delivered %s %s", ev.Type, o.Name)
			}
			events = append(events, string(ev.Type))
		case <-timeout:
			t.Fatalf("watch: got %v, want ADDED and MODIFIED", events)
		}
	}
	if !slices.Equal(events, []string{string(watch.Added), string(watch.Modified)}) {
		t.Errorf("watch events %v", events)
	}
}

// TestKubectl runs the real kubectl (bin/kubectl, built by `make kube-bins`) for the health
// table an operator sees. It is an extra on top of TestPrinterColumns, which checks the same
// Table through the API; without kubectl it is skipped.
func TestKubectl(t *testing.T) {
	if cp.Binaries.Kubectl == "" {
		t.Skip("bin/kubectl not built (`make kube-bins`); the Table is checked through the API by TestPrinterColumns")
	}
	ctx := testContext(t)
	ns := namespace(t, ctx)
	healthTable(t, ctx, ns)
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, cp.Binaries.Kubectl, append([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("$ kubectl get %s\n%s", strings.Join(args[1:], " "), out)
		return string(out)
	}
	header := regexp.MustCompile(`^NAME +SOURCE +TARGET +REACHABLE +RTT P50 +LOSS +DEGRADED +SINCE +AGE\n`)
	row := regexp.MustCompile(`(?m)^agent-a-to-agent-b +agent-a +agent-b +Reachable +850us +0\.0125 +WithinThresholds +[0-9]+(d|y[0-9]*d?) +[0-9]+s$`)
	out := kubectl("get", "pnh")
	if !header.MatchString(out) || !row.MatchString(out) || strings.Count(out, "\n") != 6 {
		t.Errorf("kubectl get pnh: unexpected table")
	}
	// Field selectors are per kind: the netpulse category also lists NetworkChecks, whose
	// fields differ, so select on the PodNetworkHealth kind.
	out = kubectl("get", "pnh", "--field-selector", "spec.targetPodRef.name=agent-b")
	if strings.Count(out, "\n") != 3 || !strings.Contains(out, "agent-d-to-agent-b") || !strings.Contains(out, "agent-a-to-agent-b") {
		t.Errorf("kubectl get pnh --field-selector: unexpected output")
	}
	out = kubectl("get", "pnh", "-o", "wide")
	if !strings.Contains(out, "TARGET KIND") || !regexp.MustCompile(`agent-a-to-node-b +agent-a +Reachable +310us +0 +WithinThresholds +[0-9]+(d|y[0-9]*d?) +[0-9]+s +Node +node-b +700us +node-a +[0-9]+s`).MatchString(out) {
		t.Errorf("kubectl get pnh -o wide: unexpected output")
	}
	out = kubectl("get", "pnh", "--field-selector", "status.reachability=Unreachable")
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, "agent-a-to-agent-c") {
		t.Errorf("kubectl get pnh --field-selector status.reachability=Unreachable: unexpected output")
	}
}
