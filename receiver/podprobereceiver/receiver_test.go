// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// point is one data point flattened for assertions.
type point struct {
	metric string
	attrs  map[string]any
	value  float64
	hist   pmetric.ExponentialHistogramDataPoint
	res    map[string]any
}

func flatten(mds []pmetric.Metrics) []point {
	var out []point
	for _, md := range mds {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			res := rm.Resource().Attributes().AsRaw()
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					switch m.Type() {
					case pmetric.MetricTypeGauge:
						for d := 0; d < m.Gauge().DataPoints().Len(); d++ {
							dp := m.Gauge().DataPoints().At(d)
							out = append(out, point{metric: m.Name(), attrs: dp.Attributes().AsRaw(), value: numberValue(dp), res: res})
						}
					case pmetric.MetricTypeSum:
						for d := 0; d < m.Sum().DataPoints().Len(); d++ {
							dp := m.Sum().DataPoints().At(d)
							out = append(out, point{metric: m.Name(), attrs: dp.Attributes().AsRaw(), value: numberValue(dp), res: res})
						}
					case pmetric.MetricTypeExponentialHistogram:
						for d := 0; d < m.ExponentialHistogram().DataPoints().Len(); d++ {
							dp := m.ExponentialHistogram().DataPoints().At(d)
							out = append(out, point{metric: m.Name(), attrs: dp.Attributes().AsRaw(), value: float64(dp.Count()), hist: dp, res: res})
						}
					}
				}
			}
		}
	}
	return out
}

func numberValue(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// last returns the newest point of metric whose attributes include want.
func last(points []point, metric string, want map[string]any) (point, bool) {
	var found point
	ok := false
	for _, p := range points {
		if p.metric != metric {
			continue
		}
		match := true
		for k, v := range want {
			if p.attrs[k] != v {
				match = false
			}
		}
		if match {
			found, ok = p, true
		}
	}
	return found, ok
}

func startDNSServer(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) }, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		rr, _ := dns.NewRR(req.Question[0].Name + " 5 IN A 192.0.2.7")
		m.Answer = append(m.Answer, rr)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// The receiver probes real sockets on loopback — an open and a closed TCP port, an HTTP
// server, a DNS server, an ICMP echo — and emits the contract's metrics and spans.
func TestReceiverProbesStaticTargets(t *testing.T) {
	open, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer open.Close()
	go func() {
		for {
			c, err := open.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	closed.Close()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(204)
	}))
	defer web.Close()
	dnsAddr := startDNSServer(t)

	cfg := createDefaultConfig().(*Config)
	cfg.Peers.Enabled = false
	cfg.AllowLoopback = true
	cfg.Interval = 300 * time.Millisecond
	cfg.Timeout = 250 * time.Millisecond
	cfg.ICMP.Count = 2
	cfg.ICMP.EchoInterval = 10 * time.Millisecond
	cfg.Spans = SpansAll
	cfg.Source = SourceConfig{PodName: "agent-a", PodUID: "uid-a", Namespace: "netpulse", NodeName: "node-a", PodIPs: "127.0.0.1"}
	cfg.Static = []StaticConfig{
		{Target: open.Addr().String()},
		{Target: closedAddr},
		{Target: web.URL + "/healthz"},
		{Target: web.URL + "/fail?x=1"}, // the same host:port: its own series (issue 11)
		{Target: "127.0.0.1"},
	}
	cfg.DNS = []DNSConfig{{Server: dnsAddr, Name: "kubernetes.default.svc.cluster.local"}}
	require.NoError(t, cfg.Validate())

	metricsSink, tracesSink := new(consumertest.MetricsSink), new(consumertest.TracesSink)
	f := NewFactory()
	set := receivertest.NewNopSettings(metadata.Type)
	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	set.TelemetrySettings = tel.NewTelemetrySettings()
	mr, err := f.CreateMetrics(context.Background(), set, cfg, metricsSink)
	require.NoError(t, err)
	tr, err := f.CreateTraces(context.Background(), set, cfg, tracesSink)
	require.NoError(t, err)
	require.Same(t, mr, tr, "metrics and traces pipelines share one receiver")
	require.NoError(t, mr.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, tr.Start(context.Background(), componenttest.NewNopHost()))
	defer func() {
		require.NoError(t, mr.Shutdown(context.Background()))
		require.NoError(t, tr.Shutdown(context.Background()))
	}()

	require.Eventually(t, func() bool { return len(metricsSink.AllMetrics()) >= 2 }, 10*time.Second, 50*time.Millisecond)
	points := flatten(metricsSink.AllMetrics())

	openHost, openPort, _ := net.SplitHostPort(open.Addr().String())
	openPortN, _ := strconv.Atoi(openPort)
	_, closedPort, _ := net.SplitHostPort(closedAddr)
	closedPortN, _ := strconv.Atoi(closedPort)

	p, ok := last(points, contract.MetricStatus, map[string]any{contract.DestinationAddress: openHost, contract.DestinationPort: int64(openPortN), contract.ProbeType: "tcp"})
	require.True(t, ok, "no status for the open port")
	require.Equal(t, 1.0, p.value)
	require.Equal(t, "external", p.attrs[contract.TargetKind])
	require.Equal(t, "ipv4", p.attrs[contract.NetworkType])
	require.Equal(t, map[string]any{
		contract.K8sPodName: "agent-a", contract.K8sPodUID: "uid-a", contract.K8sNamespaceName: "netpulse",
		contract.K8sNodeName: "node-a", contract.K8sPodIP: "127.0.0.1",
	}, p.res, "the source pod is on the Resource")

	p, ok = last(points, contract.MetricStatus, map[string]any{contract.DestinationPort: int64(closedPortN), contract.ProbeType: "tcp"})
	require.True(t, ok)
	require.Equal(t, 0.0, p.value)
	p, ok = last(points, contract.MetricErrors, map[string]any{contract.DestinationPort: int64(closedPortN), contract.ErrorType: "refused"})
	require.True(t, ok, "refused connect counted by error.type")
	require.GreaterOrEqual(t, p.value, 1.0)

	// Two URLs on one host:port are two series, told apart by netpulse.target.endpoint (the
	// query is not part of it).
	p, ok = last(points, contract.MetricStatus, map[string]any{contract.ProbeType: "http", contract.TargetEndpoint: web.URL + "/healthz"})
	require.True(t, ok)
	require.Equal(t, 1.0, p.value)
	p, ok = last(points, contract.MetricStatus, map[string]any{contract.ProbeType: "http", contract.TargetEndpoint: web.URL + "/fail"})
	require.True(t, ok, "the second URL has its own status series")
	require.Equal(t, 0.0, p.value)
	p, ok = last(points, contract.MetricErrors, map[string]any{contract.TargetEndpoint: web.URL + "/fail", contract.ErrorType: "http_status"})
	require.True(t, ok)
	require.GreaterOrEqual(t, p.value, 1.0)
	_, ok = last(points, contract.MetricErrors, map[string]any{contract.TargetEndpoint: web.URL + "/healthz"})
	require.False(t, ok, "the healthy URL has no errors of the failing one")
	h0, ok := last(points, contract.MetricDuration, map[string]any{contract.TargetEndpoint: web.URL + "/healthz"})
	require.True(t, ok)
	require.Positive(t, h0.hist.Count())
	p, ok = last(points, contract.MetricStatus, map[string]any{contract.ProbeType: "dns", contract.TargetEndpoint: "kubernetes.default.svc.cluster.local A"})
	require.True(t, ok)
	require.Equal(t, 1.0, p.value)

	p, ok = last(points, contract.MetricStatus, map[string]any{contract.DestinationAddress: "127.0.0.1", contract.ProbeType: "icmp"})
	require.True(t, ok)
	require.Equal(t, 1.0, p.value)
	_, hasPort := p.attrs[contract.DestinationPort]
	require.False(t, hasPort, "ICMP has no destination.port")
	p, _ = last(points, contract.MetricPacketsSent, map[string]any{contract.ProbeType: "icmp"})
	require.GreaterOrEqual(t, p.value, 2.0)
	p, _ = last(points, contract.MetricLossRatio, map[string]any{contract.ProbeType: "icmp"})
	require.Equal(t, 0.0, p.value)

	h, ok := last(points, contract.MetricDuration, map[string]any{contract.ProbeType: "icmp"})
	require.True(t, ok, "duration histogram for ICMP")
	require.GreaterOrEqual(t, h.hist.Count(), uint64(2))
	require.Greater(t, h.hist.Max(), 0.0)
	require.Less(t, h.hist.Max(), 0.25, "loopback RTT in seconds")
	_, ok = last(points, contract.MetricDuration, map[string]any{contract.DestinationPort: int64(closedPortN)})
	require.True(t, ok, "a failing target still has a (possibly empty) histogram series")

	require.Eventually(t, func() bool { return tracesSink.SpanCount() > 0 }, 5*time.Second, 50*time.Millisecond)
	var sawFailed, sawPhase bool
	for _, td := range tracesSink.AllTraces() {
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for i := 0; i < spans.Len(); i++ {
			s := spans.At(i)
			if s.Status().Code() == ptrace.StatusCodeError {
				et, _ := s.Attributes().Get(contract.ErrorType)
				require.Contains(t, []string{"refused", "http_status"}, et.Str())
				sawFailed = sawFailed || et.Str() == "refused"
			}
			if !s.ParentSpanID().IsEmpty() && s.Name() == "connect" {
				sawPhase = true
			}
		}
	}
	require.True(t, sawFailed, "a span for the refused probe")
	require.True(t, sawPhase, "child spans per phase")

	// Self-telemetry: rounds, probes by type and outcome, the plan, the ICMP engine.
	sums := func(name string, keys ...string) map[string]int64 {
		m, err := tel.GetMetric(name)
		require.NoError(t, err, name)
		out := map[string]int64{}
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			var k []string
			for _, key := range keys {
				v, _ := dp.Attributes.Value(attribute.Key(key))
				k = append(k, v.AsString())
			}
			out[strings.Join(k, "/")] += dp.Value
		}
		return out
	}
	require.GreaterOrEqual(t, sums("otelcol_pod_probe_rounds", "outcome")["run"], int64(2))
	probes := sums("otelcol_pod_probe_probes", "netpulse.probe.type", "outcome")
	require.GreaterOrEqual(t, probes["tcp/success"], int64(1), "%v", probes)
	require.GreaterOrEqual(t, probes["tcp/failure"], int64(1), "the refused port: %v", probes)
	require.GreaterOrEqual(t, probes["icmp/success"], int64(1), "%v", probes)
	require.GreaterOrEqual(t, probes["http/success"], int64(1), "/healthz: %v", probes)
	require.GreaterOrEqual(t, probes["http/failure"], int64(1), "/fail: %v", probes)
	require.Zero(t, probes["dns/failure"], "%v", probes)
	require.GreaterOrEqual(t, sums("otelcol_pod_probe_icmp_echoes", "outcome")["replied"], int64(2))
	m, err := tel.GetMetric("otelcol_pod_probe_planned_targets")
	require.NoError(t, err)
	require.Equal(t, int64(6), m.Data.(metricdata.Gauge[int64]).DataPoints[0].Value, "5 static targets and 1 DNS target")
	m, err = tel.GetMetric("otelcol_pod_probe_round_duration")
	require.NoError(t, err)
	require.GreaterOrEqual(t, m.Data.(metricdata.Histogram[float64]).DataPoints[0].Count, uint64(2))
}

func TestEmitterCumulativeSeries(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	set := receivertest.NewNopSettings(metadata.Type)
	e := newEmitter(metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set), pcommon.NewResource(), time.Minute)
	tgt := target{addr: mustAddr("10.0.0.7"), probe: "icmp", kind: kindPod, stable: true}
	t0 := time.Unix(1000, 0)
	first := e.emit(t0, []observation{{target: tgt, success: true, sent: 3, lost: 1, durations: []time.Duration{time.Millisecond, 2 * time.Millisecond}}})
	md := e.emit(t0.Add(time.Second), []observation{{target: tgt, success: false, errorType: "timeout", sent: 3, lost: 3}})
	points := flatten([]pmetric.Metrics{md})
	p, _ := last(points, contract.MetricPacketsSent, nil)
	require.Equal(t, 6.0, p.value, "cumulative")
	p, _ = last(points, contract.MetricPacketsLost, nil)
	require.Equal(t, 4.0, p.value)
	p, _ = last(points, contract.MetricLossRatio, nil)
	require.Equal(t, 1.0, p.value, "loss of the last round")
	p, ok := last(flatten([]pmetric.Metrics{first}), contract.MetricJitter, nil)
	require.True(t, ok, "jitter of a round with two replies")
	require.InDelta(t, 0.001, p.value, 1e-12, "|2ms - 1ms|")
	_, ok = last(points, contract.MetricJitter, nil)
	require.False(t, ok, "no jitter without two replies")
	h, _ := last(points, contract.MetricDuration, nil)
	require.Equal(t, uint64(2), h.hist.Count(), "failed rounds add no durations")
	require.InDelta(t, 0.003, h.hist.Sum(), 1e-9)
	require.Equal(t, pcommon.NewTimestampFromTime(t0), h.hist.StartTimestamp())
	stable, _ := h.attrs[contract.PairStable]
	require.Equal(t, true, stable, "a stable pair's points say so")
	// A series unseen for longer than the TTL is forgotten.
	e.emit(t0.Add(2*time.Minute), nil)
	require.Empty(t, e.series)
}

// A rotating pair's series starts anew every time it is probed: its StartTimestamp is the
// probe's start, its values that round's alone, and it carries no netpulse.pair.stable.
func TestEmitterRotatingSeriesStartAnew(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	set := receivertest.NewNopSettings(metadata.Type)
	e := newEmitter(metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set), pcommon.NewResource(), time.Hour)
	tgt := target{addr: mustAddr("10.0.0.8"), probe: "icmp", kind: kindPod}
	t0 := time.Unix(1000, 0)
	for _, round := range []time.Duration{0, time.Second, 5 * time.Second} {
		start := t0.Add(round)
		md := e.emit(start.Add(300*time.Millisecond), []observation{{target: tgt, start: start, success: true, sent: 3, lost: 1, durations: []time.Duration{time.Millisecond}}})
		points := flatten([]pmetric.Metrics{md})
		p, ok := last(points, contract.MetricPacketsSent, nil)
		require.True(t, ok)
		require.Equal(t, 3.0, p.value, "this round's echoes only")
		_, marked := p.attrs[contract.PairStable]
		require.False(t, marked, "rotating pairs carry no netpulse.pair.stable")
		h, _ := last(points, contract.MetricDuration, nil)
		require.Equal(t, uint64(1), h.hist.Count())
		require.Equal(t, pcommon.NewTimestampFromTime(start), h.hist.StartTimestamp(), "starts at the probe's start")
		require.Empty(t, e.series, "nothing kept for a rotating pair")
	}
}

func TestObserversRendezvous(t *testing.T) {
	agents := []string{}
	for i := range 20 {
		agents = append(agents, fmt.Sprintf("agent-%02d", i))
	}
	counts := map[string]int{}
	for round := uint64(0); round < 200; round++ {
		obs := Observers(agents, "target-uid", round, 3)
		require.Len(t, obs, 3)
		again := Observers([]string{agents[5], agents[0], agents[19], agents[3], agents[7], agents[1], agents[2], agents[4], agents[6], agents[8], agents[9], agents[10], agents[11], agents[12], agents[13], agents[14], agents[15], agents[16], agents[17], agents[18]}, "target-uid", round, 3)
		require.ElementsMatch(t, obs, again, "independent of membership order")
		for _, o := range obs {
			counts[o]++
		}
	}
	require.Len(t, counts, 20, "observers rotate over every agent")
	require.Len(t, Observers(agents[:2], "t", 1, 3), 2)
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
