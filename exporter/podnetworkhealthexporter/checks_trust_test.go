// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/netpulse/netpulse/api/client/clientset/versioned/fake"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
)

func skippedByReason(t *testing.T, tt *componenttest.Telemetry) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := tt.GetMetric("otelcol_pod_network_health_datapoints_skipped")
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("reason"))
		out[v.AsString()] += dp.Value
	}
	return out
}

// A sender's strings are checked against the API schema before anything is queued: a
// hostile reason (it becomes the Reachable condition's reason, pattern-checked by the
// API), an over-long or non-IP source address, a NaN latency. Before, such a record was
// folded in and every later status write of the check failed with 422.
func TestHostileCheckResultsAreRefusedBeforeQueueing(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Checks.Enabled = true
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	e, err := newExporter(cfg, set)
	require.NoError(t, err)
	c := e.checks
	key := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	c.checks[key] = &checkState{key: key, interval: 10 * time.Second,
		place: placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a"}}
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
		c.consumeLogs(context.Background(), ld)
	}
	hostile := []func(map[string]any){
		func(a map[string]any) { a[contract.CheckReason] = "Bad Reason<script>" },
		func(a map[string]any) { a[contract.CheckReason] = "Trailing:" },
		func(a map[string]any) { a[contract.CheckReason] = strings.Repeat("A", 65) },
		func(a map[string]any) { a[contract.SourceAddress] = strings.Repeat("1", 100) },
		func(a map[string]any) { a[contract.SourceAddress] = "not-an-address" },
	}
	for i, m := range hostile {
		record(now.Add(time.Duration(i)*time.Second), m)
	}
	cs := c.checks[key]
	assert.Empty(t, cs.st.Failures, "no hostile record was folded in")
	assert.Empty(t, cs.st.Reachable.Reason)
	assert.Empty(t, cs.sourceAddress)
	assert.Equal(t, map[string]int64{SkipCheckInvalid: int64(len(hostile))}, skippedByReason(t, tt))

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

// A status write the API refuses (422) is not retried: counted as rejected, the check is
// marked and its status is queued again only once it changes.
func TestRejectedCheckStatusIsNotRetried(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Checks.Enabled = true
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	e, err := newExporter(cfg, set)
	require.NoError(t, err)
	var patches atomic.Int32
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{networkCheckGVR: "NetworkCheckList", pnccGVR: "PodNetworkConnectivityCheckList"})
	dyn.PrependReactor("patch", "networkchecks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return true, &unstructured.Unstructured{}, nil
		}
		patches.Add(1)
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: v1alpha1.GroupName, Kind: v1alpha1.NetworkCheckKind}, "web-to-db",
			field.ErrorList{field.Invalid(field.NewPath("status", "conditions").Index(1).Child("reason"), "x", "pattern")})
	})
	e.kube = kubefake.NewSimpleClientset()
	e.checks.dyn = dyn
	e.initWriter(fake.NewSimpleClientset())
	defer e.writer.stop()
	c := e.checks
	c.leading.Store(true)
	c.resumed = true
	key := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	now := time.Now()
	p := placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a", endpoint: "10.0.0.9:80", targetKind: "Address"}
	c.checks[key] = &checkState{key: key, interval: 10 * time.Second, place: p, writtenPlace: p, placed: true, placeAt: now, lastWrite: now,
		labels: wantLabels(p)}
	c.consumeLogs(context.Background(), checkResult(key.kind, key.namespace, key.name, "netpulse", "agent-a", "uid-a", "node-a", now, false))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.writer.run(ctx, 1)
	c.reconcile(ctx, now)
	require.Eventually(t, func() bool { return e.writer.pendingCount() == 0 && patches.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	// Reconciles go on: the refused state is not queued again, nor retried by the writer.
	for i := range 5 {
		c.reconcile(ctx, now.Add(time.Duration(i+1)*time.Second))
	}
	time.Sleep(300 * time.Millisecond) // longer than the writer's first back-off
	assert.Equal(t, int32(1), patches.Load(), "a 4xx is never retried")
	assert.Zero(t, e.writer.pendingCount())
	c.mu.Lock()
	assert.NotNil(t, c.checks[key].rejected, "the check is marked")
	c.mu.Unlock()
	writes := map[string]int64{}
	m, err := tt.GetMetric("otelcol_pod_network_health_api_writes")
	require.NoError(t, err)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("outcome"))
		writes[v.AsString()] += dp.Value
	}
	assert.Equal(t, int64(1), writes["rejected"])
	assert.Zero(t, writes["error"])

	// A new result changes the state: written again.
	c.consumeLogs(context.Background(), checkResult(key.kind, key.namespace, key.name, "netpulse", "agent-a", "uid-a", "node-a", now.Add(time.Second), true))
	c.reconcile(ctx, now.Add(10*time.Second))
	require.Eventually(t, func() bool { return patches.Load() == 2 }, 5*time.Second, 5*time.Millisecond)
}

// The writer never retries a 4xx answer (other than 401, 408, 409, 429), for any kind of
// write.
func TestWriterDoesNotRetryRejectedWrites(t *testing.T) {
	var res results
	w := newWriter(fake.NewSimpleClientset(), "", 1000, 10, zap.NewNop(), res.done)
	defer w.stop()
	calls := map[string]*atomic.Int32{}
	for name, err := range map[string]error{
		"invalid":   apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "x", nil),
		"forbidden": apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "x", fmt.Errorf("no")),
		"too-large": apierrors.NewRequestEntityTooLargeError("x"),
		"bad":       apierrors.NewBadRequest("x"),
		"throttled": apierrors.NewTooManyRequests("x", 0),
		"conflict":  apierrors.NewConflict(schema.GroupResource{Resource: "events"}, "x", fmt.Errorf("no")),
	} {
		n := &atomic.Int32{}
		calls[name] = n
		w.enqueue("event/"+name, writequeue.Event, func(context.Context) error {
			if n.Add(1) > 1 {
				return nil
			}
			return err
		}, "event")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.run(ctx, 2)
	require.Eventually(t, drained(w), 5*time.Second, 5*time.Millisecond)
	for _, name := range []string{"invalid", "forbidden", "too-large", "bad"} {
		assert.Equal(t, int32(1), calls[name].Load(), name)
	}
	for _, name := range []string{"throttled", "conflict"} {
		assert.Equal(t, int32(2), calls[name].Load(), name+" is retried")
	}
	rejected := 0
	for _, r := range res.get() {
		if r.rejected {
			rejected++
		}
	}
	assert.Equal(t, 4, rejected)
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
	cfg := createDefaultConfig().(*Config)
	cfg.Checks.Enabled = true
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	kube := kubefake.NewSimpleClientset(runningPod("shop", "web-0", "node-a", "10.0.0.1"), runningPod("shop", "db", "node-b", "10.0.0.2"),
		runningPod("bank", "vault", "node-b", "10.0.9.9"), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bank", Name: "pending"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bank", Name: "ledger"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.50", Ports: []corev1.ServicePort{{Port: 5432}}}})
	e.kube = kube
	c := e.checks
	check := func(target v1alpha1.CheckTarget) *v1alpha1.NetworkCheck {
		return &v1alpha1.NetworkCheck{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "c"},
			Spec: v1alpha1.NetworkCheckSpec{Source: v1alpha1.CheckSource{PodName: "web-0"}, Target: target}}
	}
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
	cfg := createDefaultConfig().(*Config)
	cfg.Checks.Enabled = true
	cfg.Checks.MaxChecksPerNamespace = 2
	e, tt, _ := checkTestExporterWithTelemetry(t, cfg)
	kube := kubefake.NewSimpleClientset(runningPod("busy", "web-0", "node-a", "10.0.0.1"), runningPod("calm", "web-0", "node-a", "10.0.1.1"), runningPod("rev", "web-0", "node-a", "10.0.2.1"))
	e.kube = kube
	c := e.checks
	t0 := time.Now().Add(-time.Hour)
	add := func(ns, name string, age time.Duration) {
		nc := &v1alpha1.NetworkCheck{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.NetworkCheckKind},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + name), CreationTimestamp: metav1.NewTime(t0.Add(age))},
			Spec: v1alpha1.NetworkCheckSpec{Source: v1alpha1.CheckSource{PodName: "web-0"},
				Target: v1alpha1.CheckTarget{Address: "192.0.2.10:80"}}}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nc)
		require.NoError(t, err)
		c.upsert(v1alpha1.NetworkCheckKind, &unstructured.Unstructured{Object: obj})
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
	c.reconcile(context.Background(), now)
	refused := map[string]string{}
	served := 0
	for k, cs := range c.checks {
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
	c.consumeLogs(context.Background(), checkResult(v1alpha1.NetworkCheckKind, "busy", "c3", "netpulse", "agent-a", "uid-a", "node-a", now, true))
	assert.Empty(t, c.checks[checkKey{v1alpha1.NetworkCheckKind, "busy", "c3"}].st.Successes)
	// Its status (the refusal) is queued as a routine check write.
	pending := e.writer.pendingByPriority()
	assert.Positive(t, pending[writequeue.CheckUpdate])
	// The refusals are counted by reason.
	m, err := tt.GetMetric("otelcol_pod_network_health_checks")
	require.NoError(t, err)
	checks := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("accepted_reason"))
		checks[v.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]int64{v1alpha1.ReasonCheckAccepted: 5, v1alpha1.ReasonNamespaceQuotaExceeded: 4}, checks)

	// Deleting a served check frees a slot for the oldest waiting one.
	c.mu.Lock()
	c.forgetLocked(checkKey{v1alpha1.NetworkCheckKind, "busy", "c0"})
	c.mu.Unlock()
	c.reconcile(context.Background(), now.Add(time.Second))
	assert.True(t, c.checks[checkKey{v1alpha1.NetworkCheckKind, "busy", "c2"}].place.accepted, c.checks[checkKey{v1alpha1.NetworkCheckKind, "busy", "c2"}].place.message)
	assert.False(t, c.checks[checkKey{v1alpha1.NetworkCheckKind, "busy", "c3"}].place.accepted)
	assert.Equal(t, 2, c.nsServed["busy"])
}

// The declared checks' bounds: their defaults and their ranges.
func TestChecksBoundsConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Checks.Enabled = true
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 100, cfg.Checks.MaxChecksPerNamespace)
	assert.False(t, cfg.Checks.AllowCrossNamespaceTargets, "other namespaces' targets are opt-in")
	assert.Equal(t, 0.2, cfg.Checks.WriteShare)
	assert.Equal(t, 30, cfg.Checks.EventsPerMinute)
	for name, mutate := range map[string]func(*ChecksConfig){
		"checks::max_checks_per_namespace": func(c *ChecksConfig) { c.MaxChecksPerNamespace = c.MaxChecks + 1 },
		"checks::write_share":              func(c *ChecksConfig) { c.WriteShare = 0.9 },
		"checks::events_per_minute":        func(c *ChecksConfig) { c.EventsPerMinute = 0 },
	} {
		bad := *cfg
		mutate(&bad.Checks)
		err := bad.Validate()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), name)
	}
}
