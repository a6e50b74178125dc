// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/netpulse/netpulse/api/v1alpha1"
	pnhexporter "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
)

// checkRecord is one pod_probe check result from the agent of node-a.
func checkRecord(ns, name string, at time.Time, ok bool) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	ra := rl.Resource().Attributes()
	ra.PutStr(contract.K8sNamespaceName, "netpulse")
	ra.PutStr(contract.K8sPodName, "agent-a")
	ra.PutStr(contract.K8sNodeName, "node-a")
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName(contract.CheckResultEvent)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
	a := lr.Attributes()
	a.PutStr(contract.CheckKind, v1alpha1.NetworkCheckKind)
	a.PutStr(contract.CheckNamespace, ns)
	a.PutStr(contract.CheckName, name)
	a.PutBool(contract.CheckSuccess, ok)
	a.PutDouble(contract.CheckLatency, 0.001)
	a.PutStr(contract.SourceAddress, "192.0.2.1")
	if ok {
		a.PutStr(contract.CheckReason, checkstatus.ReasonTCPConnect)
		lr.Body().SetStr("tcp connection succeeded")
	} else {
		a.PutStr(contract.CheckReason, checkstatus.ReasonTCPConnectError)
		lr.Body().SetStr("tcp connection refused")
	}
	return ld
}

func startLogsExporter(t *testing.T, cfg *pnhexporter.Config, identity string) exporter.Logs {
	t.Helper()
	cfg.LeaderElection.Identity = identity
	require.NoError(t, cfg.Validate())
	exp, err := pnhexporter.NewFactory().CreateLogs(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	return exp
}

func runningPodStatus(t *testing.T, pod *corev1.Pod, ip string) {
	t.Helper()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	_, err := admin.CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// A new leader resumes every declared check from the API at takeover — not from the copy
// it loaded when it first saw the check as a standby — so the takeover neither rolls back
// nor erases the successes, failures and outage the previous leader wrote, and emits no
// Event again: the outage that began under the old leader ends under the new one, one
// outage with one ConnectivityOutageDetected and one ConnectivityRestored.
func TestCheckStatusSurvivesFailover(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const ns, name = "checks-failover", "web-to-db"
	web := makePod(t, ns, "web", "node-a")
	runningPodStatus(t, web, "10.244.0.10")
	db := makePod(t, ns, "db", "node-b")
	runningPodStatus(t, db, "10.244.1.20")

	cfgA, cfgB := testConfig("pnh-checks-failover"), testConfig("pnh-checks-failover")
	for _, c := range []*pnhexporter.Config{cfgA, cfgB} {
		c.Checks.Enabled = true
		c.Checks.Heartbeat = time.Minute
		c.RequireAuthenticatedObservers = false
	}
	exps := map[string]exporter.Logs{"gw-a": startLogsExporter(t, cfgA, "gw-a"), "gw-b": startLogsExporter(t, cfgB, "gw-b")}
	defer func() {
		for _, e := range exps {
			_ = e.Shutdown(ctx)
		}
	}()
	holder := func() string {
		l, err := admin.CoordinationV1().Leases("netpulse").Get(ctx, "pnh-checks-failover", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	require.Eventually(t, func() bool { return holder() != "" }, 15*time.Second, 100*time.Millisecond)
	leader := holder()
	standby := map[string]string{"gw-a": "gw-b", "gw-b": "gw-a"}[leader]

	// The check is created while both replicas run: the standby sees it at once, before
	// anything is written to its status.
	dyn, err := dynamic.NewForConfig(cp.Config)
	require.NoError(t, err)
	nc := &v1alpha1.NetworkCheck{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.NetworkCheckKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.NetworkCheckSpec{Source: v1alpha1.CheckSource{PodName: "web"},
			Target: v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "db", Port: 5432}}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nc)
	require.NoError(t, err)
	_, err = dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.NetworkCheckPlural)).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err)
	get := func() *v1alpha1.NetworkCheck {
		u, err := dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.NetworkCheckPlural)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		var out v1alpha1.NetworkCheck
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out) != nil {
			return nil
		}
		return &out
	}
	require.Eventually(t, func() bool {
		c := get()
		return c != nil && c.Status.Vantage != nil && c.Status.Vantage.Node == "node-a" && c.Status.Target != nil
	}, 20*time.Second, 100*time.Millisecond, "the leader places the check on node-a's agent")

	// Under the first leader: two successes, then an outage begins.
	t0 := time.Now().Add(-30 * time.Second).Truncate(time.Second)
	for i, ok := range []bool{true, true, false} {
		require.NoError(t, exps[leader].ConsumeLogs(ctx, checkRecord(ns, name, t0.Add(time.Duration(i)*time.Second), ok)))
	}
	require.Eventually(t, func() bool {
		c := get()
		return c != nil && len(c.Status.Outages) == 1 && c.Status.Outages[0].End == nil && len(c.Status.Successes) == 2 && len(c.Status.Failures) == 1
	}, 20*time.Second, 100*time.Millisecond, "the first leader writes the outage")
	events := func(reason string) int {
		l, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.name", name), fields.OneTermEqualSelector("reason", reason)).String()})
		require.NoError(t, err)
		return len(l.Items)
	}
	require.Eventually(t, func() bool { return events(checkstatus.EventOutageDetected) == 1 }, 20*time.Second, 100*time.Millisecond)

	// Hand over: the leader flushes and releases the Lease; the standby takes over.
	require.NoError(t, exps[leader].Shutdown(ctx))
	delete(exps, leader)
	require.Eventually(t, func() bool { return holder() == standby }, 20*time.Second, 100*time.Millisecond)
	time.Sleep(2 * time.Second) // its first reconcile re-reads the checks

	// Under the new leader: the outage goes on, then ends.
	require.NoError(t, exps[standby].ConsumeLogs(ctx, checkRecord(ns, name, t0.Add(3*time.Second), false)))
	require.NoError(t, exps[standby].ConsumeLogs(ctx, checkRecord(ns, name, t0.Add(4*time.Second), true)))
	require.Eventually(t, func() bool {
		c := get()
		return c != nil && len(c.Status.Outages) > 0 && c.Status.Outages[0].End != nil
	}, 20*time.Second, 100*time.Millisecond, "the new leader writes the end of the outage")
	require.Eventually(t, func() bool { return events(checkstatus.EventRestored) == 1 }, 20*time.Second, 100*time.Millisecond)

	c := get()
	require.Len(t, c.Status.Outages, 1, "one outage, begun under the old leader and ended under the new: %+v", c.Status.Outages)
	assert.True(t, c.Status.Outages[0].Start.Time.Equal(t0.Add(2*time.Second)), "the outage keeps its start: %v", c.Status.Outages[0].Start)
	assert.True(t, c.Status.Outages[0].End.Time.Equal(t0.Add(4*time.Second)))
	assert.Len(t, c.Status.Successes, 3, "the old leader's successes are kept")
	assert.Len(t, c.Status.Failures, 2, "the old leader's failure is kept")
	assert.Equal(t, v1alpha1.Reachable, c.Status.Reachability)
	time.Sleep(time.Second)
	assert.Equal(t, 1, events(checkstatus.EventOutageDetected), "the takeover emitted no outage Event again")
	assert.Equal(t, 1, events(checkstatus.EventRestored))
}
