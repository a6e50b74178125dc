// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/targetpolicy"
)

// The pure core's decisions, by table: no clients, no clock.

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func TestPlanTarget(t *testing.T) {
	pod := func(ns string) v1alpha1.CheckTarget {
		return v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "db", Namespace: ns, Port: 80}}
	}
	svc := func(ns string) v1alpha1.CheckTarget {
		return v1alpha1.CheckTarget{Service: &v1alpha1.CheckServiceTarget{Name: "api", Namespace: ns, Port: 443}}
	}
	for _, tc := range []struct {
		name       string
		target     v1alpha1.CheckTarget
		allowCross bool
		want       targetRead
		refused    string // the refusal's reason, "" if none
	}{
		{"own pod, namespace implied", pod(""), false, targetRead{pod: true, namespace: "shop", name: "db", port: 80}, ""},
		{"own pod, namespace named", pod("shop"), false, targetRead{pod: true, namespace: "shop", name: "db", port: 80}, ""},
		{"other namespace's pod", pod("bank"), false, targetRead{}, v1alpha1.ReasonTargetOutsideNamespace},
		{"other namespace's pod, opted in", pod("bank"), true, targetRead{pod: true, namespace: "bank", name: "db", port: 80, cross: true}, ""},
		{"own service", svc(""), false, targetRead{service: true, namespace: "shop", name: "api", port: 443}, ""},
		{"other namespace's service", svc("bank"), false, targetRead{}, v1alpha1.ReasonTargetOutsideNamespace},
		{"address", v1alpha1.CheckTarget{Address: "10.0.0.9:80"}, false, targetRead{endpoint: "10.0.0.9:80", kind: "Address"}, ""},
		{"url", v1alpha1.CheckTarget{URL: "https://example.com/"}, false, targetRead{endpoint: "https://example.com/", kind: "URL"}, ""},
		{"nothing", v1alpha1.CheckTarget{}, false, targetRead{}, v1alpha1.ReasonInvalidCheck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, refusal := planTarget("shop", spec{target: tc.target}, tc.allowCross)
			if tc.refused != "" {
				require.NotNil(t, refusal)
				assert.Equal(t, tc.refused, refusal.reason)
				assert.False(t, refusal.accepted)
				return
			}
			require.Nil(t, refusal)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPodAndServiceTargets(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "db")
	withIP := &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.0.0.2"}}
	own := targetRead{pod: true, namespace: "shop", name: "db", port: 80}
	cross := own
	cross.namespace, cross.cross = "bank", true
	for _, tc := range []struct {
		name     string
		r        targetRead
		pod      *corev1.Pod
		err      error
		probe    v1alpha1.ProbeType
		endpoint string
		message  string // the refusal's message, "" if none
	}{
		{"pod", own, withIP, nil, "", "10.0.0.2:80", ""},
		{"pod, icmp", own, withIP, nil, v1alpha1.ProbeTypeICMP, "10.0.0.2", ""},
		{"pod not found", own, nil, notFound, "", "", "target pod shop/db: not found"},
		{"pod without IP", own, &corev1.Pod{}, nil, "", "", "target pod shop/db has no IP yet"},
		{"cross pod not found", cross, nil, notFound, "", "", "target pod bank/db: not found, not readable or without an IP yet"},
		{"cross pod without IP", cross, &corev1.Pod{}, nil, "", "", "target pod bank/db: not found, not readable or without an IP yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, refusal := podTarget(tc.r, tc.pod, tc.err, tc.probe)
			if tc.message != "" {
				require.NotNil(t, refusal)
				assert.Equal(t, v1alpha1.ReasonTargetNotFound, refusal.reason)
				assert.Equal(t, tc.message, refusal.message)
				return
			}
			require.Nil(t, refusal)
			assert.Equal(t, tc.endpoint, ep)
		})
	}
	svc := func(ip string, ports ...int32) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: ip}}
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: p})
		}
		return s
	}
	ownS := targetRead{service: true, namespace: "shop", name: "api", port: 443}
	crossS := ownS
	crossS.namespace, crossS.cross = "bank", true
	const crossMsg = "target service bank/api port 443: not found, not readable, headless or without that port"
	for _, tc := range []struct {
		name     string
		r        targetRead
		svc      *corev1.Service
		err      error
		endpoint string
		message  string
	}{
		{"service", ownS, svc("10.96.0.1", 443), nil, "10.96.0.1:443", ""},
		{"service not found", ownS, nil, notFound, "", "target service shop/api: not found"},
		{"headless", ownS, svc(corev1.ClusterIPNone, 443), nil, "", "target service shop/api has no ClusterIP (headless); name a pod instead"},
		{"no such port", ownS, svc("10.96.0.1", 80), nil, "", "target service shop/api has no port 443"},
		{"cross service", crossS, svc("10.96.0.1", 443), nil, "10.96.0.1:443", ""},
		{"cross not found", crossS, nil, notFound, "", crossMsg},
		{"cross headless", crossS, svc("", 443), nil, "", crossMsg},
		{"cross no such port", crossS, svc("10.96.0.1", 80), nil, "", crossMsg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, refusal := serviceTarget(tc.r, tc.svc, tc.err, v1alpha1.ProbeTypeTCP)
			if tc.message != "" {
				require.NotNil(t, refusal)
				assert.Equal(t, tc.message, refusal.message)
				return
			}
			require.Nil(t, refusal)
			assert.Equal(t, tc.endpoint, ep)
		})
	}
}

func TestVetTarget(t *testing.T) {
	var pol targetpolicy.Policy
	for _, tc := range []struct {
		endpoint string
		cross    bool
		refused  bool
	}{
		{"10.0.0.9:80", false, false},
		{"https://10.0.0.9/health", false, false},
		{"example.com:443", false, false}, // names are vetted by the runner
		{"127.0.0.1:80", false, true},
		{"http://localhost:8080/", false, true},
		{"[::1]:80", false, true},
		{"169.254.169.254", false, true},
		{"169.254.169.254", true, true},
	} {
		t.Run(tc.endpoint, func(t *testing.T) {
			p := vetTarget(pol, tc.endpoint, tc.cross)
			if !tc.refused {
				assert.Nil(t, p)
				return
			}
			require.NotNil(t, p)
			assert.Equal(t, v1alpha1.ReasonTargetRefused, p.reason)
			assert.Equal(t, !tc.cross, strings.Contains(p.message, tc.endpoint), "another namespace's target is refused without its address: %s", p.message)
		})
	}
	assert.Nil(t, vetTarget(targetpolicy.Policy{AllowLoopback: true}, "127.0.0.1:80", false), "allow_loopback")
}

func TestSourcePlacement(t *testing.T) {
	running := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0", Labels: labels},
			Spec: corev1.PodSpec{NodeName: "node-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	byName := spec{sourcePod: "web-0"}
	bySel := spec{selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	for _, tc := range []struct {
		name    string
		sp      spec
		pod     *corev1.Pod
		err     error
		want    placement
		message string
	}{
		{"agent", byName, running(nil), nil, placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a", endpoint: "10.0.0.9:80", targetKind: "Address",
			message: "probed from the netpulse agent on node node-a (the source pod has no netpulse sidecar)"}, ""},
		{"sidecar", byName, running(map[string]string{v1alpha1.LabelSidecar: "true"}), nil, placement{accepted: true, mode: v1alpha1.VantageSidecar, sourcePod: "web-0", node: "node-a",
			endpoint: "10.0.0.9:80", targetKind: "Address", message: "probed from the source pod by its netpulse sidecar"}, ""},
		{"not found", byName, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web-0"), placement{reason: v1alpha1.ReasonSourceNotFound}, "source pod shop/web-0: not found"},
		{"none selected", bySel, nil, errNoPodSelected, placement{reason: v1alpha1.ReasonSourceNotFound}, "source pod shop selector app=web: no running pod matches the selector"},
		{"read error", byName, nil, errors.New("timeout"), placement{reason: v1alpha1.ReasonSourceNotFound}, "source pod shop/web-0: timeout"},
		{"pending", byName, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}, nil,
			placement{reason: v1alpha1.ReasonSourceNotReady}, "source pod shop/web-0 is Pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sourcePlacement("shop", tc.sp, tc.pod, tc.err, "10.0.0.9:80", "Address")
			if tc.message != "" {
				tc.want.message = tc.message
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPickSourcePod(t *testing.T) {
	pod := func(name string, age time.Duration, phase corev1.PodPhase, node string, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			now := metav1.NewTime(t0)
			p.DeletionTimestamp = &now
		}
		return p
	}
	got, err := pickSourcePod([]corev1.Pod{
		pod("young", time.Minute, corev1.PodRunning, "n", false),
		pod("oldest-pending", time.Hour, corev1.PodPending, "n", false),
		pod("oldest-deleting", time.Hour, corev1.PodRunning, "n", true),
		pod("oldest-unscheduled", time.Hour, corev1.PodRunning, "", false),
		pod("b-old", 10*time.Minute, corev1.PodRunning, "n", false),
		pod("a-old", 10*time.Minute, corev1.PodRunning, "n", false),
	})
	require.NoError(t, err)
	assert.Equal(t, "a-old", got.Name, "the oldest running, then by name")
	_, err = pickSourcePod([]corev1.Pod{pod("p", 0, corev1.PodPending, "n", false)})
	assert.ErrorIs(t, err, errNoPodSelected)
}

func accepted(node string) placement {
	return placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: node, endpoint: "10.0.0.9:80", targetKind: "Address"}
}

// put tracks a check in b as served.
func put(b *book, cs *checkState) *checkState {
	b.checks[cs.key] = cs
	b.served++
	b.nsServed[cs.key.namespace]++
	return cs
}

func nc(name string) checkKey { return checkKey{v1alpha1.NetworkCheckKind, "shop", name} }

func TestDueForPlacement(t *testing.T) {
	b := newBook(Config{Heartbeat: 10 * time.Minute, MaxChecks: 100, MaxChecksPerNamespace: 100})
	now := t0
	placed := func(name string, p placement, at time.Time) *checkState {
		return put(b, &checkState{key: nc(name), interval: time.Minute, place: p, placed: true, placeAt: at})
	}
	placed("fresh", accepted("n"), now.Add(-time.Minute))
	placed("heartbeat", accepted("n"), now.Add(-10*time.Minute))
	placed("refused-recent", refuse(v1alpha1.ReasonSourceNotFound, "x"), now.Add(-29*time.Second))
	placed("refused-retry", refuse(v1alpha1.ReasonSourceNotFound, "x"), now.Add(-30*time.Second))
	put(b, &checkState{key: nc("new"), wantResolve: true})
	changed := placed("changed", accepted("n"), now.Add(-time.Second))
	changed.wantResolve = true
	silent := placed("silent", accepted("n"), now.Add(-time.Minute))
	silent.st.LastResultTime = now.Add(-4 * time.Minute) // > 3 intervals
	quiet := placed("silent-resolved-recently", accepted("n"), now.Add(-30*time.Second))
	quiet.st.LastResultTime = now.Add(-4 * time.Minute)

	got := b.dueForPlacement(now)
	var names []string
	for _, k := range got {
		names = append(names, k.name)
	}
	assert.Equal(t, []string{"new", "heartbeat", "silent", "refused-retry", "changed"}, names, "due ones, the longest unresolved first")

	// At most checkResolveBatch per reconcile.
	b = newBook(Config{Heartbeat: 10 * time.Minute, MaxChecks: 100, MaxChecksPerNamespace: 100})
	for i := range 3 * checkResolveBatch {
		put(b, &checkState{key: nc(fmt.Sprintf("c%02d", i)), wantResolve: true})
	}
	assert.Len(t, b.dueForPlacement(now), checkResolveBatch)
}

// A check beyond its namespace's quota is refused at once, with no read.
func TestDueForPlacementRefusesOverQuota(t *testing.T) {
	b := newBook(Config{Heartbeat: 10 * time.Minute, MaxChecks: 100, MaxChecksPerNamespace: 1})
	obs := func(name string, age time.Duration) observed {
		return observed{key: nc(name), uid: "uid-" + "name", created: t0.Add(-age), interval: time.Minute, flavour: checkstatus.FlavourNetpulse}
	}
	assert.Empty(t, b.upsert(obs("young", time.Minute), false, true, t0))
	assert.Equal(t, overNamespaceQuota, b.upsert(obs("old", time.Hour), false, true, t0))
	due := b.dueForPlacement(t0)
	assert.Equal(t, []checkKey{nc("old")}, due, "the oldest takes the slot once rebalanced")
	young := b.checks[nc("young")]
	assert.True(t, young.overQuota)
	assert.True(t, young.placed)
	assert.Equal(t, v1alpha1.ReasonNamespaceQuotaExceeded, young.place.reason)
	assert.Equal(t, t0, young.placeSince)
	_, ok := b.resolvable(nc("young"))
	assert.False(t, ok, "no reads for it")

	// max_checks bounds what is tracked at all.
	b = newBook(Config{MaxChecks: 1, MaxChecksPerNamespace: 1})
	assert.Empty(t, b.upsert(obs("a", 0), false, true, t0))
	assert.Equal(t, overNamespaceQuota, b.upsert(obs("b", 0), false, true, t0))
	assert.Equal(t, notTrackedMaxChecks, b.upsert(obs("c", 0), false, true, t0))
	assert.Len(t, b.checks, 2)
}

// A new leader resumes from the API's status, keeping the results it folded in that are
// newer than the API's; a leader ignores what it reads back unless re-reading.
func TestUpsertAdoptsTheAPIsStatus(t *testing.T) {
	b := newBook(Config{MaxChecks: 10, MaxChecksPerNamespace: 10})
	ok := func(at time.Time) checkstatus.Entry {
		return checkstatus.Entry{Time: at, Success: true, Reason: checkstatus.ReasonTCPConnect, Message: "ok"}
	}
	api, _ := checkstatus.Apply(checkstatus.Status{}, checkstatus.FlavourNetpulse, ok(t0))
	o := observed{key: nc("c"), uid: "u1", interval: time.Minute, flavour: checkstatus.FlavourNetpulse, status: api,
		recorded: &recorded{place: accepted("n"), since: t0, sinceKnown: true, observerPod: "netpulse/agent-a", sourceAddress: "10.0.0.1"}}
	b.upsert(o, false, false, t0)
	cs := b.checks[nc("c")]
	assert.True(t, cs.st.Equal(api))
	assert.True(t, cs.written.Equal(api))
	assert.Equal(t, accepted("n"), cs.place)
	assert.Equal(t, cs.place, cs.writtenPlace)
	assert.True(t, cs.placed)
	assert.False(t, cs.wantResolve)
	assert.Equal(t, "10.0.0.1", cs.sourceAddress)

	// This replica folds a newer result in; a leader's informer reads back an older
	// status: ignored.
	cs.st, _ = checkstatus.Apply(cs.st, checkstatus.FlavourNetpulse, ok(t0.Add(time.Minute)))
	b.upsert(o, false, true, t0.Add(time.Minute))
	assert.Len(t, cs.st.Successes, 2)
	// The re-read at takeover adopts the API's and folds the newer result onto it again.
	b.upsert(o, true, true, t0.Add(2*time.Minute))
	assert.Len(t, cs.st.Successes, 2)
	assert.Len(t, cs.written.Successes, 1, "what the API holds is what was written")
	assert.Equal(t, t0.Add(2*time.Minute), cs.lastWrite)

	// A re-created object (another UID) starts from the API.
	o.uid, o.status = "u2", checkstatus.Status{}
	b.upsert(o, false, true, t0.Add(3*time.Minute))
	assert.Empty(t, cs.st.Successes)
	// A new generation is placed again.
	o.generation = 2
	cs.wantResolve = false
	b.upsert(o, false, true, t0.Add(3*time.Minute))
	assert.True(t, cs.wantResolve)
}

func TestPlanWrites(t *testing.T) {
	policy := plan.CheckPolicy{Heartbeat: 10 * time.Minute}
	down, _ := checkstatus.Apply(checkstatus.Status{}, checkstatus.FlavourNetpulse,
		checkstatus.Entry{Time: t0.Add(-time.Second), Reason: checkstatus.ReasonTCPConnectError, Message: "refused"})
	b := newBook(Config{Heartbeat: 10 * time.Minute, MaxChecks: 100, MaxChecksPerNamespace: 100, PruneAfter: time.Hour})
	base := func(key checkKey) *checkState {
		return &checkState{key: key, interval: time.Minute, place: accepted("n"), writtenPlace: accepted("n"), placed: true,
			placeAt: t0, lastWrite: t0.Add(-time.Minute), labels: wantLabels(accepted("n"))}
	}
	put(b, base(nc("quiet")))
	cond := put(b, base(nc("condition")))
	cond.st = down
	moved := put(b, base(nc("moved")))
	moved.place = accepted("other-node")
	refused := put(b, base(nc("refused-as-is")))
	refused.st = down
	refused.rejected = &snapshot{st: down.DeepCopy(), place: refused.place}
	silent := put(b, base(nc("silent")))
	silent.st, _ = checkstatus.Apply(checkstatus.Status{}, checkstatus.FlavourNetpulse, checkstatus.Entry{Time: t0.Add(-time.Hour), Success: true, Reason: checkstatus.ReasonTCPConnect})
	silent.written = silent.st
	over := put(b, base(nc("over-quota")))
	over.overQuota = true
	over.place = b.quotaRefusal()
	over.labels = nil
	unlabelled := put(b, base(nc("unlabelled")))
	unlabelled.labels = nil
	stale := put(b, base(checkKey{ocv1alpha1.Kind, "shop", "stale"}))
	stale.sourceGoneSince = t0.Add(-time.Hour)
	stalenc := put(b, base(nc("gone-source")))
	stalenc.sourceGoneSince = t0.Add(-time.Hour)
	put(b, &checkState{key: nc("unplaced")})

	wp := b.plan(t0, policy)
	whys := map[string]string{}
	significant := map[string]bool{}
	for _, sw := range wp.statuses {
		whys[sw.key.name] = sw.why
		significant[sw.key.name] = sw.significant
	}
	assert.Equal(t, map[string]string{
		"condition":  plan.CheckWriteCondition,
		"moved":      plan.CheckWritePlacement,
		"silent":     plan.CheckWriteCondition, // turned Unknown
		"over-quota": plan.CheckWritePlacement,
	}, whys)
	assert.Equal(t, map[string]bool{"condition": true, "moved": true, "silent": true, "over-quota": false}, significant,
		"a check beyond its quota is routine whatever changed")
	assert.Equal(t, checkstatus.ConditionUnknown, silent.st.Reachable.Status)
	assert.Equal(t, []checkKey{{ocv1alpha1.Kind, "shop", "stale"}}, wp.prunes, "only OpenShift's kind is pruned")
	assert.True(t, stale.deleting)
	var labelled []string
	for _, lp := range wp.labels {
		labelled = append(labelled, lp.key.name)
		if lp.key.name == "unlabelled" {
			assert.JSONEq(t, `{"metadata":{"labels":{"netpulse.io/vantage-mode":"Agent","netpulse.io/vantage-node":"n"}}}`, string(lp.data))
		}
	}
	assert.ElementsMatch(t, []string{"moved", "unlabelled"}, labelled)
	assert.Equal(t, map[string]int64{v1alpha1.ReasonCheckAccepted: 8, v1alpha1.ReasonNamespaceQuotaExceeded: 1}, wp.byReason)

	// A labels patch the API refused is not sent again as it is.
	data, ok := labelsPatch(unlabelled)
	require.True(t, ok)
	b.labelsRefused(unlabelled.key, data)
	_, ok = labelsPatch(unlabelled)
	assert.False(t, ok)

	// A written snapshot is what the next decision compares with.
	s, status, ok := b.snapshotOf(cond.key)
	require.True(t, ok)
	assert.IsType(t, v1alpha1.NetworkCheckStatus{}, status)
	b.written(cond.key, s, t0)
	wp = b.plan(t0.Add(time.Second), policy)
	for _, sw := range wp.statuses {
		assert.NotEqual(t, "condition", sw.key.name, "written: not due again")
	}
	_, status, _ = b.snapshotOf(stale.key)
	assert.IsType(t, ocv1alpha1.PodNetworkConnectivityCheckStatus{}, status)
}

// BenchmarkPlan: one reconcile's write decisions over 1,000 placed, healthy checks (the
// per-check cost of the checks' reconcile, without reads). ns/check is reported.
func BenchmarkPlan(b *testing.B) {
	const n = 1000
	bk := newBook(Config{Heartbeat: 10 * time.Minute, MaxChecks: n, MaxChecksPerNamespace: n})
	var st checkstatus.Status
	for i := range checkstatus.MaxLogEntries {
		st, _ = checkstatus.Apply(st, checkstatus.FlavourNetpulse, checkstatus.Entry{Time: t0.Add(time.Duration(i-10) * time.Second), Success: true, Reason: checkstatus.ReasonTCPConnect})
	}
	for i := range n {
		p := accepted("n")
		put(bk, &checkState{key: nc(fmt.Sprintf("c%04d", i)), interval: time.Minute, place: p, writtenPlace: p, placed: true, placeAt: t0,
			st: st, written: st, lastWrite: t0, labels: wantLabels(p)})
	}
	policy := plan.CheckPolicy{Heartbeat: 10 * time.Minute}
	b.ReportAllocs()
	for b.Loop() {
		if wp := bk.plan(t0.Add(time.Second), policy); len(wp.statuses) != 0 {
			b.Fatal("nothing is due")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/check")
}

// BenchmarkFold: one routine result folded into a check with full logs.
func BenchmarkFold(b *testing.B) {
	bk := newBook(Config{MaxChecks: 1, MaxChecksPerNamespace: 1})
	cs := put(bk, &checkState{key: nc("c"), interval: time.Minute, place: accepted("node-a"), placed: true})
	for i := range checkstatus.MaxLogEntries {
		cs.st, _ = checkstatus.Apply(cs.st, checkstatus.FlavourNetpulse, checkstatus.Entry{Time: t0.Add(time.Duration(i) * time.Second), Success: true, Reason: checkstatus.ReasonTCPConnect})
	}
	r := result{key: nc("c"), complete: true, success: true, reason: checkstatus.ReasonTCPConnect, message: "ok", latency: 0.002,
		source: "10.0.0.1", reporterNS: "netpulse", reporterPod: "agent-a", reporterNode: "node-a"}
	now := t0.Add(time.Hour)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		r.at = t0.Add(time.Minute + time.Duration(i)*time.Millisecond)
		if _, skip := bk.fold(r, nil, now); skip != "" {
			b.Fatal(skip)
		}
	}
}

// A new leader gives a check whose last result predates its term a silence allowance of its
// own before NoResults: the results sent while the old leader went away are lost. A check
// that went silent before the term, or whose allowance has passed, turns Unknown.
func TestTakeoverGraceBeforeNoResults(t *testing.T) {
	policy := plan.CheckPolicy{Heartbeat: 10 * time.Minute}
	b := newBook(Config{Heartbeat: 10 * time.Minute, MaxChecks: 100, MaxChecksPerNamespace: 100})
	cs := put(b, &checkState{key: nc("c"), interval: 10 * time.Second, place: accepted("n"), writtenPlace: accepted("n"), placed: true,
		placeAt: t0, lastWrite: t0, labels: wantLabels(accepted("n"))})
	cs.st, _ = checkstatus.Apply(checkstatus.Status{}, checkstatus.FlavourNetpulse, checkstatus.Entry{Time: t0, Success: true, Reason: checkstatus.ReasonTCPConnect})
	cs.written = cs.st
	b.termStart = t0.Add(10 * time.Second) // the old leader's last result at t0
	b.plan(t0.Add(35*time.Second), policy)
	assert.Equal(t, checkstatus.ConditionTrue, cs.st.Reachable.Status, "25 s into the term: within its 30 s allowance")
	b.plan(t0.Add(41*time.Second), policy)
	assert.Equal(t, checkstatus.ConditionUnknown, cs.st.Reachable.Status, "31 s into the term, 41 s after the last result: silent")
	// Without a term (a standby never plans; the unit's zero) silence counts from the result.
	b2 := newBook(Config{Heartbeat: 10 * time.Minute, MaxChecks: 100, MaxChecksPerNamespace: 100})
	cs2 := put(b2, &checkState{key: nc("c"), interval: 10 * time.Second, place: accepted("n"), writtenPlace: accepted("n"), placed: true,
		placeAt: t0, lastWrite: t0, labels: wantLabels(accepted("n"))})
	cs2.st = cs.written
	b2.plan(t0.Add(31*time.Second), policy)
	assert.Equal(t, checkstatus.ConditionUnknown, cs2.st.Reachable.Status)
}
