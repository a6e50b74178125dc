// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package scalesim

import (
	"fmt"
	"runtime"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/decode"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
)

// roundMetrics renders one pod_probe round of src towards targets as the receiver emits
// it: a status gauge, cumulative echo counters and a cumulative RTT histogram per target,
// the stable ones marked netpulse.pair.stable.
func roundMetrics(src observation.Source, targets []observation.Target, stable []bool, start, ts time.Time, rounds int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	r := rm.Resource().Attributes()
	r.PutStr(contract.K8sNamespaceName, src.Namespace)
	r.PutStr(contract.K8sPodName, src.Name)
	r.PutStr(contract.K8sPodUID, src.UID)
	r.PutStr(contract.K8sNodeName, src.Node)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	status := ms.AppendEmpty()
	status.SetName(contract.MetricStatus)
	sg := status.SetEmptyGauge()
	sums := map[string]pmetric.Sum{}
	for _, name := range []string{contract.MetricPacketsSent, contract.MetricPacketsLost} {
		m := ms.AppendEmpty()
		m.SetName(name)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sums[name] = s
	}
	dur := ms.AppendEmpty()
	dur.SetName(contract.MetricDuration)
	eh := dur.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	st, now := pcommon.NewTimestampFromTime(start), pcommon.NewTimestampFromTime(ts)
	attrs := func(m pcommon.Map, t observation.Target, stable bool) {
		m.PutStr(contract.DestinationAddress, t.Address)
		m.PutStr(contract.NetworkType, contract.NetworkTypeIPv4)
		m.PutStr(contract.ProbeType, contract.ProbeTypeICMP)
		m.PutStr(contract.TargetKind, contract.TargetKindPod)
		if stable {
			m.PutBool(contract.PairStable, true)
		}
		m.PutStr(contract.DestinationPrefix+contract.K8sPodName, t.Name)
		m.PutStr(contract.DestinationPrefix+contract.K8sPodUID, t.UID)
		m.PutStr(contract.DestinationPrefix+contract.K8sNamespaceName, t.Namespace)
		m.PutStr(contract.DestinationPrefix+contract.K8sNodeName, t.Node)
	}
	for i, t := range targets {
		dp := sg.DataPoints().AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetIntValue(1)
		attrs(dp.Attributes(), t, stable[i])
		for name, s := range sums {
			dp := s.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(st)
			dp.SetTimestamp(now)
			if name == contract.MetricPacketsSent {
				dp.SetIntValue(3 * rounds)
			}
			attrs(dp.Attributes(), t, stable[i])
		}
		hp := eh.DataPoints().AppendEmpty()
		hp.SetStartTimestamp(st)
		hp.SetTimestamp(now)
		hp.SetScale(8)
		hp.SetCount(uint64(3 * rounds))
		hp.SetSum(0.00025 * float64(3*rounds))
		hp.Positive().SetOffset(-3067)
		hp.Positive().BucketCounts().FromRaw([]uint64{uint64(3 * rounds)})
		attrs(hp.Attributes(), t, stable[i])
	}
	return md
}

// ReferenceBytes measures, with the real summary package, what the pair-per-object model
// (every pair probed within target_ttl summarised, every pair's cumulative streams kept
// for the decoder's default 2 h) holds per summarised pair and per remembered pair of
// streams, from samples of the given size.
func ReferenceBytes(samples int) (perPair, perStreamPair float64) {
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	src := observation.Source{Namespace: "netpulse", Name: "agent-00000", UID: "uid-00000", Node: "node-00000"}
	targets := make([]observation.Target, samples)
	stable := make([]bool, samples) // the old model: no stable pairs, every stream kept
	for i := range targets {
		id := fmt.Sprintf("%05d", i)
		targets[i] = observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: "agent-" + id, UID: "uid-" + id,
			Node: "node-" + id, Address: fmt.Sprintf("10.%d.%d.%d", i/65536, (i/256)%256, i%256)}
	}
	measure := func(build func() any) float64 {
		runtime.GC()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		v := build()
		runtime.GC()
		runtime.ReadMemStats(&b)
		runtime.KeepAlive(v)
		return float64(int64(b.HeapAlloc)-int64(a.HeapAlloc)) / float64(samples)
	}
	perPair = measure(func() any {
		s := verdict.NewSummarizer(verdict.SummaryConfig{})
		rtt := observation.NewHistogram(8)
		rtt.RecordN(0.00025, 3)
		obs := make([]observation.Observation, 0, samples)
		for i := range targets {
			obs = append(obs, observation.Observation{Source: src, Target: targets[i], ProbeType: contract.ProbeTypeICMP, Timestamp: t0, Success: true, Sent: 3, RTT: rtt})
		}
		s.Add(obs...)
		return s
	})
	perStreamPair = measure(func() any {
		d := decode.NewDecoder(decode.DecoderConfig{})
		d.Decode(roundMetrics(src, targets, stable, t0, t0.Add(time.Second), 1), t0)
		return d
	})
	return perPair, perStreamPair
}
