// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/decode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/kubeclient"
)

// flood is one request of the item-2 input: n cumulative pod-target points from
// one agent, each with a fresh destination.port and no StartTimestamp, marked stable (so
// that the decoder remembers them: rotating ones are not remembered at all).
func flood(req, n int, at time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr(contract.K8sNamespaceName, "netpulse")
	res.PutStr(contract.K8sPodName, "agent-liar")
	res.PutStr(contract.K8sPodUID, "uid-liar")
	res.PutStr(contract.K8sNodeName, "node-liar")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(contract.MetricPacketsSent)
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i := req * n; i < req*n+n; i++ {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
		dp.SetIntValue(3)
		a := dp.Attributes()
		a.PutStr(contract.DestinationAddress, "10.0.2.10")
		a.PutStr(contract.DestinationPrefix+contract.K8sPodUID, "uid-victim")
		a.PutStr(contract.DestinationPrefix+contract.K8sPodName, "victim")
		a.PutStr(contract.DestinationPrefix+contract.K8sNamespaceName, "netpulse")
		a.PutStr(contract.ProbeType, contract.ProbeTypeICMP)
		a.PutInt(contract.DestinationPort, int64(i%65535+1))
		a.PutBool(contract.PairStable, true)
	}
	return md
}

// A standby (leader election on, the API unreachable, so it never leads) that agents reach
// by pod IP bounds what it remembers per source and frees it after the streams' TTL: the
// expiry runs on every replica, not only on the leader.
func TestStandbyBoundsAndExpiresDecoderStreams(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.AuthType = kubeclient.AuthKubeConfig
	cfg.Kubeconfig = "testdata/unreachable.kubeconfig"
	cfg.LeaderElection.LeaseNamespace = "netpulse"
	cfg.LeaderElection.Identity = "standby"
	cfg.MaxProbeInterval = time.Second // streams idle for 3 s are forgotten
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	require.NoError(t, e.start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, e.shutdown(context.Background())) }()

	for req := range 10 {
		require.NoError(t, e.consume(context.Background(), flood(req, 5000, time.Now())))
	}
	assert.LessOrEqual(t, e.decoder.Streams(), decode.DefaultMaxStreamsPerSource,
		"the source's streams are bounded (the flood alone would make %d)", 50000)
	assert.Eventually(t, func() bool { return e.decoder.Streams() == 0 }, 10*time.Second, 100*time.Millisecond,
		"forgotten by the standby within the TTL (3 s) and one expiry tick")
}

// A replica with leader election starts as a standby: its engine keeps no state for a pod
// that is no agent's, and the expiry loop (every replica's) forgets the rest target_ttl
// after its last observation, without a Lease. Driven by the loop's own tick, not a clock.
func TestStandbyEngineStateIsBoundedAndExpires(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.True(t, cfg.LeaderElection.Enabled)
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	now := time.Now()
	agent := observation.Source{Namespace: "netpulse", Name: "agent-a", UID: "uid-a", Node: "node-a"}
	var obs []observation.Observation
	for i := range 1000 {
		obs = append(obs, observation.Observation{Source: agent, Timestamp: now, ProbeType: contract.ProbeTypeICMP,
			Target: observation.Target{Kind: observation.TargetPod, Namespace: "shop", Name: fmt.Sprintf("web-%d", i), UID: fmt.Sprintf("uid-web-%d", i),
				Node: "node-b", Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}})
	}
	obs = append(obs, observation.Observation{Source: agent, Timestamp: now, ProbeType: contract.ProbeTypeICMP, Success: true,
		Target: observation.Target{Kind: observation.TargetNode, Name: "node-b", Node: "node-b", Address: "192.168.0.2"}})
	e.engine.Observe(obs, now)
	st := e.engine.Stats()
	assert.Equal(t, 1, st.Targets, "the node only: no state for 1,000 pods that are no agent's")

	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() { defer close(done); e.expireLoop(ctx, tick) }()
	tick <- now.Add(cfg.TargetTTL - time.Second)
	tick <- now.Add(cfg.TargetTTL + time.Second) // the loop handled the first tick once it takes this one
	cancel()
	<-done
	st = e.engine.Stats()
	assert.Zero(t, st.Targets)
	assert.Zero(t, st.Observers)
}
