// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"time"

	"github.com/lightstep/go-expohisto/structure"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/shard"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// observation is the outcome of one probe of one target in one round.
type observation struct {
	target target
	start  time.Time
	// success: the target answered (ICMP: at least one echo reply).
	success   bool
	errorType string
	message   string
	// durations: ICMP round-trip times of the replies, or the probe's duration.
	durations []time.Duration
	// ICMP only.
	sent, lost int
	phases     []phase
}

type phase struct {
	name     string
	start    time.Time
	duration time.Duration
}

// seriesKey identifies one time series: a target address, port and probe type, and
// whether the pair is stable (a peer that turns from stable to rotating starts anew).
type seriesKey struct {
	addr     string
	port     uint16
	probe    string
	kind     string
	stable   bool
	endpoint string // netpulse.target.endpoint: two URLs on one host:port are two series
}

// series is the cumulative state of one time series.
type series struct {
	start     pcommon.Timestamp
	sent      int64
	lost      int64
	errors    map[string]*errorCount
	hist      *structure.Histogram[float64]
	lastRound time.Time
}

// errorCount is the cumulative count of one error.type of a series. Its own start is the
// probe that first failed so: the gateway takes a stream it has not seen whose start is
// recent as that round's increment, so the first failure of a kind carries its error.type.
type errorCount struct {
	n     int64
	start pcommon.Timestamp
}

// sumKey identifies a cumulative sum's data point: its series, and for
// netpulse.probe.errors its error.type.
type sumKey struct {
	seriesKey
	errorType string
}

// emitter turns observations into OTLP metrics. Sums and histograms are cumulative, as
// Prometheus-compatible backends expect. A stable pair's series (probed every round) runs
// on until it was not observed for seriesTTL; a rotating pair's series starts anew every
// time it is probed (StartTimestamp = the probe's start), so each of its points is that
// round's increment and the gateway keeps no state for it (docs/telemetry-contract.md).
type emitter struct {
	mb        *metadata.MetricsBuilder
	res       pcommon.Resource // the source pod, built once
	series    map[seriesKey]*series
	seriesTTL time.Duration
	histOn    bool

	// shards > 1: stamp each target's points with its shard and emit the rounds heartbeat.
	shards      int
	owners      map[string]int // destination.address -> shard, for the round being emitted
	rounds      int64
	roundsStart pcommon.Timestamp
}

// maxHistogramBuckets bounds each exponential histogram; at ~20 µs .. 10 s it keeps a scale
// of 3 or more (relative error under 5%).
const maxHistogramBuckets = 160

func newEmitter(mb *metadata.MetricsBuilder, res pcommon.Resource, ttl time.Duration) *emitter {
	return &emitter{mb: mb, res: res, series: map[seriesKey]*series{}, seriesTTL: ttl, histOn: true}
}

func networkType(t target) metadata.AttributeNetworkType {
	if t.addr.Is6() {
		return metadata.AttributeNetworkTypeIpv6
	}
	return metadata.AttributeNetworkTypeIpv4
}

// probeTypes and targetKinds map the contract's values to mdatagen's attribute values
// (generated from metadata.yaml, whose enums the tests compare with the contract's).
var (
	probeTypes  = metadata.MapAttributeNetpulseProbeType
	targetKinds = metadata.MapAttributeNetpulseTargetKind
)

// shardBy makes the emitter stamp every target's points with its shard (internal/shard)
// and add the per-round heartbeat, for count gateway shards; count <= 1 changes nothing.
func (e *emitter) shardBy(count int, start time.Time) {
	e.shards = count
	e.roundsStart = pcommon.NewTimestampFromTime(start)
}

// own notes the shard of t's points for the round being emitted.
func (e *emitter) own(t target) {
	if e.shards <= 1 {
		return
	}
	if e.owners == nil {
		e.owners = map[string]int{}
	}
	addr := t.addressText()
	if _, ok := e.owners[addr]; ok && t.kind == kindExternal {
		return // a pod's or node's address that is also configured as external: its node decides
	}
	e.owners[addr] = shard.Of(t.node, e.shards) // external targets have no node: shard 0
}

// emit records one round's observations and returns the metrics: with shards, every point
// stamped with its target's shard and the rounds heartbeat added.
func (e *emitter) emit(now time.Time, obs []observation) pmetric.Metrics {
	for _, o := range obs {
		e.own(o.target)
	}
	md := e.emitRound(now, obs)
	if e.shards > 1 {
		e.stampShards(md, now)
	}
	clear(e.owners)
	return md
}

// stampShards sets netpulse.shard on every data point (its destination's shard; 0 when the
// address is unknown, so that no stray point reaches every shard) and appends the rounds
// heartbeat, which carries none.
func (e *emitter) stampShards(md pmetric.Metrics, now time.Time) {
	shard.Stamp(md, func(addr string) int { return e.owners[addr] })
	rms := md.ResourceMetrics()
	e.rounds++
	var sm pmetric.ScopeMetrics
	if rms.Len() == 0 {
		rm := rms.AppendEmpty()
		e.res.CopyTo(rm.Resource())
		sm = rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(metadata.ScopeName)
	} else {
		sm = rms.At(0).ScopeMetrics().At(0)
	}
	shard.AppendRounds(sm.Metrics(), e.roundsStart, pcommon.NewTimestampFromTime(now), e.rounds)
}

// emitRound records one round's observations and returns the metrics.
func (e *emitter) emitRound(now time.Time, obs []observation) pmetric.Metrics {
	ts := pcommon.NewTimestampFromTime(now)
	type histOut struct {
		key seriesKey
		t   target
		s   *series
	}
	var hists []histOut
	// starts: the StartTimestamp of each cumulative sum point, its series' own (mdatagen's
	// builder stamps every point with the builder's creation time).
	starts := map[sumKey]pcommon.Timestamp{}
	for _, o := range obs {
		t := o.target
		key := seriesKey{addr: t.addressText(), port: t.port, probe: t.probe, kind: t.kind, stable: t.stable, endpoint: t.endpoint()}
		probeStart := ts
		if !o.start.IsZero() && o.start.Before(now) {
			probeStart = pcommon.NewTimestampFromTime(o.start)
		}
		s := e.series[key]
		if s == nil {
			s = &series{start: probeStart, errors: map[string]*errorCount{}}
			s.hist = structure.NewFloat64(structure.NewConfig(structure.WithMaxSize(maxHistogramBuckets)))
			e.series[key] = s
		}
		s.lastRound = now
		nt, pt, tk := networkType(t), probeTypes[t.probe], targetKinds[t.kind]
		var stableOpts, portOpts []metadata.MetricAttributeOption
		if t.stable {
			stableOpts = append(stableOpts, metadata.WithNetpulsePairStableMetricAttribute(true))
		}
		portOpts = append(portOpts, stableOpts...)
		if key.endpoint != "" {
			portOpts = append(portOpts, metadata.WithNetpulseTargetEndpointMetricAttribute(key.endpoint))
		}
		if t.port != 0 {
			portOpts = append(portOpts, metadata.WithDestinationPortMetricAttribute(int64(t.port)))
		}
		status := int64(0)
		if o.success {
			status = 1
		}
		e.mb.RecordNetpulseProbeStatusDataPoint(ts, status, key.addr, nt, pt, tk, portOpts...)
		if t.probe == contract.ProbeTypeICMP {
			s.sent += int64(o.sent)
			s.lost += int64(o.lost)
			loss := 0.0
			if o.sent > 0 {
				loss = float64(o.lost) / float64(o.sent)
			}
			e.mb.RecordNetpulseProbeLossRatioDataPoint(ts, loss, key.addr, nt, pt, tk, stableOpts...)
			if j, ok := jitter(o.durations); ok {
				e.mb.RecordNetpulseProbeIcmpJitterDataPoint(ts, j.Seconds(), key.addr, nt, pt, tk, stableOpts...)
			}
			e.mb.RecordNetpulseProbePacketsSentDataPoint(ts, s.sent, key.addr, nt, pt, tk, stableOpts...)
			e.mb.RecordNetpulseProbePacketsLostDataPoint(ts, s.lost, key.addr, nt, pt, tk, stableOpts...)
		}
		starts[sumKey{seriesKey: key}] = s.start
		if !o.success {
			ec := s.errors[o.errorType]
			if ec == nil {
				ec = &errorCount{start: probeStart}
				s.errors[o.errorType] = ec
			}
			ec.n++
		}
		for et, ec := range s.errors {
			e.mb.RecordNetpulseProbeErrorsDataPoint(ts, ec.n, key.addr, nt, pt, tk, et, portOpts...)
			starts[sumKey{seriesKey: key, errorType: et}] = ec.start
		}
		if o.success {
			for _, d := range o.durations {
				s.hist.Update(d.Seconds())
			}
		}
		hists = append(hists, histOut{key, t, s})
	}
	for k, s := range e.series {
		if !k.stable || now.Sub(s.lastRound) > e.seriesTTL {
			delete(e.series, k) // rotating pairs: anew next time (the histogram below is already taken)
		}
	}

	md := e.mb.Emit(metadata.WithResource(e.res))
	setSumStarts(md, starts)
	if !e.histOn || len(hists) == 0 {
		return md
	}
	// mdatagen's builder has no histograms: add the duration histogram to the same scope.
	var sm pmetric.ScopeMetrics
	if md.ResourceMetrics().Len() == 0 {
		rm := md.ResourceMetrics().AppendEmpty()
		e.res.CopyTo(rm.Resource())
		sm = rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(metadata.ScopeName)
	} else {
		sm = md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	}
	m := sm.Metrics().AppendEmpty()
	m.SetName(contract.MetricDuration)
	m.SetUnit("s")
	m.SetDescription("Probe duration: ICMP echo round-trip time of each reply, or the duration of a successful TCP connect, HTTP request or DNS lookup.")
	eh := m.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, h := range hists {
		dp := eh.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(h.s.start)
		dp.SetTimestamp(ts)
		attrs := dp.Attributes()
		attrs.PutStr(contract.DestinationAddress, h.key.addr)
		if h.key.port != 0 {
			attrs.PutInt(contract.DestinationPort, int64(h.key.port))
		}
		attrs.PutStr(contract.NetworkType, networkType(h.t).String())
		attrs.PutStr(contract.ProbeType, h.key.probe)
		attrs.PutStr(contract.TargetKind, h.key.kind)
		if h.key.stable {
			attrs.PutBool(contract.PairStable, true)
		}
		if h.key.endpoint != "" {
			attrs.PutStr(contract.TargetEndpoint, h.key.endpoint)
		}
		copyHistogram(h.s.hist, dp)
	}
	return md
}

// setSumStarts gives each cumulative sum point the StartTimestamp of its series (see
// docs/telemetry-contract.md, "Series lifetime"): a rotating pair's sums start at its probe,
// a stable pair's where its series began. A point whose attributes match no series (some
// disabled in the configuration) keeps the builder's.
func setSumStarts(md pmetric.Metrics, starts map[sumKey]pcommon.Timestamp) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Type() != pmetric.MetricTypeSum {
					continue
				}
				dps := m.Sum().DataPoints()
				for p := 0; p < dps.Len(); p++ {
					dp := dps.At(p)
					if st, ok := starts[sumKeyOf(dp.Attributes())]; ok {
						dp.SetStartTimestamp(st)
					}
				}
			}
		}
	}
}

// sumKeyOf reads a sum point's series (and error.type) back from its attributes.
func sumKeyOf(attrs pcommon.Map) sumKey {
	str := func(k string) string {
		if v, ok := attrs.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
			return v.Str()
		}
		return ""
	}
	var k sumKey
	k.addr, k.probe, k.kind, k.endpoint, k.errorType = str(contract.DestinationAddress), str(contract.ProbeType), str(contract.TargetKind), str(contract.TargetEndpoint), str(contract.ErrorType)
	if v, ok := attrs.Get(contract.DestinationPort); ok && v.Type() == pcommon.ValueTypeInt {
		k.port = uint16(v.Int())
	}
	if v, ok := attrs.Get(contract.PairStable); ok && v.Type() == pcommon.ValueTypeBool {
		k.stable = v.Bool()
	}
	return k
}

func copyHistogram(h *structure.Histogram[float64], dp pmetric.ExponentialHistogramDataPoint) {
	dp.SetCount(h.Count())
	dp.SetScale(h.Scale())
	dp.SetZeroCount(h.ZeroCount())
	if h.Count() > 0 {
		dp.SetSum(h.Sum())
		dp.SetMin(h.Min())
		dp.SetMax(h.Max())
	}
	pos := h.Positive()
	dp.Positive().SetOffset(pos.Offset())
	counts := dp.Positive().BucketCounts()
	counts.EnsureCapacity(int(pos.Len()))
	for i := uint32(0); i < pos.Len(); i++ {
		counts.Append(pos.At(i))
	}
}

// jitter is the mean absolute difference between consecutive round-trip times (in echo
// order); ok is false with fewer than two.
func jitter(rtts []time.Duration) (time.Duration, bool) {
	if len(rtts) < 2 {
		return 0, false
	}
	var sum time.Duration
	for i := 1; i < len(rtts); i++ {
		d := rtts[i] - rtts[i-1]
		if d < 0 {
			d = -d
		}
		sum += d
	}
	return sum / time.Duration(len(rtts)-1), true
}
