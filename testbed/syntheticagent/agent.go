// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package syntheticagent

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lightstep/go-expohisto/structure"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/shard"
)

// The shipped agent's probing (deploy/agent-gateway/config/agent.yaml over pod_probe's
// defaults): k: 3 rotating peers and stable_peers: 1 (M) per round, ICMP only, icmp.count 3
// echoes, no node_ips, one address family on a single-stack cluster.
const (
	ShippedK           = 3
	ShippedStablePeers = 1
	ShippedICMPCount   = 3
	// ShippedEchoInterval separates the echoes of one round (icmp.echo_interval).
	ShippedEchoInterval = 100 * time.Millisecond
	// maxHistogramBuckets is pod_probe's bound on each exponential histogram (emit.go).
	maxHistogramBuckets = 160
	// AgentVersion is the scope version pod_probe stamps (the distribution's dist.version).
	AgentVersion = "0.1.0"
)

// Metric descriptions and units as pod_probe's generated metadata sets them (the shape test
// compares them with a real receiver's output).
const (
	descErrors   = "Failed probes by failure class, since the receiver started."
	descJitter   = "ICMP jitter of the last round, seconds: the mean absolute difference between the round-trip times of consecutive answered echoes (RFC 3550's inter-arrival difference, unsmoothed). Emitted only for rounds with at least two answered echoes."
	descLoss     = "Share of ICMP echoes of the last round that got no reply (0 to 1)."
	descLost     = "ICMP echo requests to the target that got no reply within the timeout, since the receiver started."
	descSent     = "ICMP echo requests sent to the target since the receiver started."
	descStatus   = "1 when the target answered the last probe round of this type, 0 when it did not."
	descDuration = "Probe duration: ICMP echo round-trip time of each reply, or the duration of a successful TCP connect, HTTP request or DNS lookup."
)

// Agent produces one agent's rounds as pod_probe emits them (receiver/podprobereceiver,
// emit.go, with the shipped configuration): one ResourceMetrics with the source pod on the
// Resource, one scope (pod_probe's), and per probed pod target the points of a healthy
// ICMP round (status, loss ratio, jitter, cumulative packets sent and lost, the cumulative
// exponential RTT histogram). What it reproduces, because the gateway's cost depends on it:
//
//   - the metric order of mdatagen's builder (errors, jitter, loss, lost, sent, status),
//     then the histogram appended to the same scope;
//   - the attribute sets and their order, netpulse.pair.stable: true on the stable pair's
//     points only;
//   - the timestamps: every point of a round carries the publish time; the gauges carry
//     the receiver's start as StartTimestamp (mdatagen's builder start time); the sums and
//     the histogram carry their series' own start: a stable pair's runs on from its first
//     probe, a rotating pair's starts anew at each probe (that probe's start);
//   - cumulative values: a stable pair's sent count and histogram grow by 3 echoes a
//     round; a rotating pair's hold that round's echoes only;
//   - the histogram: go-expohisto with pod_probe's 160-bucket bound, fed the round's RTTs.
//
// No errors metric in a healthy round (pod_probe emits it only once a series failed);
// RoundWithLoss adds lost echoes, timeouts and the errors metric.
type Agent struct {
	PodName, PodUID, Namespace, NodeName, PodIP string
	// Start is the receiver's start (mdatagen's start time).
	Start  time.Time
	stable map[string]*stableSeries
	rng    *rand.Rand
}

type stableSeries struct {
	start      pcommon.Timestamp
	sent, lost int64
	hist       *structure.Histogram[float64]
	// timeouts: failed rounds (netpulse.probe.errors{error.type=timeout}) since errStart,
	// the first failure.
	timeouts int64
	errStart pcommon.Timestamp
}

// NewAgent returns an agent whose receiver started at start; seed makes its RTTs
// reproducible.
func NewAgent(podName, podUID, namespace, nodeName, podIP string, start time.Time, seed uint64) *Agent {
	return &Agent{PodName: podName, PodUID: podUID, Namespace: namespace, NodeName: nodeName, PodIP: podIP,
		Start: start, stable: map[string]*stableSeries{}, rng: rand.New(rand.NewPCG(seed, 0x6e6574))}
}

// rtts draws the round-trip times of a round's n answered echoes: log-normal around
// 250 µs, a pod network.
func (a *Agent) rtts(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 250e-6 * math.Exp(0.35*a.rng.NormFloat64())
	}
	return out
}

func newHistogram() *structure.Histogram[float64] {
	return structure.NewFloat64(structure.NewConfig(structure.WithMaxSize(maxHistogramBuckets)))
}

// Round returns the batch of one probe round published at now: the stable targets' points
// (netpulse.pair.stable) and the rotating targets', in that order (targets are pod IPs).
func (a *Agent) Round(now time.Time, stableTargets, rotatingTargets []string) pmetric.Metrics {
	return a.RoundWithLoss(now, stableTargets, rotatingTargets, nil)
}

// RoundWithLoss is Round where lost(addr) of the round's ShippedICMPCount echoes to addr
// got no reply (nil: none); the answered echoes' RTTs are drawn. Emit renders the round.
func (a *Agent) RoundWithLoss(now time.Time, stableTargets, rotatingTargets []string, lost func(addr string) int) pmetric.Metrics {
	lostOf := func(addr string) int {
		if lost == nil {
			return 0
		}
		return min(max(lost(addr), 0), ShippedICMPCount)
	}
	// The probes ran in parallel and ended before the publish: their start is the round's
	// echoes (count-1 intervals) plus the last reply before now.
	probeStart := now.Add(-time.Duration(ShippedICMPCount-1)*ShippedEchoInterval - time.Millisecond)
	probes := make([]Probe, 0, len(stableTargets)+len(rotatingTargets))
	for _, t := range stableTargets {
		n := lostOf(t)
		probes = append(probes, Probe{Addr: t, Stable: true, Start: probeStart, RTTs: a.rtts(ShippedICMPCount - n), Lost: n})
	}
	for _, t := range rotatingTargets {
		n := lostOf(t)
		probes = append(probes, Probe{Addr: t, Start: probeStart, RTTs: a.rtts(ShippedICMPCount - n), Lost: n})
	}
	return a.Emit(now, probes)
}

// Probe is one ICMP probe of a pod target in a round, as the agent's emitter receives it.
type Probe struct {
	Addr   string // the pod IP probed; ipv6 for an address with a colon
	Stable bool   // a stable pair (netpulse.pair.stable, cumulative series), else rotating
	Start  time.Time
	// RTTs are the answered echoes' round-trip times, in seconds; Lost the echoes that got
	// no reply. None answered is a timeout.
	RTTs []float64
	Lost int
}

// point is a Probe with its series' cumulative state: sent and lost are the cumulative
// echo counts; histStart the histogram's StartTimestamp; timeouts the failed rounds since
// errStart (0: none yet).
type point struct {
	addr       string
	stable     bool
	rtts       []float64
	sent, lost int64
	histStart  pcommon.Timestamp
	hist       *structure.Histogram[float64]
	timeouts   int64
	errStart   pcommon.Timestamp
}

// Emit renders one round published at now as pod_probe does (emit.go): a stable pair's
// series are cumulative from its first probe, a rotating pair's hold this probe alone; a
// round with no reply has status 0 and counts a timeout in netpulse.probe.errors (a
// cumulative series from the pair's first failure), the lost echoes add to
// netpulse.probe.packets.lost, only answered echoes reach the histogram, and the jitter
// gauge is emitted only with two replies or more.
func (a *Agent) Emit(now time.Time, probes []Probe) pmetric.Metrics {
	all := make([]point, 0, len(probes))
	for _, p := range probes {
		all = append(all, a.point(p))
	}
	ts := pcommon.NewTimestampFromTime(now)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr(contract.K8sPodName, a.PodName)
	res.PutStr(contract.K8sPodUID, a.PodUID)
	res.PutStr(contract.K8sNamespaceName, a.Namespace)
	res.PutStr(contract.K8sNodeName, a.NodeName)
	res.PutStr(contract.K8sPodIP, a.PodIP)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(contract.ProbeScopeName)
	sm.Scope().SetVersion(AgentVersion)
	ms := sm.Metrics()
	start := pcommon.NewTimestampFromTime(a.Start)
	if slices.ContainsFunc(all, func(o point) bool { return o.timeouts > 0 }) {
		appendErrors(ms, all, ts)
	}
	always := func(point) bool { return true }
	appendGauge(ms, all, start, ts, contract.MetricJitter, descJitter, "s", func(o point) bool { return len(o.rtts) >= 2 }, func(o point) float64 { return jitter(o.rtts) })
	appendGauge(ms, all, start, ts, contract.MetricLossRatio, descLoss, "1", always, func(o point) float64 { return float64(ShippedICMPCount-len(o.rtts)) / ShippedICMPCount })
	appendPackets(ms, all, ts, contract.MetricPacketsLost, descLost, func(o point) int64 { return o.lost })
	appendPackets(ms, all, ts, contract.MetricPacketsSent, descSent, func(o point) int64 { return o.sent })
	status := ms.AppendEmpty()
	status.SetName(contract.MetricStatus)
	status.SetDescription(descStatus)
	status.SetUnit("1")
	statusPoints := status.SetEmptyGauge().DataPoints()
	for _, o := range all {
		dp := statusPoints.AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetIntValue(int64(min(len(o.rtts), 1)))
		putAttrs(dp.Attributes(), o)
	}
	m := ms.AppendEmpty()
	m.SetName(contract.MetricDuration)
	m.SetUnit("s")
	m.SetDescription(descDuration)
	eh := m.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, o := range all {
		dp := eh.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(o.histStart)
		dp.SetTimestamp(ts)
		putAttrs(dp.Attributes(), o)
		copyHistogram(o.hist, dp)
	}
	return md
}

// point adds p to its series: a stable pair's cumulative state, or a rotating pair's own.
func (a *Agent) point(p Probe) point {
	probeStart := pcommon.NewTimestampFromTime(p.Start)
	sent := int64(len(p.RTTs) + p.Lost)
	if !p.Stable {
		o := point{addr: p.Addr, rtts: p.RTTs, sent: sent, lost: int64(p.Lost), histStart: probeStart, hist: newHistogram()}
		for _, r := range o.rtts {
			o.hist.Update(r)
		}
		if len(o.rtts) == 0 {
			o.timeouts, o.errStart = 1, probeStart
		}
		return o
	}
	s := a.stable[p.Addr]
	if s == nil {
		s = &stableSeries{start: probeStart, hist: newHistogram()}
		a.stable[p.Addr] = s
	}
	o := point{addr: p.Addr, stable: true, rtts: p.RTTs}
	s.sent += sent
	s.lost += int64(p.Lost)
	for _, r := range o.rtts {
		s.hist.Update(r)
	}
	if len(o.rtts) == 0 {
		if s.timeouts == 0 {
			s.errStart = probeStart
		}
		s.timeouts++
	}
	o.sent, o.lost, o.histStart, o.hist, o.timeouts, o.errStart = s.sent, s.lost, s.start, s.hist, s.timeouts, s.errStart
	return o
}

// putAttrs sets a point's attributes as pod_probe does for an ICMP probe of a pod.
func putAttrs(m pcommon.Map, o point) {
	m.PutStr(contract.DestinationAddress, o.addr)
	if strings.Contains(o.addr, ":") {
		m.PutStr(contract.NetworkType, contract.NetworkTypeIPv6)
	} else {
		m.PutStr(contract.NetworkType, contract.NetworkTypeIPv4)
	}
	m.PutStr(contract.ProbeType, contract.ProbeTypeICMP)
	m.PutStr(contract.TargetKind, contract.TargetKindPod)
	if o.stable {
		m.PutBool(contract.PairStable, true)
	}
}

// appendErrors appends netpulse.probe.errors: the timeouts of the pairs that failed.
func appendErrors(ms pmetric.MetricSlice, all []point, ts pcommon.Timestamp) {
	m := ms.AppendEmpty()
	m.SetName(contract.MetricErrors)
	m.SetDescription(descErrors)
	m.SetUnit("{probe}")
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, o := range all {
		if o.timeouts == 0 {
			continue
		}
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(o.errStart)
		dp.SetTimestamp(ts)
		dp.SetIntValue(o.timeouts)
		putAttrs(dp.Attributes(), o)
		dp.Attributes().PutStr(contract.ErrorType, contract.ErrorTypeTimeout)
	}
}

// appendGauge appends a gauge with a point for each pair emit selects; none, as
// mdatagen's builder, when it selects none.
func appendGauge(ms pmetric.MetricSlice, all []point, start, ts pcommon.Timestamp, name, desc, unit string, emit func(point) bool, val func(point) float64) {
	if !slices.ContainsFunc(all, emit) {
		return
	}
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetDescription(desc)
	m.SetUnit(unit)
	dps := m.SetEmptyGauge().DataPoints()
	for _, o := range all {
		if !emit(o) {
			continue
		}
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(val(o))
		putAttrs(dp.Attributes(), o)
	}
}

// appendPackets appends a cumulative echo counter with a point for every pair.
func appendPackets(ms pmetric.MetricSlice, all []point, ts pcommon.Timestamp, name, desc string, val func(point) int64) {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetDescription(desc)
	m.SetUnit("{packet}")
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, o := range all {
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(o.histStart) // the series' own start, as the histogram's
		dp.SetTimestamp(ts)
		dp.SetIntValue(val(o))
		putAttrs(dp.Attributes(), o)
	}
}

// copyHistogram is pod_probe's (emit.go).
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

// jitter is pod_probe's (emit.go): the mean absolute difference of consecutive RTTs, in
// whole nanoseconds as pod_probe measures them, the mean rounded down as its integer
// division does. The golden test holds it to pod_probe's output.
func jitter(rtts []float64) float64 {
	if len(rtts) < 2 {
		return 0
	}
	ns := func(sec float64) time.Duration { return time.Duration(math.Round(sec * 1e9)) }
	var sum time.Duration
	for i := 1; i < len(rtts); i++ {
		d := ns(rtts[i]) - ns(rtts[i-1])
		if d < 0 {
			d = -d
		}
		sum += d
	}
	return (sum / time.Duration(len(rtts)-1)).Seconds()
}

// Plan is the shipped planner's shape for agent i of n in round r: its M stable peers (its
// ring successors) and K rotating peers that change every round, all distinct and never
// itself, so that every pod is probed by about K+M agents a round.
func Plan(i, n, r int) (stable, rotating []int) {
	for m := 1; m <= ShippedStablePeers; m++ {
		stable = append(stable, (i+m)%n)
	}
	span := n - 1 - ShippedStablePeers
	for j := range ShippedK {
		off := 1 + ShippedStablePeers + (r*ShippedK+j)%span
		rotating = append(rotating, (i+off)%n)
	}
	return stable, rotating
}

// Heartbeat appends pod_probe's rounds heartbeat (contract.MetricRounds: what an agent
// sends every gateway shard each round, without attributes) to md, a batch of this agent's
// from Round.
func (a *Agent) Heartbeat(md pmetric.Metrics, now time.Time, rounds int64) {
	shard.AppendRounds(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics(),
		pcommon.NewTimestampFromTime(a.Start), pcommon.NewTimestampFromTime(now), rounds)
}
