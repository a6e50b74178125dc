// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/lightstep/go-expohisto/structure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
)

// fakeAgent emits metrics the way the pod_probe receiver does (receiver/podprobereceiver/
// emit.go): per round a status gauge, for ICMP a loss gauge and cumulative sent/lost sums,
// cumulative error sums by error.type, and a cumulative exponential duration histogram;
// the source on the Resource, the target on data point attributes, one timestamp per round.
type fakeAgent struct {
	res    map[string]string
	series map[string]*fakeSeries
	// enrich adds attributes (as k8s_net_attributes would) per destination address.
	enrich map[string]map[string]string
}

type fakeSeries struct {
	start      pcommon.Timestamp
	sent, lost int64
	errors     map[string]int64
	hist       *structure.Histogram[float64]
}

type probe struct {
	addr    string
	port    int64
	typ     string
	kind    string
	success bool
	errType string
	rtts    []float64
	sent    int
	lost    int
	stable  bool // netpulse.pair.stable
}

func newFakeAgent() *fakeAgent {
	return &fakeAgent{
		res: map[string]string{
			contract.K8sNamespaceName: "netpulse", contract.K8sPodName: "agent-a", contract.K8sPodUID: "uid-a",
			contract.K8sNodeName: "node-a", contract.K8sPodIP: "10.0.1.10",
		},
		series: map[string]*fakeSeries{},
		enrich: map[string]map[string]string{},
	}
}

func (a *fakeAgent) attrs(m pcommon.Map, p probe) {
	m.PutStr(contract.DestinationAddress, p.addr)
	if p.port != 0 {
		m.PutInt(contract.DestinationPort, p.port)
	}
	m.PutStr(contract.NetworkType, "ipv4")
	m.PutStr(contract.ProbeType, p.typ)
	m.PutStr(contract.TargetKind, p.kind)
	if p.stable {
		m.PutBool(contract.PairStable, true)
	}
	for k, v := range a.enrich[p.addr] {
		m.PutStr(k, v)
	}
}

func (a *fakeAgent) round(now time.Time, probes ...probe) pmetric.Metrics {
	ts := pcommon.NewTimestampFromTime(now)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	for k, v := range a.res {
		rm.Resource().Attributes().PutStr(k, v)
	}
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	status := ms.AppendEmpty()
	status.SetName(contract.MetricStatus)
	status.SetEmptyGauge()
	loss := ms.AppendEmpty()
	loss.SetName(contract.MetricLossRatio)
	loss.SetEmptyGauge()
	sum := func(name string) pmetric.Sum {
		m := ms.AppendEmpty()
		m.SetName(name)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		return s
	}
	sent, lost, errs := sum(contract.MetricPacketsSent), sum(contract.MetricPacketsLost), sum(contract.MetricErrors)
	dur := ms.AppendEmpty()
	dur.SetName(contract.MetricDuration)
	eh := dur.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, p := range probes {
		key := p.addr + "|" + p.typ
		s := a.series[key]
		if s == nil {
			s = &fakeSeries{start: ts, errors: map[string]int64{}, hist: structure.NewFloat64(structure.NewConfig(structure.WithMaxSize(160)))}
			a.series[key] = s
		}
		dp := status.Gauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(map[bool]int64{true: 1, false: 0}[p.success])
		a.attrs(dp.Attributes(), p)
		if p.typ == contract.ProbeTypeICMP {
			s.sent += int64(p.sent)
			s.lost += int64(p.lost)
			l := loss.Gauge().DataPoints().AppendEmpty()
			l.SetTimestamp(ts)
			l.SetDoubleValue(float64(p.lost) / float64(max(p.sent, 1)))
			a.attrs(l.Attributes(), p)
			for _, x := range []struct {
				s pmetric.Sum
				v int64
			}{{sent, s.sent}, {lost, s.lost}} {
				d := x.s.DataPoints().AppendEmpty()
				d.SetStartTimestamp(s.start)
				d.SetTimestamp(ts)
				d.SetIntValue(x.v)
				a.attrs(d.Attributes(), p)
			}
		}
		if !p.success {
			s.errors[p.errType]++
		}
		for et, n := range s.errors {
			d := errs.DataPoints().AppendEmpty()
			d.SetStartTimestamp(s.start)
			d.SetTimestamp(ts)
			d.SetIntValue(n)
			a.attrs(d.Attributes(), p)
			d.Attributes().PutStr(contract.ErrorType, et)
		}
		if p.success {
			for _, r := range p.rtts {
				s.hist.Update(r)
			}
		}
		h := eh.DataPoints().AppendEmpty()
		h.SetStartTimestamp(s.start)
		h.SetTimestamp(ts)
		a.attrs(h.Attributes(), p)
		h.SetCount(s.hist.Count())
		h.SetScale(s.hist.Scale())
		h.SetZeroCount(s.hist.ZeroCount())
		if s.hist.Count() > 0 {
			h.SetSum(s.hist.Sum())
			h.SetMin(s.hist.Min())
			h.SetMax(s.hist.Max())
		}
		h.Positive().SetOffset(s.hist.Positive().Offset())
		for i := uint32(0); i < s.hist.Positive().Len(); i++ {
			h.Positive().BucketCounts().Append(s.hist.Positive().At(i))
		}
	}
	return md
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func findObs(obs []observation.Observation, addr, typ string) *observation.Observation {
	for i := range obs {
		if obs[i].Target.Address == addr && obs[i].ProbeType == typ {
			return &obs[i]
		}
	}
	return nil
}

func TestDecodeRoundsLikeTheReceiver(t *testing.T) {
	a := newFakeAgent()
	a.enrich["10.0.2.10"] = map[string]string{
		"destination.k8s.pod.name": "agent-b", "destination.k8s.pod.uid": "uid-b",
		"destination.k8s.namespace.name": "netpulse", "destination.k8s.node.name": "node-b",
		"destination.cloud.availability_zone": "zone-2",
	}
	d := NewDecoder(DecoderConfig{})

	r1 := d.Decode(a.round(t0,
		probe{addr: "10.0.2.10", typ: "icmp", kind: "pod", success: true, rtts: []float64{300e-6, 310e-6, 320e-6}, sent: 3},
		probe{addr: "10.0.2.10", port: 80, typ: "tcp", kind: "pod", success: true, rtts: []float64{1e-3}},
	), t0)
	assert.Empty(t, r1.Skipped)
	require.Len(t, r1.Observations, 2)
	icmp := findObs(r1.Observations, "10.0.2.10", "icmp")
	require.NotNil(t, icmp)
	assert.Equal(t, observation.Source{Namespace: "netpulse", Name: "agent-a", UID: "uid-a", Node: "node-a", IP: "10.0.1.10"}, icmp.Source)
	assert.Equal(t, observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: "agent-b", UID: "uid-b", Node: "node-b", Zone: "zone-2", Address: "10.0.2.10"}, icmp.Target)
	assert.True(t, icmp.Success)
	assert.Equal(t, t0, icmp.Timestamp)
	assert.Equal(t, uint64(3), icmp.Sent)
	assert.Equal(t, uint64(0), icmp.Lost)
	assert.True(t, icmp.HasLoss)
	assert.Equal(t, uint64(3), icmp.RTT.Count(), "first sight is the delta")
	assert.Equal(t, 300e-6, icmp.RTT.Min)
	assert.Equal(t, 320e-6, icmp.RTT.Max)
	tcp := findObs(r1.Observations, "10.0.2.10", "tcp")
	require.NotNil(t, tcp)
	assert.Equal(t, int64(80), tcp.Target.Port)
	assert.Equal(t, uint64(1), tcp.RTT.Count())

	// Round 2: one echo lost, slower RTTs; the TCP connect is refused.
	t1 := t0.Add(10 * time.Second)
	r2 := d.Decode(a.round(t1,
		probe{addr: "10.0.2.10", typ: "icmp", kind: "pod", success: true, rtts: []float64{5e-3, 6e-3}, sent: 3, lost: 1},
		probe{addr: "10.0.2.10", port: 80, typ: "tcp", kind: "pod", success: false, errType: "refused"},
	), t1)
	assert.Empty(t, r2.Skipped)
	require.Len(t, r2.Observations, 2)
	icmp = findObs(r2.Observations, "10.0.2.10", "icmp")
	assert.Equal(t, uint64(3), icmp.Sent, "sent is diffed")
	assert.Equal(t, uint64(1), icmp.Lost)
	assert.InDelta(t, 1.0/3, icmp.LossRatio, 1e-12)
	assert.Equal(t, uint64(2), icmp.RTT.Count(), "only this round's RTTs")
	assert.Equal(t, 6e-3, icmp.RTT.Max, "a new cumulative max is this round's max")
	assert.GreaterOrEqual(t, icmp.RTT.Min, 4.8e-3, "the old samples are gone")
	tcp = findObs(r2.Observations, "10.0.2.10", "tcp")
	assert.False(t, tcp.Success)
	assert.Equal(t, "refused", tcp.ErrorType)
	assert.Equal(t, "tcp 10.0.2.10:80: refused", tcp.Message)
	assert.True(t, tcp.RTT.IsEmpty())

	// Round 3: TCP succeeds again; the errors counter did not move, so no error type.
	t2 := t1.Add(10 * time.Second)
	r3 := d.Decode(a.round(t2,
		probe{addr: "10.0.2.10", port: 80, typ: "tcp", kind: "pod", success: true, rtts: []float64{2e-3}},
	), t2)
	require.Len(t, r3.Observations, 1)
	assert.True(t, r3.Observations[0].Success)
	assert.Empty(t, r3.Observations[0].ErrorType)
	assert.Equal(t, uint64(1), r3.Observations[0].RTT.Count())
	assert.Equal(t, 0, r3.Resets)
}

func TestDecodeTargetKinds(t *testing.T) {
	cases := []struct {
		name  string
		attrs map[string]string
		want  observation.Target
	}{
		{"pod by uid", map[string]string{"destination.k8s.pod.uid": "u1", "destination.k8s.node.name": "n1"},
			observation.Target{Kind: observation.TargetPod, UID: "u1", Node: "n1"}},
		{"pod by name and namespace", map[string]string{"destination.k8s.pod.name": "p", "destination.k8s.namespace.name": "ns"},
			observation.Target{Kind: observation.TargetPod, Namespace: "ns", Name: "p"}},
		{"name without namespace is not enough", map[string]string{"destination.k8s.pod.name": "p"},
			observation.Target{Kind: observation.TargetExternal}},
		{"node by kind", map[string]string{contract.TargetKind: "node", "destination.k8s.node.name": "n1", "destination.k8s.pod.uid": "hostnet"},
			observation.Target{Kind: observation.TargetNode, Name: "n1", Node: "n1"}},
		{"node by node name only", map[string]string{"destination.k8s.node.name": "n2", "destination.cloud.availability_zone": "z"},
			observation.Target{Kind: observation.TargetNode, Name: "n2", Node: "n2", Zone: "z"}},
		{"external", map[string]string{contract.TargetKind: "external"}, observation.Target{Kind: observation.TargetExternal}},
		{"a node claim nobody resolved is external", map[string]string{contract.TargetKind: "node"}, observation.Target{Kind: observation.TargetExternal}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := pcommon.NewMap()
			m.PutStr(contract.DestinationAddress, "192.0.2.1")
			m.PutStr(contract.ProbeType, "icmp")
			for k, v := range c.attrs {
				m.PutStr(k, v)
			}
			got, probe, reason := targetOf(m)
			require.Empty(t, reason)
			assert.Equal(t, "icmp", probe)
			c.want.Address = "192.0.2.1"
			assert.Equal(t, c.want, got)
		})
	}
}

// gaugeMetrics builds one status gauge point per attribute set.
func statusMetrics(res map[string]string, ts time.Time, attrSets ...map[string]any) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	for k, v := range res {
		rm.Resource().Attributes().PutStr(k, v)
	}
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(contract.MetricStatus)
	g := m.SetEmptyGauge()
	for _, as := range attrSets {
		dp := g.DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		dp.SetIntValue(1)
		_ = dp.Attributes().FromRaw(as)
	}
	return md
}

func TestDecodeSkips(t *testing.T) {
	src := newFakeAgent().res
	good := map[string]any{contract.DestinationAddress: "10.0.0.1", contract.ProbeType: "icmp"}
	d := NewDecoder(DecoderConfig{})

	// Missing source: every data point of a known metric counts; other metrics do not.
	for _, drop := range []string{contract.K8sNamespaceName, contract.K8sPodName, contract.K8sPodUID} {
		res := map[string]string{}
		for k, v := range src {
			if k != drop {
				res[k] = v
			}
		}
		md := statusMetrics(res, t0, good, good)
		other := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
		other.SetName("k8s.pod.cpu.usage")
		other.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
		r := d.Decode(md, t0)
		assert.Equal(t, map[SkipReason]int{SkipMissingSource: 2}, r.Skipped, "without %s", drop)
		assert.Empty(t, r.Observations)
	}

	// Per data point reasons; the good point in the same batch is still decoded.
	md := statusMetrics(src, t0,
		good,
		map[string]any{contract.ProbeType: "icmp"},                                        // no address
		map[string]any{contract.DestinationAddress: int64(7), contract.ProbeType: "icmp"}, // address not a string
		map[string]any{contract.DestinationAddress: "10.0.0.2"},                           // no probe type
		map[string]any{contract.DestinationAddress: "10.0.0.3", contract.ProbeType: "sctp"},
	)
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	gdp := ms.At(0).Gauge().DataPoints()
	for _, v := range []float64{math.NaN(), math.Inf(1), -1} {
		dp := gdp.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(t0))
		dp.SetDoubleValue(v)
		_ = dp.Attributes().FromRaw(map[string]any{contract.DestinationAddress: "10.0.0.4", contract.ProbeType: "tcp"})
	}
	lossM := ms.AppendEmpty()
	lossM.SetName(contract.MetricLossRatio)
	ldp := lossM.SetEmptyGauge().DataPoints().AppendEmpty()
	ldp.SetDoubleValue(1.5)
	_ = ldp.Attributes().FromRaw(good)
	// Duration as an explicit-bucket histogram: unsupported.
	hm := ms.AppendEmpty()
	hm.SetName(contract.MetricDuration)
	_ = hm.SetEmptyHistogram().DataPoints().AppendEmpty().Attributes().FromRaw(good)
	// Malformed exponential histograms.
	em := ms.AppendEmpty()
	em.SetName(contract.MetricDuration)
	eh := em.SetEmptyExponentialHistogram()
	neg := eh.DataPoints().AppendEmpty()
	_ = neg.Attributes().FromRaw(map[string]any{contract.DestinationAddress: "10.0.0.5", contract.ProbeType: "icmp"})
	neg.Negative().BucketCounts().FromRaw([]uint64{1})
	badScale := eh.DataPoints().AppendEmpty()
	_ = badScale.Attributes().FromRaw(map[string]any{contract.DestinationAddress: "10.0.0.6", contract.ProbeType: "icmp"})
	badScale.SetScale(42)
	huge := eh.DataPoints().AppendEmpty()
	_ = huge.Attributes().FromRaw(map[string]any{contract.DestinationAddress: "10.0.0.7", contract.ProbeType: "icmp"})
	huge.SetScale(20)
	huge.Positive().SetOffset(math.MaxInt32 - 1)
	huge.Positive().BucketCounts().FromRaw([]uint64{1})
	nanMax := eh.DataPoints().AppendEmpty()
	_ = nanMax.Attributes().FromRaw(map[string]any{contract.DestinationAddress: "10.0.0.8", contract.ProbeType: "icmp"})
	nanMax.Positive().BucketCounts().FromRaw([]uint64{1})
	nanMax.SetMax(math.NaN())

	r := d.Decode(md, t0)
	assert.Equal(t, map[SkipReason]int{
		SkipMissingTarget:    2,
		SkipUnknownProbeType: 2,
		SkipInvalidValue:     3 + 1 + 4,
		SkipUnsupportedType:  1,
	}, r.Skipped)
	require.Len(t, r.Observations, 1)
	assert.Equal(t, "10.0.0.1", r.Observations[0].Target.Address)
	assert.True(t, r.Observations[0].Success)
}

func TestDecodeResetsAndFirstSight(t *testing.T) {
	a := newFakeAgent()
	d := NewDecoder(DecoderConfig{})
	ic := func(sent, lost int, rtts ...float64) probe {
		return probe{addr: "10.0.2.10", typ: "icmp", kind: "pod", success: lost < sent, errType: "timeout", rtts: rtts, sent: sent, lost: lost}
	}
	d.Decode(a.round(t0, ic(3, 0, 1e-3, 1e-3, 1e-3)), t0)
	r := d.Decode(a.round(t0.Add(10*time.Second), ic(3, 1, 2e-3, 2e-3)), t0)
	require.Len(t, r.Observations, 1)
	assert.Equal(t, uint64(3), r.Observations[0].Sent)
	assert.Equal(t, 0, r.Resets)

	// The agent restarts: a new StartTimestamp; the new cumulative values are the delta.
	a.series = map[string]*fakeSeries{}
	t2 := t0.Add(20 * time.Second)
	r = d.Decode(a.round(t2, ic(3, 0, 4e-3, 4e-3, 4e-3)), t2)
	require.Len(t, r.Observations, 1)
	o := r.Observations[0]
	assert.Equal(t, uint64(3), o.Sent)
	assert.Equal(t, uint64(0), o.Lost)
	assert.Equal(t, uint64(3), o.RTT.Count())
	assert.Positive(t, r.Resets)

	// Counts going down without a start time (StartTimestamp unset) also reset.
	d2 := NewDecoder(DecoderConfig{})
	md := a.round(t2.Add(10*time.Second), ic(3, 0, 4e-3)) // cumulative: 6 sent, 4 RTTs
	clearStarts(md)
	d2.Decode(md, t2)
	a.series = map[string]*fakeSeries{}
	md = a.round(t2.Add(20*time.Second), ic(3, 0, 4e-3)) // restarted: 3 sent, 1 RTT
	clearStarts(md)
	r = d2.Decode(md, t2)
	assert.Equal(t, 2, r.Resets, "sent and the histogram went down (lost stayed 0)")
	require.Len(t, r.Observations, 1)
	assert.Equal(t, uint64(3), r.Observations[0].Sent)
	assert.Equal(t, uint64(1), r.Observations[0].RTT.Count())

	// FirstSightMaxAge: a long history seen for the first time only sets the baseline.
	old := newFakeAgent()
	for i := range 100 {
		old.round(t0.Add(time.Duration(i)*10*time.Second), ic(3, 0, 1e-3))
	}
	late := t0.Add(1000 * time.Second)
	for _, c := range []struct {
		age  time.Duration
		want uint64
	}{{0, 101 * 3}, {time.Minute, 0}} {
		d3 := NewDecoder(DecoderConfig{FirstSightMaxAge: c.age})
		r = d3.Decode(old.round(late, ic(3, 0, 1e-3)), late)
		require.Len(t, r.Observations, 1)
		assert.Equal(t, c.want, r.Observations[0].Sent, "FirstSightMaxAge %v", c.age)
		assert.True(t, r.Observations[0].Success, "the status is used either way")
	}
}

func clearStarts(md pmetric.Metrics) {
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i)
		switch m.Type() {
		case pmetric.MetricTypeSum:
			for j := 0; j < m.Sum().DataPoints().Len(); j++ {
				m.Sum().DataPoints().At(j).SetStartTimestamp(0)
			}
		case pmetric.MetricTypeExponentialHistogram:
			for j := 0; j < m.ExponentialHistogram().DataPoints().Len(); j++ {
				m.ExponentialHistogram().DataPoints().At(j).SetStartTimestamp(0)
			}
		}
	}
}

func TestDecodeDuplicatesOutOfOrderAndBatchedRounds(t *testing.T) {
	a := newFakeAgent()
	ic := probe{addr: "10.0.2.10", typ: "icmp", kind: "pod", success: true, rtts: []float64{1e-3, 1e-3, 1e-3}, sent: 3}
	m1 := a.round(t0, ic)
	m2 := a.round(t0.Add(10*time.Second), ic)
	m3 := a.round(t0.Add(20*time.Second), ic)

	// Two rounds in one batch, in reverse order: diffed in time order.
	batch := pmetric.NewMetrics()
	m2.ResourceMetrics().MoveAndAppendTo(batch.ResourceMetrics())
	m1.ResourceMetrics().MoveAndAppendTo(batch.ResourceMetrics())
	d := NewDecoder(DecoderConfig{})
	dup := pmetric.NewMetrics()
	batch.CopyTo(dup)
	r := d.Decode(batch, t0)
	require.Len(t, r.Observations, 2)
	assert.Equal(t, t0, r.Observations[0].Timestamp, "ordered by time")
	for _, o := range r.Observations {
		assert.Equal(t, uint64(3), o.Sent)
		assert.Equal(t, uint64(3), o.RTT.Count())
	}
	// A retried export: the same points again add nothing (but still report status); the
	// older round is out of order.
	r = d.Decode(dup, t0)
	assert.Equal(t, map[SkipReason]int{SkipOutOfOrder: 3}, r.Skipped) // sent, lost, duration of round 1
	require.Len(t, r.Observations, 2)
	for _, o := range r.Observations {
		assert.Zero(t, o.Sent)
		assert.True(t, o.RTT.IsEmpty())
		assert.True(t, o.Success)
	}
	// And the stream continues normally.
	r = d.Decode(m3, t0)
	require.Len(t, r.Observations, 1)
	assert.Equal(t, uint64(3), r.Observations[0].Sent)
}

func TestDecodeEnrichmentDoesNotRestartStreams(t *testing.T) {
	a := newFakeAgent()
	d := NewDecoder(DecoderConfig{})
	ic := probe{addr: "10.0.2.10", typ: "icmp", kind: "pod", success: true, rtts: []float64{1e-3}, sent: 1}
	r := d.Decode(a.round(t0, ic), t0)
	assert.Equal(t, observation.TargetExternal, r.Observations[0].Target.Kind, "not enriched yet")
	a.enrich["10.0.2.10"] = map[string]string{"destination.k8s.pod.uid": "uid-b", "destination.k8s.pod.name": "agent-b", "destination.k8s.namespace.name": "netpulse"}
	r = d.Decode(a.round(t0.Add(10*time.Second), ic), t0)
	require.Len(t, r.Observations, 1)
	assert.Equal(t, observation.TargetPod, r.Observations[0].Target.Kind)
	assert.Equal(t, uint64(1), r.Observations[0].Sent, "diffed against the unenriched stream")
	assert.Equal(t, uint64(1), r.Observations[0].RTT.Count())
}

func TestDecodeInfersOutcomeWithoutStatus(t *testing.T) {
	a := newFakeAgent()
	md := a.round(t0,
		probe{addr: "10.0.0.1", typ: "icmp", kind: "external", success: false, errType: "timeout", sent: 3, lost: 3},
		probe{addr: "10.0.0.2", typ: "icmp", kind: "external", success: true, rtts: []float64{1e-3}, sent: 3, lost: 2},
	)
	// Drop the status gauge.
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	ms.RemoveIf(func(m pmetric.Metric) bool { return m.Name() == contract.MetricStatus })
	r := NewDecoder(DecoderConfig{}).Decode(md, t0)
	require.Len(t, r.Observations, 2)
	assert.False(t, r.Observations[0].Success)
	assert.Equal(t, "timeout", r.Observations[0].ErrorType)
	assert.Equal(t, "icmp 10.0.0.1: timeout (3 of 3 echoes lost)", r.Observations[0].Message)
	assert.True(t, r.Observations[1].Success)
}

func TestDecoderExpire(t *testing.T) {
	a := newFakeAgent()
	d := NewDecoder(DecoderConfig{StreamTTL: time.Hour})
	d.Decode(a.round(t0, probe{addr: "10.0.0.1", typ: "icmp", kind: "external", success: true, rtts: []float64{1e-3}, sent: 1}), t0)
	n := d.Streams()
	assert.Equal(t, 3, n, "sent, lost and duration (no error points yet)")
	assert.Equal(t, 0, d.Expire(t0.Add(time.Hour)))
	assert.Equal(t, n, d.Expire(t0.Add(time.Hour+time.Second)))
	assert.Equal(t, 0, d.Streams())
}

// garbageValue returns a random attribute value of a random type.
func garbageValue(rng *rand.Rand, m pcommon.Map, k string) {
	switch rng.IntN(7) {
	case 0:
		m.PutStr(k, []string{"", "icmp", "tcp", "pod", "node", "10.0.0.1", "\x00\xff", "::1"}[rng.IntN(8)])
	case 1:
		m.PutInt(k, rng.Int64()-rng.Int64())
	case 2:
		m.PutDouble(k, []float64{math.NaN(), math.Inf(-1), math.Copysign(0, -1), 1e308}[rng.IntN(4)])
	case 3:
		m.PutBool(k, rng.IntN(2) == 0)
	case 4:
		m.PutEmptyBytes(k).FromRaw([]byte{0, 1, 2})
	case 5:
		s := m.PutEmptySlice(k)
		s.AppendEmpty().SetStr("x")
	default:
		mm := m.PutEmptyMap(k)
		mm.PutStr("nested", "y")
	}
}

var garbageKeys = []string{
	contract.DestinationAddress, contract.DestinationPort, contract.ProbeType, contract.TargetKind, contract.ErrorType,
	"destination.k8s.pod.uid", "destination.k8s.pod.name", "destination.k8s.namespace.name", "destination.k8s.node.name",
	contract.K8sPodUID, contract.K8sPodName, contract.K8sNamespaceName, contract.K8sNodeName, "random.key",
}

func garbageMetrics(rng *rand.Rand) pmetric.Metrics {
	md := pmetric.NewMetrics()
	names := []string{contract.MetricStatus, contract.MetricDuration, contract.MetricPacketsSent, contract.MetricPacketsLost,
		contract.MetricErrors, contract.MetricLossRatio, "other.metric"}
	for range 1 + rng.IntN(3) {
		rm := md.ResourceMetrics().AppendEmpty()
		ra := rm.Resource().Attributes()
		if rng.IntN(2) == 0 { // a valid source, so that the data points get looked at
			ra.PutStr(contract.K8sNamespaceName, "ns")
			ra.PutStr(contract.K8sPodName, "p")
			ra.PutStr(contract.K8sPodUID, "u")
		}
		for _, k := range garbageKeys {
			if rng.IntN(4) == 0 {
				garbageValue(rng, ra, k)
			}
		}
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		for range rng.IntN(8) {
			m := ms.AppendEmpty()
			m.SetName(names[rng.IntN(len(names))])
			attrs := func(a pcommon.Map) {
				if rng.IntN(2) == 0 {
					a.PutStr(contract.DestinationAddress, []string{"10.0.0.1", "10.0.0.2"}[rng.IntN(2)])
					a.PutStr(contract.ProbeType, observation.ProbeTypes[rng.IntN(observation.NumProbeTypes)])
				}
				for _, k := range garbageKeys {
					if rng.IntN(4) == 0 {
						garbageValue(rng, a, k)
					}
				}
			}
			ts := pcommon.Timestamp(rng.Uint64())
			if rng.IntN(2) == 0 {
				ts = pcommon.NewTimestampFromTime(t0.Add(time.Duration(rng.IntN(5)) * time.Second))
			}
			switch rng.IntN(5) {
			case 0:
				dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
				dp.SetTimestamp(ts)
				dp.SetDoubleValue([]float64{math.NaN(), -1, 0, 1, 0.5, 2, math.Inf(1)}[rng.IntN(7)])
				attrs(dp.Attributes())
			case 1:
				s := m.SetEmptySum()
				s.SetAggregationTemporality(pmetric.AggregationTemporality(rng.IntN(3)))
				dp := s.DataPoints().AppendEmpty()
				dp.SetTimestamp(ts)
				dp.SetStartTimestamp(pcommon.Timestamp(rng.Uint64()))
				dp.SetIntValue(rng.Int64() - rng.Int64())
				attrs(dp.Attributes())
			case 2:
				eh := m.SetEmptyExponentialHistogram()
				eh.SetAggregationTemporality(pmetric.AggregationTemporality(rng.IntN(3)))
				dp := eh.DataPoints().AppendEmpty()
				dp.SetTimestamp(ts)
				dp.SetScale(int32(rng.IntN(60)) - 30)
				dp.SetZeroCount(rng.Uint64())
				dp.Positive().SetOffset(int32(rng.Uint32()))
				for range rng.IntN(20) {
					dp.Positive().BucketCounts().Append(rng.Uint64() >> uint(rng.IntN(64)))
				}
				if rng.IntN(2) == 0 {
					dp.SetMin(rng.NormFloat64())
					dp.SetMax(rng.NormFloat64() * 1e300)
				}
				attrs(dp.Attributes())
			case 3:
				m.SetEmptySummary().DataPoints().AppendEmpty()
			default:
				m.SetEmptyHistogram().DataPoints().AppendEmpty()
			}
		}
	}
	return md
}

// Malformed input never panics and never blocks the good data points of the same batch.
func TestDecodeGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	d := NewDecoder(DecoderConfig{})
	a := newFakeAgent()
	for i := range 300 {
		md := garbageMetrics(rng)
		good := a.round(t0.Add(time.Duration(i)*time.Second),
			probe{addr: "10.9.9.9", typ: "icmp", kind: "external", success: true, rtts: []float64{1e-3}, sent: 1})
		good.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
		var r DecodeResult
		require.NotPanics(t, func() { r = d.Decode(md, t0) }, "iteration %d", i)
		o := findObs(r.Observations, "10.9.9.9", "icmp")
		require.NotNil(t, o, "iteration %d: the good point is decoded", i)
		assert.True(t, o.Success)
		for _, o := range r.Observations {
			for _, q := range []float64{0.5, 0.99} {
				v, _ := o.RTT.Quantile(q)
				assert.False(t, math.IsNaN(v) || v < 0, "iteration %d", i)
			}
		}
	}
}

// FuzzDecode: malformed pdata never panics, and never yields a NaN, negative or over-1
// figure, nor more lost than sent, in the observations or the window summaries. The seed
// corpus is in testdata/fuzz/FuzzDecode (go test runs it; go test -fuzz=FuzzDecode explores).
func FuzzDecode(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, ^seed))
		for _, cfg := range []DecoderConfig{{FirstSightMaxAge: time.Minute}, plausibleConfig()} {
			d := NewDecoder(cfg)
			s := verdict.NewSummarizer(verdict.SummaryConfig{})
			for range 3 {
				md := garbageMetrics(rng)
				for _, now := range []time.Time{t0, t0.Add(time.Second)} {
					r := d.Decode(md, now)
					checkObservations(t, r.Observations)
					s.Add(r.Observations...)
				}
			}
			for _, sum := range s.Summaries() {
				bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
				if bad(sum.LossRatio) || sum.LossRatio > 1 {
					t.Fatalf("summary loss ratio %v", sum.LossRatio)
				}
				for _, d := range []time.Duration{sum.RTT.P50, sum.RTT.P90, sum.RTT.P99, sum.RTT.Max} {
					if d < 0 {
						t.Fatalf("summary latency %v", sum.RTT)
					}
				}
			}
		}
	})
}

func checkObservations(t *testing.T, obs []observation.Observation) {
	t.Helper()
	for _, o := range obs {
		if math.IsNaN(o.LossRatio) || o.LossRatio < 0 || o.LossRatio > 1 {
			t.Fatalf("loss ratio %v", o.LossRatio)
		}
		if o.Lost > o.Sent {
			t.Fatalf("lost %d > sent %d", o.Lost, o.Sent)
		}
		for _, q := range []float64{0.5, 0.99, 1} {
			if v, ok := o.RTT.Quantile(q); ok && (math.IsNaN(v) || v < 0) {
				t.Fatalf("quantile %v = %v", q, v)
			}
		}
	}
}

// End to end: receiver-shaped metrics -> Decoder -> Summarizer -> Decide.
func TestPipelineDecodeSummarizeDecide(t *testing.T) {
	a := newFakeAgent()
	a.enrich["10.0.2.10"] = map[string]string{
		"destination.k8s.pod.name": "agent-b", "destination.k8s.pod.uid": "uid-b",
		"destination.k8s.namespace.name": "netpulse", "destination.k8s.node.name": "node-b",
	}
	d := NewDecoder(DecoderConfig{})
	s := verdict.NewSummarizer(verdict.SummaryConfig{})
	rng := rand.New(rand.NewPCG(9, 9))
	var last observation.Written
	writes := map[string]int{}
	var key observation.PairKey
	for i := range 360 { // one hour of 10 s rounds; down from minute 30 to 33
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		down := i >= 180 && i < 198
		p := probe{addr: "10.0.2.10", typ: "icmp", kind: "pod", success: !down, errType: "timeout", sent: 3}
		if down {
			p.lost = 3
		} else {
			for range 3 {
				p.rtts = append(p.rtts, 300e-6*(0.9+0.2*rng.Float64()))
			}
		}
		r := d.Decode(a.round(now, p), now)
		require.Empty(t, r.Skipped)
		require.Len(t, r.Observations, 1)
		key = observation.KeyOf(&r.Observations[0])
		s.Add(r.Observations...)
		sum, _ := s.Summary(key)
		if w, reason := plan.Decide(last, sum, now, plan.DefaultPolicy()); w {
			writes[reason]++
			last = observation.WrittenFrom(sum, now)
			if sum.Verdict == observation.VerdictUnreachable {
				assert.Equal(t, plan.ReasonVerdict, reason, "while Unreachable only the verdict and heartbeats write")
			}
		}
	}
	sum, _ := s.Summary(key)
	assert.Equal(t, observation.VerdictReachable, sum.Verdict)
	require.Len(t, sum.Outages, 1)
	assert.Equal(t, t0.Add(30*time.Minute), sum.Outages[0].Start)
	assert.Equal(t, t0.Add(33*time.Minute), sum.Outages[0].End)
	assert.Equal(t, "restored after 3m0s", sum.Outages[0].Message)
	assert.Equal(t, "Timeout", sum.Outages[0].Reason)
	assert.InEpsilon(t, 300e-6, sum.RTT.P50.Seconds(), 0.05)
	assert.LessOrEqual(t, sum.RTT.Max.Seconds(), 330e-6*1.0001)
	assert.Equal(t, uint64(90), sum.Sent)
	assert.Equal(t, 2, writes[plan.ReasonVerdict], "down and up")
	assert.Equal(t, 1, writes[plan.ReasonInitial])
	// After the outage the window's loss decays over 5 minutes: a few "loss" writes, at
	// most one per MinChangeInterval.
	t.Logf("writes: %v", writes)
	assert.LessOrEqual(t, writes[plan.ReasonLoss], 6)
	assert.Zero(t, writes[plan.ReasonLatency])
	assert.LessOrEqual(t, writes[plan.ReasonHeartbeat], 6)
	tr := s.Transitions()
	require.Len(t, tr, 1)
	assert.Equal(t, 3, tr[0].Flips, "Unknown -> Reachable -> Unreachable -> Reachable, coalesced")
	assert.Equal(t, d.Streams(), 4, "sent, lost, errors, duration")
}

// The sharded agents' heartbeat names its source and newest round, and is no observation;
// without a source it is dropped like any point.
func TestDecodeHeartbeat(t *testing.T) {
	a := newFakeAgent()
	d := NewDecoder(DecoderConfig{})
	md := a.round(t0, probe{addr: "10.0.2.10", typ: "icmp", kind: "pod", success: true, rtts: []float64{3e-4}, sent: 3})
	addRounds := func(md pmetric.Metrics, at ...time.Time) {
		m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
		m.SetName(contract.MetricRounds)
		s := m.SetEmptySum()
		for i, ts := range at {
			dp := s.DataPoints().AppendEmpty()
			dp.SetIntValue(int64(i + 1))
			dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		}
	}
	addRounds(md, t0.Add(-time.Second), t0)
	res := d.Decode(md, t0)
	require.Len(t, res.Heartbeats, 1)
	assert.Equal(t, observation.Heartbeat{Source: observation.Source{Namespace: "netpulse", Name: "agent-a", UID: "uid-a", Node: "node-a", IP: "10.0.1.10"}, At: t0}, res.Heartbeats[0])
	assert.Len(t, res.Observations, 1, "the heartbeat is no observation")

	a.res = map[string]string{}
	md = a.round(t0.Add(time.Second))
	addRounds(md, t0.Add(time.Second))
	assert.Empty(t, d.Decode(md, t0.Add(time.Second)).Heartbeats, "no source, no heartbeat")
}
