// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/netpulse/netpulse/api/v1alpha1"
	pnhexporter "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/internal/contract"
)

// What the gateway accepts from a sender is what the API server accepts in the status: a
// result at every limit of the schema (a 64-character reason with the pattern's odd
// characters, a 300-character multi-byte message, a 64-character zoned source address, a
// 63-character namespace and a 253-character pod name as the reporter) is written without
// a refusal, and a result with a hostile reason is dropped before it is queued, so the
// check's status keeps being written.
func TestCheckResultsAtTheSchemaLimits(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const ns, name = "checks-schema", "web-to-db"
	web := makePod(t, ns, "web", "node-a")
	runningPodStatus(t, web, "10.244.0.11")
	db := makePod(t, ns, "db", "node-b")
	runningPodStatus(t, db, "10.244.1.21")

	cfg := testConfig("pnh-checks-schema")
	cfg.LeaderElection.Enabled = false
	cfg.Checks.Enabled = true
	cfg.Checks.Heartbeat = time.Minute
	cfg.RequireAuthenticatedObservers = false
	require.NoError(t, cfg.Validate())
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(ctx)
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	exp, err := pnhexporter.NewFactory().CreateLogs(ctx, set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()

	dyn, err := dynamic.NewForConfig(cp.Config)
	require.NoError(t, err)
	gvr := v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.NetworkCheckPlural)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.NetworkCheck{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.NetworkCheckKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.NetworkCheckSpec{Source: v1alpha1.CheckSource{PodName: "web"},
			Target: v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "db", Port: 5432}}},
	})
	require.NoError(t, err)
	_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err)
	get := func() *v1alpha1.NetworkCheck {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
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
		return c != nil && c.Status.Vantage != nil && c.Status.Vantage.Node == "node-a"
	}, 20*time.Second, 100*time.Millisecond)

	reason := "Odd_reason,with:colons" + strings.Repeat("x", 64-len("Odd_reason,with:colons")-1) + "9"
	require.Len(t, reason, 64)
	zone := strings.Repeat("z", 64-len("fe80::1234:5678:9abc:def0%"))
	source := "fe80::1234:5678:9abc:def0%" + zone
	require.Len(t, source, 64)
	reporterNS, reporterPod := strings.Repeat("n", 63), strings.Repeat("p", 253)
	record := func(at time.Time, reason, body string) plog.Logs {
		ld := checkRecord(ns, name, at, false)
		rl := ld.ResourceLogs().At(0)
		rl.Resource().Attributes().PutStr(contract.K8sNamespaceName, reporterNS)
		rl.Resource().Attributes().PutStr(contract.K8sPodName, reporterPod)
		lr := rl.ScopeLogs().At(0).LogRecords().At(0)
		lr.Attributes().PutStr(contract.CheckReason, reason)
		lr.Attributes().PutStr(contract.SourceAddress, source)
		lr.Body().SetStr(body)
		return ld
	}
	t0 := time.Now().Add(-10 * time.Second).Truncate(time.Second)
	require.NoError(t, exp.ConsumeLogs(ctx, record(t0, reason, strings.Repeat("é", 300))))
	require.Eventually(t, func() bool {
		c := get()
		return c != nil && len(c.Status.Failures) == 1
	}, 20*time.Second, 100*time.Millisecond, "a result at the schema's limits is written")
	c := get()
	reachable := findCond(c.Status.Conditions, v1alpha1.ConditionReachable)
	require.NotNil(t, reachable)
	assert.Equal(t, reason, reachable.Reason)
	assert.Equal(t, source, c.Status.Vantage.SourceAddress)
	assert.Equal(t, reporterNS+"/"+reporterPod, c.Status.Vantage.ObserverPod)
	assert.Len(t, []rune(c.Status.Failures[0].Message), 256)

	// A hostile reason is dropped; the next good result is written.
	require.NoError(t, exp.ConsumeLogs(ctx, record(t0.Add(time.Second), "Bad reason <script>", "x")))
	require.NoError(t, exp.ConsumeLogs(ctx, record(t0.Add(2*time.Second), "TCPConnect", "ok")))
	require.Eventually(t, func() bool {
		c := get()
		r := findCond(c.Status.Conditions, v1alpha1.ConditionReachable)
		return c != nil && r != nil && r.Reason == "TCPConnect"
	}, 20*time.Second, 100*time.Millisecond, "the status goes on being written")
	writes := map[string]int64{}
	if m, err := tt.GetMetric("otelcol_pod_network_health_api_writes"); err == nil {
		writes = sumPointsByAttr(m, "outcome")
	}
	assert.Zero(t, writes["rejected"], "the API refused nothing")
	assert.Zero(t, writes["error"])
	m, err := tt.GetMetric("otelcol_pod_network_health_datapoints_skipped")
	require.NoError(t, err)
	assert.Equal(t, int64(1), sumPointsByAttr(m, "reason")["check_invalid"])
}

func findCond(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}
