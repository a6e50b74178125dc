// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
)

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
	cfg := createDefaultConfig().(*Config)
	cfg.RequireAuthenticatedObservers = true
	cfg.Checks.Enabled = true
	tt := componenttest.NewTelemetry()
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	e, err := newExporter(cfg, set)
	require.NoError(t, err)
	c := e.checks
	sidecarKey := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	agentKey := checkKey{ocv1alpha1.Kind, "shop", "web-to-api"}
	c.checks[sidecarKey] = &checkState{key: sidecarKey, interval: 10 * time.Second,
		place: placement{accepted: true, mode: v1alpha1.VantageSidecar, sourcePod: "web-0", node: "node-a"}}
	c.checks[agentKey] = &checkState{key: agentKey, interval: 10 * time.Second,
		place: placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-1", node: "node-a"}}
	refused := checkKey{v1alpha1.NetworkCheckKind, "shop", "to-metadata"}
	c.checks[refused] = &checkState{key: refused, place: placement{reason: v1alpha1.ReasonTargetRefused}}

	now := time.Now()
	sidecar := viaAuthOf("shop", "web-0", "uid-w", "node-a")
	// Accepted: the sidecar for its own pod; the node's agent for the agent-placed check.
	c.consumeLogs(sidecar, checkResult(sidecarKey.kind, "shop", "web-to-db", "shop", "web-0", "uid-w", "node-a", now, true))
	c.consumeLogs(viaAuth(agentA), checkResult(agentKey.kind, "shop", "web-to-api", "netpulse", "agent-a", "uid-a", "node-a", now, false))
	// Refused: an agent of the node for a sidecar-placed check, another node's agent, the
	// sidecar in someone else's name, no identity, an unknown check, a refused check.
	c.consumeLogs(viaAuth(agentA), checkResult(sidecarKey.kind, "shop", "web-to-db", "netpulse", "agent-a", "uid-a", "node-a", now.Add(time.Second), false))
	agentB := viaAuthOf("netpulse", "agent-b", "uid-b", "node-b")
	c.consumeLogs(agentB, checkResult(agentKey.kind, "shop", "web-to-api", "netpulse", "agent-b", "uid-b", "node-b", now.Add(time.Second), true))
	c.consumeLogs(sidecar, checkResult(agentKey.kind, "shop", "web-to-api", "netpulse", "agent-a", "uid-a", "node-a", now.Add(time.Second), true))
	c.consumeLogs(context.Background(), checkResult(sidecarKey.kind, "shop", "web-to-db", "shop", "web-0", "uid-w", "node-a", now.Add(time.Second), false))
	c.consumeLogs(sidecar, checkResult(sidecarKey.kind, "shop", "nope", "shop", "web-0", "uid-w", "node-a", now.Add(time.Second), false))
	c.consumeLogs(sidecar, checkResult(refused.kind, "shop", "to-metadata", "shop", "web-0", "uid-w", "node-a", now.Add(time.Second), false))

	sc := c.checks[sidecarKey]
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

	ac := c.checks[agentKey]
	require.Len(t, ac.st.Failures, 1)
	assert.Empty(t, ac.st.Successes)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, ac.st.Reachable.Reason, "OpenShift's flavour for PodNetworkConnectivityCheck")
	require.Len(t, ac.st.Outages, 1)
	ps := pnccStatus(ac.st)
	require.Len(t, ps.Conditions, 1)
	assert.Equal(t, ocv1alpha1.Reachable, ps.Conditions[0].Type)
	assert.Equal(t, "False", string(ps.Conditions[0].Status))

	skipped := map[string]int64{}
	m, err := tt.GetMetric("otelcol_pod_network_health_datapoints_skipped")
	require.NoError(t, err)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("reason"))
		skipped[v.AsString()] += dp.Value
	}
	assert.Equal(t, map[string]int64{SkipCheckWrongVantage: 2, SkipCheckUnauthentic: 2, SkipCheckUnknown: 2}, skipped)
	require.NoError(t, e.shutdown(context.Background()))
	require.NoError(t, tt.Shutdown(context.Background()))
}

func viaAuthOf(ns, pod, uid, node string) context.Context {
	id := agentA
	id.Namespace, id.PodName, id.PodUID, id.NodeName = ns, pod, uid, node
	return viaAuth(id)
}

// A takeover resumes from the API: the status read back equals what was written.
func TestCheckStatusRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	var st checkstatus.Status
	for i, ok := range []bool{true, false, false, true} {
		st, _ = checkstatus.Apply(st, checkstatus.FlavourNetpulse, checkstatus.Entry{Time: t0.Add(time.Duration(i) * 10 * time.Second), Success: ok,
			Reason: map[bool]string{true: checkstatus.ReasonTCPConnect, false: checkstatus.ReasonTCPConnectError}[ok], Message: "m", Latency: time.Millisecond})
	}
	cs := &checkState{st: st, generation: 3, placeSince: t0,
		place: placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "n1", endpoint: "10.0.0.9:80", targetKind: "Service"}}
	api := ncStatus(cs)
	back := statusOfNC(&api)
	assert.True(t, st.Equal(back), "NetworkCheck round trip:\n%+v\n%+v", st, back)
	assert.Equal(t, cs.place, placementOfNC(&api))
	ps := pnccStatus(st)
	assert.True(t, st.Equal(statusOfPNCC(&ps)), "PodNetworkConnectivityCheck round trip")
}
