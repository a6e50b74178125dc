// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package shard maps a target to the gateway shard that judges it. Agents stamp every
// target's points with its shard (pod_probe's `shards`) so that a filter sends them to that
// shard alone; each shard's pod_network_health recomputes the owner from its own index and
// drops what it does not own, so a sender's stamp decides only where its own points go.
//
// The key is the target's node: every observation of the pods on one node lands on one
// shard, where the node quorum, node conditions and readiness of that node are decided.
// The mapping is a pure function of the key and the shard count, so every agent and every
// shard agree on it without talking to each other; changing the count moves about
// (S-1)/S of the keys (docs/sharding.md).
package shard

import (
	"hash/fnv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/pdatautil"
)

// Attribute is the data-point attribute (int) that carries a point's shard, 0..count-1.
// The agents' heartbeat (contract.MetricRounds) carries none, so every shard receives it and
// knows the agent is reporting even in rounds in which none of its targets is that shard's.
const Attribute = "netpulse.shard"

// MaxCount bounds the shard count (a chart renders a Deployment and Service per shard).
const MaxCount = 64

// Of returns the shard, in [0, count), that owns the target whose key is key (its node
// name). Targets without a node (external endpoints, declared checks) belong to shard 0,
// as does everything when count <= 1.
func Of(key string, count int) int {
	if count <= 1 || key == "" {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(count))
}

// Stamp sets Attribute on every data point of md to the shard ownerOf gives its
// destination.address. pod_probe stamps its rounds with it; the benchmarks that play
// relaying agents do too.
func Stamp(md pmetric.Metrics, ownerOf func(address string) int) {
	stamp := func(attrs pcommon.Map) {
		addr, _ := attrs.Get(contract.DestinationAddress)
		attrs.PutInt(Attribute, int64(ownerOf(addr.Str())))
	}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				pdatautil.EachPointAttributes(ms.At(k), stamp)
			}
		}
	}
}

// AppendRounds appends the agents' heartbeat to ms: contract.MetricRounds, a cumulative
// monotonic sum of the rounds published since start, one point at now, without attributes.
// pod_probe sends it; the tests and benchmarks that play agents build it here too.
func AppendRounds(ms pmetric.MetricSlice, start, now pcommon.Timestamp, rounds int64) {
	m := ms.AppendEmpty()
	m.SetName(contract.MetricRounds)
	m.SetUnit("{round}")
	m.SetDescription("Probe rounds this agent published since it started: its heartbeat to every gateway shard.")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(now)
	dp.SetIntValue(rounds)
}
