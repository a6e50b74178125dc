// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/checks"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// updateGolden regenerates the expected files instead of comparing with them
// (NETPULSE_UPDATE_GOLDEN=1 go test ./receiver/podprobereceiver/ -run Golden; docs/development.md).
var updateGolden = os.Getenv("NETPULSE_UPDATE_GOLDEN") != ""

// goldenAgentStart is when the agent's MetricsBuilder was created: an hour before the rounds.
var (
	goldenT0         = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	goldenAgentStart = goldenT0.Add(-time.Hour)
)

// goldenEmitter is the emitter of agent-a (netpulse/agent-a on node-a, 10.0.0.1) as Start
// builds it, with a fixed builder start time.
func goldenEmitter(t *testing.T) *emitter {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	set := receivertest.NewNopSettings(metadata.Type)
	rb := metadata.NewResourceBuilder(cfg.MetricsBuilderConfig.ResourceAttributes)
	rb.SetK8sPodName("agent-a")
	rb.SetK8sPodUID("uid-a")
	rb.SetK8sNamespaceName("netpulse")
	rb.SetK8sNodeName("node-a")
	rb.SetK8sPodIP("10.0.0.1")
	mb := metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set, metadata.WithStartTime(pcommon.NewTimestampFromTime(goldenAgentStart)))
	return newEmitter(mb, rb.Emit(), time.Hour)
}

// goldenRounds are two probe rounds of agent-a, 10 s apart, over every kind of target: a
// stable pod (ICMP; answers, then times out), its node (ICMP), a rotating pod on IPv6
// (ICMP), and external TCP, HTTP and DNS targets.
func goldenRounds() [2][]observation {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	pod := target{addr: mustAddr("10.0.0.7"), probe: "icmp", kind: kindPod, stable: true}
	node := target{addr: mustAddr("10.1.0.7"), probe: "icmp", kind: kindNode, stable: true}
	rotating := target{addr: mustAddr("fd00::8"), probe: "icmp", kind: kindPod}
	tcp := target{addr: mustAddr("192.0.2.10"), port: 443, probe: "tcp", kind: kindExternal, stable: true}
	web := target{addr: mustAddr("192.0.2.20"), port: 8080, probe: "http", kind: kindExternal, stable: true, url: "http://user:pw@192.0.2.20:8080/healthz?x=1"}
	dns := target{addr: mustAddr("10.96.0.10"), port: 53, probe: "dns", kind: kindExternal, stable: true, dns: &DNSConfig{Name: "kubernetes.default.svc.cluster.local"}}
	start := func(round int) time.Time {
		return goldenT0.Add(time.Duration(round)*10*time.Second - 300*time.Millisecond)
	}
	return [2][]observation{
		{
			{target: pod, start: start(0), success: true, sent: 3, lost: 1, durations: []time.Duration{ms(1), ms(2)}},
			{target: node, start: start(0), success: true, sent: 3, durations: []time.Duration{ms(0.5), ms(0.7), ms(0.6)}},
			{target: rotating, start: start(0), success: true, sent: 3, durations: []time.Duration{ms(1.5), ms(1.7), ms(1.6)}},
			{target: tcp, start: start(0), errorType: "refused", message: "connection refused"},
			{target: web, start: start(0), success: true, durations: []time.Duration{ms(12)}},
			{target: dns, start: start(0), success: true, durations: []time.Duration{ms(0.8)}},
		},
		{
			{target: pod, start: start(1), errorType: "timeout", sent: 3, lost: 3},
			{target: node, start: start(1), success: true, sent: 3, durations: []time.Duration{ms(0.5), ms(0.5), ms(0.5)}},
			{target: rotating, start: start(1), success: true, sent: 3, lost: 2, durations: []time.Duration{ms(1.9)}},
			{target: tcp, start: start(1), errorType: "timeout", message: "i/o timeout"},
			{target: web, start: start(1), errorType: "http_status", message: "503"},
			{target: dns, start: start(1), success: true, durations: []time.Duration{ms(0.9)}},
		},
	}
}

// TestGoldenMetrics: the metrics agent-a emits for goldenRounds, as the telemetry contract
// (docs/telemetry-contract.md) fixes them, compared with testdata/golden/metrics_round*.yaml.
func TestGoldenMetrics(t *testing.T) {
	e := goldenEmitter(t)
	for i, obs := range goldenRounds() {
		now := goldenT0.Add(time.Duration(i) * 10 * time.Second)
		got := e.emit(now, obs)
		compareGoldenMetrics(t, filepath.Join("testdata", "golden", "metrics_round"+string(rune('1'+i))+".yaml"), got)
	}
}

// TestGoldenCheckLogs: the log records of two declared checks' runs (one success, one
// failure), compared with testdata/golden/check_logs.yaml.
func TestGoldenCheckLogs(t *testing.T) {
	sink := new(consumertest.LogsSink)
	r := &podProbeReceiver{set: receivertest.NewNopSettings(metadata.Type), emitter: goldenEmitter(t), logsConsumer: sink}
	r.emitCheckResult(checks.Result{
		Assignment: checks.Assignment{Kind: checks.KindNetworkCheck, Namespace: "shop", Name: "db", UID: types.UID("uid-check-db"), Probe: "tcp", Endpoint: "db.shop.svc:5432"},
		Start:      goldenT0, Success: true, Reason: checkstatus.ReasonTCPConnect,
		Message: "TCP connect to 10.0.3.4:5432 succeeded", Latency: 1500 * time.Microsecond,
		Address: mustAddr("10.0.3.4"), Port: 5432, Local: mustAddr("10.0.0.1"),
	})
	r.emitCheckResult(checks.Result{
		Assignment: checks.Assignment{Kind: checks.KindNetworkCheck, Namespace: "shop", Name: "api", UID: types.UID("uid-check-api"), Probe: "http", Endpoint: "http://api.shop.svc/healthz"},
		Start:      goldenT0.Add(time.Second), Success: false, Reason: checkstatus.ReasonDNSError,
		Message: "lookup api.shop.svc: no such host", Latency: 20 * time.Millisecond,
	})
	require.Len(t, sink.AllLogs(), 2)
	got := sink.AllLogs()[0]
	sink.AllLogs()[1].ResourceLogs().MoveAndAppendTo(got.ResourceLogs())

	path := filepath.Join("testdata", "golden", "check_logs.yaml")
	if updateGolden {
		require.NoError(t, golden.WriteLogsToFile(path, got))
	}
	want, err := golden.ReadLogs(path)
	require.NoError(t, err, "regenerate with NETPULSE_UPDATE_GOLDEN=1")
	require.NoError(t, plogtest.CompareLogs(want, got))
}

func compareGoldenMetrics(t *testing.T, path string, got pmetric.Metrics) {
	t.Helper()
	if updateGolden {
		// The timestamps are the contract's (StartTimestamp of a series): keep them as emitted.
		require.NoError(t, golden.WriteMetricsToFile(path, got, golden.SkipMetricTimestampNormalization()))
	}
	want, err := golden.ReadMetrics(path)
	require.NoError(t, err, "regenerate with NETPULSE_UPDATE_GOLDEN=1")
	// The errors series of one target come out of a map: their order is not part of the contract.
	require.NoError(t, pmetrictest.CompareMetrics(want, got, pmetrictest.IgnoreMetricDataPointsOrder()), path)
}
