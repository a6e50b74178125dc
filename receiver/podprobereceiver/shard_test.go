// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/pdatautil"
	"github.com/netpulse/netpulse/internal/shard"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// shardsOf returns, per metric name, the netpulse.shard of each data point by its
// destination.address (-1: the point carries none).
func shardsOf(t *testing.T, md pmetric.Metrics) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				var attrs []pcommon.Map
				pdatautil.EachPointAttributes(m, func(a pcommon.Map) { attrs = append(attrs, a) })
				if out[m.Name()] == nil {
					out[m.Name()] = map[string]int64{}
				}
				for _, a := range attrs {
					addr, _ := a.Get("destination.address")
					v := int64(-1)
					if s, ok := a.Get(shard.Attribute); ok {
						v = s.Int()
					}
					out[m.Name()][addr.Str()] = v
				}
			}
		}
	}
	return out
}

// With shards, every target's points carry its node's shard (external targets shard 0)
// and each round adds the heartbeat, which carries none; without, nothing changes.
func TestEmitterStampsShards(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	set := receivertest.NewNopSettings(metadata.Type)
	// Nodes on both shards of 2 (internal/shard pins node-1 -> 1, node-2 -> 0).
	onOne := target{addr: mustAddr("10.0.0.1"), probe: "icmp", kind: kindPod, stable: true, node: "node-1"}
	onZero := target{addr: mustAddr("10.0.0.2"), probe: "icmp", kind: kindPod, node: "node-2"}
	node := target{addr: mustAddr("192.168.0.1"), probe: "icmp", kind: kindNode, node: "node-1"}
	ext := target{host: "example.com", port: 443, probe: "tcp", kind: kindExternal, stable: true}
	obs := []observation{
		{target: onOne, success: true, sent: 3, durations: []time.Duration{time.Millisecond}},
		{target: onZero, success: false, errorType: "timeout", sent: 3, lost: 3},
		{target: node, success: true, sent: 3, durations: []time.Duration{time.Millisecond}},
		{target: ext, success: true, durations: []time.Duration{time.Millisecond}},
	}
	t0 := time.Unix(1000, 0)

	e := newEmitter(metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set), pcommon.NewResource(), time.Hour)
	e.shardBy(2, t0)
	var md pmetric.Metrics
	for i := range 3 {
		md = e.emit(t0.Add(time.Duration(i+1)*time.Second), obs)
	}
	got := shardsOf(t, md)
	for name, byAddr := range got {
		if name == contract.MetricRounds {
			continue
		}
		for addr, s := range byAddr {
			want := map[string]int64{"10.0.0.1": 1, "10.0.0.2": 0, "192.168.0.1": 1, "example.com": 0}[addr]
			require.Equal(t, want, s, "%s of %s", name, addr)
		}
	}
	require.Contains(t, got["netpulse.probe.status"], "10.0.0.1")
	require.Contains(t, got["netpulse.probe.status"], "example.com")
	require.Equal(t, map[string]int64{"": -1}, got[contract.MetricRounds], "the heartbeat reaches every shard")
	rounds := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	hb := rounds.At(rounds.Len() - 1)
	require.Equal(t, contract.MetricRounds, hb.Name())
	require.Equal(t, int64(3), hb.Sum().DataPoints().At(0).IntValue(), "cumulative rounds")
	require.Equal(t, pcommon.NewTimestampFromTime(t0), hb.Sum().DataPoints().At(0).StartTimestamp())

	// A round without targets still says the agent is there.
	got = shardsOf(t, e.emit(t0.Add(10*time.Second), nil))
	require.Equal(t, map[string]int64{"": -1}, got[contract.MetricRounds])

	// One gateway: no attribute, no heartbeat (the golden fixtures pin the rest).
	e = newEmitter(metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set), pcommon.NewResource(), time.Hour)
	e.shardBy(1, t0)
	got = shardsOf(t, e.emit(t0.Add(time.Second), obs))
	require.NotContains(t, got, contract.MetricRounds)
	for name, byAddr := range got {
		for addr, s := range byAddr {
			require.Equal(t, int64(-1), s, "%s of %s", name, addr)
		}
	}
}
