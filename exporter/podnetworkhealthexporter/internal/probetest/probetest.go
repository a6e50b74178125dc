// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package probetest produces pod_probe-shaped metrics for exporter tests.
package probetest

import (
	"time"

	"github.com/lightstep/go-expohisto/structure"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/shard"
)

// Agent produces what the pod_probe receiver, enriched by k8s_net_attributes, emits for
// one source pod: per round a status gauge, ICMP loss and cumulative echo counters, and a
// cumulative exponential RTT histogram per target.
type Agent struct {
	ns, pod, uid, node, ip string
	start                  pcommon.Timestamp
	sent, lost             map[string]int64
	hist                   map[string]*structure.Histogram[float64]
}

// Target is one probed pod. Targets are stable pairs (netpulse.pair.stable, probed every
// round, so they get objects) unless Rotating is set.
type Target struct {
	NS, Pod, UID, Node, IP string
	Rotating               bool
	// Zone: the target node's zone, as k8s_net_attributes sets it from the Node's label
	// (none when empty).
	Zone string
}

type Outcome struct {
	OK  bool
	RTT time.Duration
	// Lost: of an OK round's 3 echoes, how many were lost (0 to 2: a partial answer).
	Lost int
}

func NewAgent(ns, pod, uid, node, ip string) *Agent {
	return &Agent{ns: ns, pod: pod, uid: uid, node: node, ip: ip,
		start: pcommon.NewTimestampFromTime(time.Now()),
		sent:  map[string]int64{}, lost: map[string]int64{}, hist: map[string]*structure.Histogram[float64]{}}
}

// Round renders one probe round at ts: 3 echoes per target, all answered (with rtt), all
// lost, or (Outcome.Lost) answered in part.
func (a *Agent) Round(ts time.Time, targets []Target, results []Outcome) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	r := rm.Resource().Attributes()
	r.PutStr(contract.K8sNamespaceName, a.ns)
	r.PutStr(contract.K8sPodName, a.pod)
	r.PutStr(contract.K8sPodUID, a.uid)
	r.PutStr(contract.K8sNodeName, a.node)
	r.PutStr(contract.K8sPodIP, a.ip)
	sm := rm.ScopeMetrics().AppendEmpty()
	now := pcommon.NewTimestampFromTime(ts)
	status := sm.Metrics().AppendEmpty()
	status.SetName(contract.MetricStatus)
	sg := status.SetEmptyGauge()
	loss := sm.Metrics().AppendEmpty()
	loss.SetName(contract.MetricLossRatio)
	lg := loss.SetEmptyGauge()
	sent := sm.Metrics().AppendEmpty()
	sent.SetName(contract.MetricPacketsSent)
	ss := sent.SetEmptySum()
	ss.SetIsMonotonic(true)
	ss.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	lost := sm.Metrics().AppendEmpty()
	lost.SetName(contract.MetricPacketsLost)
	ls := lost.SetEmptySum()
	ls.SetIsMonotonic(true)
	ls.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dur := sm.Metrics().AppendEmpty()
	dur.SetName(contract.MetricDuration)
	dur.SetUnit("s")
	eh := dur.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)

	for i, t := range targets {
		res := results[i]
		h := a.hist[t.IP]
		if h == nil {
			h = structure.NewFloat64(structure.NewConfig(structure.WithMaxSize(160)))
			a.hist[t.IP] = h
		}
		a.sent[t.IP] += 3
		v, l := int64(1), 0.0
		if res.OK {
			partial := min(max(res.Lost, 0), 2)
			for range 3 - partial {
				h.Update(res.RTT.Seconds())
			}
			a.lost[t.IP] += int64(partial)
			l = float64(partial) / 3
		} else {
			a.lost[t.IP] += 3
			v, l = 0, 1
		}
		dp := sg.DataPoints().AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetIntValue(v)
		putTargetAttrs(dp.Attributes(), t)
		dp = lg.DataPoints().AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetDoubleValue(l)
		putTargetAttrs(dp.Attributes(), t)
		dp = ss.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(a.start)
		dp.SetTimestamp(now)
		dp.SetIntValue(a.sent[t.IP])
		putTargetAttrs(dp.Attributes(), t)
		dp = ls.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(a.start)
		dp.SetTimestamp(now)
		dp.SetIntValue(a.lost[t.IP])
		putTargetAttrs(dp.Attributes(), t)
		hp := eh.DataPoints().AppendEmpty()
		hp.SetStartTimestamp(a.start)
		hp.SetTimestamp(now)
		putTargetAttrs(hp.Attributes(), t)
		putHistogram(hp, h)
	}
	return md
}

// putTargetAttrs sets the attributes of t's points, as pod_probe and k8s_net_attributes
// set them.
func putTargetAttrs(m pcommon.Map, t Target) {
	m.PutStr(contract.DestinationAddress, t.IP)
	m.PutStr(contract.NetworkType, contract.NetworkTypeIPv4)
	m.PutStr(contract.ProbeType, contract.ProbeTypeICMP)
	m.PutStr(contract.TargetKind, contract.TargetKindPod)
	if !t.Rotating {
		m.PutBool(contract.PairStable, true)
	}
	if t.Pod != "" {
		m.PutStr(contract.DestinationPrefix+contract.K8sPodName, t.Pod)
		m.PutStr(contract.DestinationPrefix+contract.K8sPodUID, t.UID)
		m.PutStr(contract.DestinationPrefix+contract.K8sNamespaceName, t.NS)
		m.PutStr(contract.DestinationPrefix+contract.K8sNodeName, t.Node)
	}
	if t.Zone != "" {
		m.PutStr(contract.DestinationPrefix+contract.CloudZone, t.Zone)
	}
}

// putHistogram copies the cumulative RTT histogram h into the point hp.
func putHistogram(hp pmetric.ExponentialHistogramDataPoint, h *structure.Histogram[float64]) {
	hp.SetCount(h.Count())
	hp.SetScale(h.Scale())
	hp.SetZeroCount(h.ZeroCount())
	if h.Count() > 0 {
		hp.SetSum(h.Sum())
		hp.SetMin(h.Min())
		hp.SetMax(h.Max())
	}
	hp.Positive().SetOffset(h.Positive().Offset())
	for j := uint32(0); j < h.Positive().Len(); j++ {
		hp.Positive().BucketCounts().Append(h.Positive().At(j))
	}
}

// Heartbeat appends the agent's rounds heartbeat (contract.MetricRounds, what pod_probe
// sends to sharded gateways) to md, which must hold this agent's Resource.
func (a *Agent) Heartbeat(md pmetric.Metrics, ts time.Time, rounds int64) {
	shard.AppendRounds(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics(), a.start, pcommon.NewTimestampFromTime(ts), rounds)
}
