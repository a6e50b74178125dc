// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/identity"
)

var agentA = identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-a", PodUID: "uid-a", NodeName: "node-a", Role: identity.RoleAgent}

func viaAuth(id identity.Identity) context.Context {
	return client.NewContext(context.Background(), client.Info{Auth: identity.NewAuthData(id)})
}

func viaAuthOf(ns, pod, uid, node string) context.Context {
	id := agentA
	id.Namespace, id.PodName, id.PodUID, id.NodeName = ns, pod, uid, node
	return viaAuth(id)
}

func sidecarOn(node string) identity.Identity {
	return identity.Identity{Namespace: "shop", ServiceAccount: "web", PodName: "web-0", PodUID: "uid-w", NodeName: node, Role: identity.RoleSidecar}
}

// queued is one write the controller handed to the writer.
type queued struct {
	key    string
	prio   writequeue.Priority
	reason string
	write  func(context.Context) error
}

// harness is a controller over recording funcs and a test telemetry.
type harness struct {
	c  *Controller
	tt *componenttest.Telemetry

	mu     sync.Mutex
	writes []queued
	events []corev1.ObjectReference
}

func (h *harness) queued() []queued {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]queued(nil), h.writes...)
}

func defaultConfig() Config {
	return Config{Heartbeat: 10 * time.Minute, MaxChecks: 1000, MaxChecksPerNamespace: 100, EventsPerMinute: 30}
}

func newHarness(t *testing.T, cfg Config, bind bool) *harness {
	t.Helper()
	h := &harness{tt: componenttest.NewTelemetry()}
	t.Cleanup(func() { _ = h.tt.Shutdown(context.Background()) })
	tb, err := metadata.NewTelemetryBuilder(h.tt.NewTelemetrySettings())
	require.NoError(t, err)
	d := Deps{Telemetry: tb,
		Enqueue: func(key string, p writequeue.Priority, write func(context.Context) error, reason string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.writes = append(h.writes, queued{key, p, reason, write})
		},
		Event: func(obj corev1.ObjectReference, _, _, _ string, _ time.Time) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, obj)
		},
	}
	if bind {
		d.Bind = identity.MatchResourceContext
	}
	h.c = New(cfg, d)
	t.Cleanup(h.c.Shutdown)
	return h
}

// track puts a placed check straight into the controller's memory, as a first sight of it
// would, within its namespace's quota.
func (h *harness) track(key checkKey, p placement) *checkState {
	cs := &checkState{key: key, interval: 10 * time.Second, place: p, writtenPlace: p, placed: true, uid: types.UID("uid-" + key.name)}
	h.c.book.checks[key] = cs
	h.c.book.served++
	h.c.book.nsServed[key.namespace]++
	return cs
}

func (h *harness) skipped() map[string]int64 {
	out := map[string]int64{}
	m, err := h.tt.GetMetric("otelcol_pod_network_health_datapoints_skipped")
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("reason"))
		out[v.AsString()] += dp.Value
	}
	return out
}

// checkResult is one pod_probe check record from reporter (namespace/pod@node).
func checkResult(kind, ns, name string, reporterNS, reporterPod, reporterUID, reporterNode string, at time.Time, ok bool) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	ra := rl.Resource().Attributes()
	ra.PutStr(contract.K8sNamespaceName, reporterNS)
	ra.PutStr(contract.K8sPodName, reporterPod)
	ra.PutStr(contract.K8sPodUID, reporterUID)
	ra.PutStr(contract.K8sNodeName, reporterNode)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName(contract.CheckResultEvent)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
	lr.Body().SetStr("tcp connection to 10.0.0.9:80 succeeded")
	a := lr.Attributes()
	a.PutStr(contract.CheckKind, kind)
	a.PutStr(contract.CheckNamespace, ns)
	a.PutStr(contract.CheckName, name)
	a.PutBool(contract.CheckSuccess, ok)
	reason := checkstatus.ReasonTCPConnect
	if !ok {
		reason = checkstatus.ReasonTCPConnectError
	}
	a.PutStr(contract.CheckReason, reason)
	a.PutDouble(contract.CheckLatency, 0.002)
	a.PutStr(contract.SourceAddress, "198.18.0.250")
	return ld
}

// Only the vantage point a check was placed on may report for it, under its own
// authenticated identity; what it reports follows OpenShift's semantics per kind.
func TestCheckResultsBoundToVantage(t *testing.T) {
	h := newHarness(t, defaultConfig(), true)
	c := h.c
	sidecarKey := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	agentKey := checkKey{ocv1alpha1.Kind, "shop", "web-to-api"}
	h.track(sidecarKey, placement{accepted: true, mode: v1alpha1.VantageSidecar, sourcePod: "web-0", node: "node-a"})
	h.track(agentKey, placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-1", node: "node-a"})
	refused := checkKey{v1alpha1.NetworkCheckKind, "shop", "to-metadata"}
	h.track(refused, placement{reason: v1alpha1.ReasonTargetRefused})

	now := time.Now()
	sidecar := viaAuthOf("shop", "web-0", "uid-w", "node-a")
	// Accepted: the sidecar for its own pod; the node's agent for the agent-placed check.
	c.ConsumeLogs(sidecar, checkResult(sidecarKey.kind, "shop", "web-to-db", "shop", "web-0", "uid-w", "node-a", now, true))
	c.ConsumeLogs(viaAuth(agentA), checkResult(agentKey.kind, "shop", "web-to-api", "netpulse", "agent-a", "uid-a", "node-a", now, false))
	// Refused: an agent of the node for a sidecar-placed check, another node's agent, the
	// sidecar in someone else's name, no identity, an unknown check, a refused check.
	c.ConsumeLogs(viaAuth(agentA), checkResult(sidecarKey.kind, "shop", "web-to-db", "netpulse", "agent-a", "uid-a", "node-a", now.Add(time.Second), false))
	agentB := viaAuthOf("netpulse", "agent-b", "uid-b", "node-b")
	c.ConsumeLogs(agentB, checkResult(agentKey.kind, "shop", "web-to-api", "netpulse", "agent-b", "uid-b", "node-b", now.Add(time.Second), true))
	c.ConsumeLogs(sidecar, checkResult(agentKey.kind, "shop", "web-to-api", "netpulse", "agent-a", "uid-a", "node-a", now.Add(time.Second), true))
	c.ConsumeLogs(context.Background(), checkResult(sidecarKey.kind, "shop", "web-to-db", "shop", "web-0", "uid-w", "node-a", now.Add(time.Second), false))
	c.ConsumeLogs(sidecar, checkResult(sidecarKey.kind, "shop", "nope", "shop", "web-0", "uid-w", "node-a", now.Add(time.Second), false))
	c.ConsumeLogs(sidecar, checkResult(refused.kind, "shop", "to-metadata", "shop", "web-0", "uid-w", "node-a", now.Add(time.Second), false))

	sc := c.book.checks[sidecarKey]
	require.Len(t, sc.st.Successes, 1)
	assert.Empty(t, sc.st.Failures, "no foreign failure reached the sidecar's check")
	assert.Equal(t, checkstatus.ConditionTrue, sc.st.Reachable.Status)
	assert.Equal(t, checkstatus.ReasonProbeSucceeded, sc.st.Reachable.Reason, "netpulse's flavour for NetworkCheck")
	assert.Equal(t, "shop/web-0", sc.observerPod)
	assert.Equal(t, "198.18.0.250", sc.sourceAddress)
	st := ncStatus(sc)
	assert.Equal(t, v1alpha1.Reachable, st.Reachability)
	require.NotNil(t, st.Latency)
	assert.Equal(t, v1alpha1.Duration("2ms"), st.Latency.P50)

	ac := c.book.checks[agentKey]
	require.Len(t, ac.st.Failures, 1)
	assert.Empty(t, ac.st.Successes)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, ac.st.Reachable.Reason, "OpenShift's flavour for PodNetworkConnectivityCheck")
	require.Len(t, ac.st.Outages, 1)
	ps := pnccStatus(ac.st)
	require.Len(t, ps.Conditions, 1)
	assert.Equal(t, ocv1alpha1.Reachable, ps.Conditions[0].Type)
	assert.Equal(t, "False", string(ps.Conditions[0].Status))

	assert.Equal(t, map[string]int64{SkipCheckWrongVantage: 2, SkipCheckUnauthentic: 2, SkipCheckUnknown: 2}, h.skipped())
}

// A sidecar on a node cannot report for the agent-mode checks placed on that node (other
// namespaces' checks): only the node's agent may. It still reports its own pod's checks.
func TestSidecarCannotReportAgentPlacedChecks(t *testing.T) {
	h := newHarness(t, defaultConfig(), true)
	c := h.c
	own := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	h.track(own, placement{accepted: true, mode: v1alpha1.VantageSidecar, sourcePod: "web-0", node: "node-a"})
	foreign := checkKey{v1alpha1.NetworkCheckKind, "bank", "ledger-to-db"}
	h.track(foreign, placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "ledger-0", node: "node-a"})

	now := time.Now()
	sidecar := viaAuth(sidecarOn("node-a"))
	c.ConsumeLogs(sidecar, checkResult(foreign.kind, "bank", "ledger-to-db", "shop", "web-0", "uid-w", "node-a", now, false))
	c.ConsumeLogs(sidecar, checkResult(own.kind, "shop", "web-to-db", "shop", "web-0", "uid-w", "node-a", now, true))
	assert.Empty(t, c.book.checks[foreign].st.Failures, "the sidecar's word on another namespace's check is not used")
	assert.Empty(t, c.book.checks[foreign].st.Successes)
	assert.Len(t, c.book.checks[own].st.Successes, 1, "its own pod's check is")
	// The node's agent may.
	c.ConsumeLogs(viaAuth(agentA), checkResult(foreign.kind, "bank", "ledger-to-db", "netpulse", "agent-a", "uid-a", "node-a", now, false))
	assert.Len(t, c.book.checks[foreign].st.Failures, 1)
	assert.Equal(t, map[string]int64{string(identity.RefusedNotAgent): 1}, h.skipped())
}

// A takeover resumes from the API: the status read back equals what was written.
func TestCheckStatusRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	var st checkstatus.Status
	for i, ok := range []bool{true, false, false, true} {
		st, _ = checkstatus.Apply(st, checkstatus.FlavourNetpulse, checkstatus.Entry{Time: t0.Add(time.Duration(i) * 10 * time.Second), Success: ok,
			Reason: map[bool]string{true: checkstatus.ReasonTCPConnect, false: checkstatus.ReasonTCPConnectError}[ok], Message: "m", Latency: time.Millisecond})
	}
	cs := &checkState{st: st, generation: 3, placeSince: t0, observerPod: "netpulse/agent-a", sourceAddress: "10.0.0.1",
		place: placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "n1", endpoint: "10.0.0.9:80", targetKind: "Service"}}
	api := ncStatus(cs)
	back := statusOfNC(&api)
	assert.True(t, st.Equal(back), "NetworkCheck round trip:\n%+v\n%+v", st, back)
	rec := recordedOfNC(&api)
	assert.Equal(t, cs.place, rec.place)
	assert.True(t, rec.sinceKnown)
	assert.True(t, rec.since.Equal(t0))
	assert.Equal(t, "netpulse/agent-a", rec.observerPod)
	assert.Equal(t, "10.0.0.1", rec.sourceAddress)
	ps := pnccStatus(st)
	assert.True(t, st.Equal(statusOfPNCC(&ps)), "PodNetworkConnectivityCheck round trip")
}

// A sender's strings are checked against the API schema before anything is queued: a
// hostile reason (it becomes the Reachable condition's reason, pattern-checked by the
// API), an over-long or non-IP source address, a NaN latency. Before, such a record was
// folded in and every later status write of the check failed with 422.
func TestHostileCheckResultsAreRefusedBeforeQueueing(t *testing.T) {
	h := newHarness(t, defaultConfig(), false)
	c := h.c
	key := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	cs := h.track(key, placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a"})
	now := time.Now()
	record := func(at time.Time, mutate func(attrs map[string]any)) {
		ld := checkResult(key.kind, key.namespace, key.name, "netpulse", "agent-a", "uid-a", "node-a", at, false)
		attrs := map[string]any{}
		mutate(attrs)
		a := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes()
		for k, v := range attrs {
			switch v := v.(type) {
			case string:
				a.PutStr(k, v)
			case float64:
				a.PutDouble(k, v)
			}
		}
		c.ConsumeLogs(context.Background(), ld)
	}
	hostile := []func(map[string]any){
		func(a map[string]any) { a[contract.CheckReason] = "Bad Reason<script>" },
		func(a map[string]any) { a[contract.CheckReason] = "Trailing:" },
		func(a map[string]any) { a[contract.CheckReason] = strings.Repeat("A", 65) },
		func(a map[string]any) { a[contract.SourceAddress] = strings.Repeat("1", 100) },
		func(a map[string]any) { a[contract.SourceAddress] = "not-an-address" },
		// A reason only the gateway gives: no reporter may claim a NetworkPolicy denial.
		func(a map[string]any) { a[contract.CheckReason] = contract.CheckReasonNetworkPolicyDenied },
	}
	for i, m := range hostile {
		record(now.Add(time.Duration(i)*time.Second), m)
	}
	assert.Empty(t, cs.st.Failures, "no hostile record was folded in")
	assert.Empty(t, cs.st.Reachable.Reason)
	assert.Empty(t, cs.sourceAddress)
	assert.Equal(t, map[string]int64{SkipCheckInvalid: int64(len(hostile))}, h.skipped())

	// A NaN latency is read as none; a valid record is folded in and its status is one
	// the API accepts.
	record(now.Add(time.Minute), func(a map[string]any) { a[contract.CheckLatency] = math.NaN() })
	require.Len(t, cs.st.Failures, 1)
	assert.Zero(t, cs.st.Failures[0].Latency)
	st := ncStatus(cs)
	for _, cond := range st.Conditions {
		assert.True(t, checkstatus.ValidReason(cond.Reason), cond.Reason)
	}
	assert.LessOrEqual(t, len(st.Vantage.SourceAddress), maxSourceAddressLength)
}

func runningPod(ns, name, node, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}}
}

// A check may target only its own namespace's pods and Services unless the cluster admin
// opts in; a refusal looks nothing up, and with the opt-in no message tells a missing
// object from one without an address, or names an address.
func TestCheckTargetsStayInTheirNamespace(t *testing.T) {
	h := newHarness(t, defaultConfig(), false)
	kube := kubefake.NewSimpleClientset(runningPod("shop", "web-0", "node-a", "10.0.0.1"), runningPod("shop", "db", "node-b", "10.0.0.2"),
		runningPod("bank", "vault", "node-b", "10.0.9.9"), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bank", Name: "pending"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bank", Name: "ledger"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.50", Ports: []corev1.ServicePort{{Port: 5432}}}})
	c := h.c
	c.kube = kube
	check := func(target v1alpha1.CheckTarget) spec { return spec{sourcePod: "web-0", target: target} }
	key := checkKey{v1alpha1.NetworkCheckKind, "shop", "c"}
	ctx := context.Background()

	// Own namespace (explicit or not): accepted.
	p := c.resolve(ctx, key, check(v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "db", Namespace: "shop", Port: 80}}))
	require.True(t, p.accepted, p.message)
	assert.Equal(t, "10.0.0.2:80", p.endpoint)

	kube.ClearActions()
	for _, target := range []v1alpha1.CheckTarget{
		{Pod: &v1alpha1.CheckPodTarget{Name: "vault", Namespace: "bank", Port: 8200}},
		{Pod: &v1alpha1.CheckPodTarget{Name: "nothing-here", Namespace: "bank", Port: 8200}},
		{Service: &v1alpha1.CheckServiceTarget{Name: "ledger", Namespace: "bank", Port: 5432}},
	} {
		p := c.resolve(ctx, key, check(target))
		assert.False(t, p.accepted)
		assert.Equal(t, v1alpha1.ReasonTargetOutsideNamespace, p.reason)
		assert.NotContains(t, p.message, "bank")
		assert.NotContains(t, p.message, "10.")
	}
	for _, a := range kube.Actions() {
		assert.NotEqual(t, "bank", a.GetNamespace(), "a refused target is not looked up: %v", a)
	}

	// Opted in: served; a missing pod, one without an IP and a Service without that port
	// read alike and name no address.
	c.cfg.AllowCrossNamespaceTargets = true
	p = c.resolve(ctx, key, check(v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "vault", Namespace: "bank", Port: 8200}}))
	require.True(t, p.accepted, p.message)
	assert.Equal(t, "10.0.9.9:8200", p.endpoint)
	missing := c.resolve(ctx, key, check(v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "nothing-here", Namespace: "bank", Port: 80}}))
	pending := c.resolve(ctx, key, check(v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "pending", Namespace: "bank", Port: 80}}))
	assert.Equal(t, v1alpha1.ReasonTargetNotFound, missing.reason)
	assert.Equal(t, strings.Replace(missing.message, "nothing-here", "pending", 1), pending.message)
	noPort := c.resolve(ctx, key, check(v1alpha1.CheckTarget{Service: &v1alpha1.CheckServiceTarget{Name: "ledger", Namespace: "bank", Port: 1}}))
	noSvc := c.resolve(ctx, key, check(v1alpha1.CheckTarget{Service: &v1alpha1.CheckServiceTarget{Name: "gone", Namespace: "bank", Port: 1}}))
	assert.Equal(t, strings.Replace(noSvc.message, "gone", "ledger", 1), noPort.message)
	for _, p := range []placement{missing, pending, noPort, noSvc} {
		assert.NotContains(t, p.message, "10.")
	}
}

// Each namespace gets checks.max_checks_per_namespace checks (the oldest); the others read
// Accepted=False/NamespaceQuotaExceeded, cost no reads, take no results, and one takes a
// freed slot.
func TestChecksPerNamespaceQuota(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxChecksPerNamespace = 2
	h := newHarness(t, cfg, false)
	kube := kubefake.NewSimpleClientset(runningPod("busy", "web-0", "node-a", "10.0.0.1"), runningPod("calm", "web-0", "node-a", "10.0.1.1"), runningPod("rev", "web-0", "node-a", "10.0.2.1"))
	c := h.c
	c.kube = kube
	c.Lead(context.Background())
	c.resumed = true
	t0 := time.Now().Add(-time.Hour)
	add := func(ns, name string, age time.Duration) {
		c.observe(v1alpha1.NetworkCheckKind, &v1alpha1.NetworkCheck{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + name), CreationTimestamp: metav1.NewTime(t0.Add(age))},
			Spec: v1alpha1.NetworkCheckSpec{Source: v1alpha1.CheckSource{PodName: "web-0"},
				Target: v1alpha1.CheckTarget{Address: "192.0.2.10:80"}}}, false)
	}
	for i := range 5 {
		add("busy", fmt.Sprintf("c%d", i), time.Duration(i)*time.Minute)
	}
	add("calm", "c0", 0)
	// Checks arrive in the informer's order (by name), not by age: the oldest are served
	// all the same.
	add("rev", "a-newest", 10*time.Minute)
	add("rev", "b-middle", 5*time.Minute)
	add("rev", "c-oldest", 0)
	now := time.Now()
	c.Reconcile(context.Background(), now)
	refused := map[string]string{}
	served := 0
	for k, cs := range c.book.checks {
		if !cs.place.accepted {
			refused[k.namespace+"/"+k.name] = cs.place.reason
			assert.Contains(t, cs.place.message, "max_checks_per_namespace: 2")
		} else {
			served++
		}
	}
	assert.Equal(t, map[string]string{"busy/c2": v1alpha1.ReasonNamespaceQuotaExceeded, "busy/c3": v1alpha1.ReasonNamespaceQuotaExceeded,
		"busy/c4": v1alpha1.ReasonNamespaceQuotaExceeded, "rev/a-newest": v1alpha1.ReasonNamespaceQuotaExceeded}, refused, "the newest of each namespace")
	assert.Equal(t, 5, served, "the calm namespace is served whatever the busy one does")
	for _, a := range kube.Actions() {
		if a.GetNamespace() == "busy" {
			assert.NotContains(t, []string{"c2", "c3", "c4"}, a.(clienttesting.GetAction).GetName())
		}
	}
	// An over-quota check takes no results.
	c.ConsumeLogs(context.Background(), checkResult(v1alpha1.NetworkCheckKind, "busy", "c3", "netpulse", "agent-a", "uid-a", "node-a", now, true))
	assert.Empty(t, c.book.checks[checkKey{v1alpha1.NetworkCheckKind, "busy", "c3"}].st.Successes)
	// Its status (the refusal) is queued as a routine check write; the served ones' first
	// status as a significant one.
	prio := map[string]writequeue.Priority{}
	for _, w := range h.queued() {
		prio[w.key] = w.prio
	}
	assert.Equal(t, writequeue.CheckUpdate, prio["checkstatus/NetworkCheck/busy/c3"])
	assert.Equal(t, writequeue.CheckVerdict, prio["checkstatus/NetworkCheck/busy/c0"])
	// The refusals are counted by reason.
	m, err := h.tt.GetMetric("otelcol_pod_network_health_checks")
	require.NoError(t, err)
	counts := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("accepted_reason"))
		counts[v.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]int64{v1alpha1.ReasonCheckAccepted: 5, v1alpha1.ReasonNamespaceQuotaExceeded: 4}, counts)

	// Deleting a served check frees a slot for the oldest waiting one.
	c.mu.Lock()
	c.book.forget(checkKey{v1alpha1.NetworkCheckKind, "busy", "c0"})
	c.mu.Unlock()
	c.Reconcile(context.Background(), now.Add(time.Second))
	assert.True(t, c.book.checks[checkKey{v1alpha1.NetworkCheckKind, "busy", "c2"}].place.accepted, c.book.checks[checkKey{v1alpha1.NetworkCheckKind, "busy", "c2"}].place.message)
	assert.False(t, c.book.checks[checkKey{v1alpha1.NetworkCheckKind, "busy", "c3"}].place.accepted)
	assert.Equal(t, 2, c.book.nsServed["busy"])
}

// Events: only a leader that has resumed from the API emits them, within the checks' own
// limiter (checks.events_per_minute); the rest are counted as dropped.
func TestCheckEventsOnlyFromAResumedLeaderWithinTheirLimiter(t *testing.T) {
	cfg := defaultConfig()
	cfg.EventsPerMinute = 3
	h := newHarness(t, cfg, false)
	c := h.c
	now := time.Now()
	flap := func(n int, at time.Time) {
		for i := range n {
			key := checkKey{v1alpha1.NetworkCheckKind, "flap", fmt.Sprintf("c%d", i)}
			if _, ok := c.book.checks[key]; !ok {
				h.track(key, placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a"})
			}
			c.ConsumeLogs(context.Background(), checkResult(key.kind, key.namespace, key.name, "netpulse", "agent-a", "uid-a", "node-a", at, true))
			c.ConsumeLogs(context.Background(), checkResult(key.kind, key.namespace, key.name, "netpulse", "agent-a", "uid-a", "node-a", at.Add(time.Second), false))
		}
	}
	flap(2, now.Add(-3*time.Minute))
	assert.Empty(t, h.events, "a standby emits nothing")
	c.Lead(context.Background())
	flap(2, now.Add(-2*time.Minute))
	assert.Empty(t, h.events, "a leader that has not resumed emits nothing")
	c.resumed = true
	flap(5, now.Add(-time.Minute))
	require.Len(t, h.events, 3, "the checks' limiter")
	assert.Equal(t, v1alpha1.NetworkCheckKind, h.events[0].Kind)
	assert.Equal(t, types.UID("uid-c0"), h.events[0].UID)
	m, err := h.tt.GetMetric("otelcol_pod_network_health_writes_dropped")
	require.NoError(t, err)
	var dropped int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("priority"))
		assert.Equal(t, "check_event", v.AsString())
		dropped += dp.Value
	}
	// c0 and c1 give two Events each (the restore of their outage, then a new one), the
	// three others one: 7, of which 3 were emitted.
	assert.Equal(t, int64(4), dropped)
}
