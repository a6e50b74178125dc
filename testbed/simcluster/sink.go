// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"net"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // the otlp exporter compresses with gzip by default

	"github.com/netpulse/netpulse/internal/contract"
)

// OTLPSink is an OTLP/gRPC metrics server that records what pod_probe agents report, per
// probe series and round. It stands in for the gateway while the gateway's components are
// not in the distribution, and lets tests read the agents' raw telemetry.
type OTLPSink struct {
	lis net.Listener
	srv *grpc.Server

	mu         sync.Mutex
	series     map[SeriesKey]*Series
	exports    int
	lastExport time.Time
	maxRounds  int
}

// SeriesKey identifies a probe series: one source pod probing one address with one probe.
type SeriesKey struct {
	SourceUID   string
	Destination string // destination.address
	Port        int64  // destination.port, 0 for ICMP
	Probe       string // netpulse.probe.type
}

// Source is the probing pod, from the Resource.
type Source struct {
	PodName, PodUID, PodIP, Namespace, NodeName string
}

// Round is everything one source reported about one series at one timestamp (one probe
// round; the metrics of a round share its timestamp).
type Round struct {
	Time     time.Time // the data points' timestamp (set by the agent)
	Received time.Time // when the sink got it
	// Status is netpulse.probe.status (1/0), -1 when the round carried none.
	Status int64
	// LossRatio is netpulse.probe.loss.ratio, -1 when absent.
	LossRatio float64
	// Sent and Lost are the cumulative netpulse.probe.packets.sent/.lost (-1 when absent).
	Sent, Lost int64
	// Errors are the cumulative netpulse.probe.errors by error.type.
	Errors map[string]int64
	// RTTCount and RTTSum are the cumulative count and sum (seconds) of the
	// netpulse.probe.duration histogram; HasRTT says whether the round carried it.
	RTTCount uint64
	RTTSum   float64
	HasRTT   bool
}

// Series is the history of one probe series.
type Series struct {
	Key         SeriesKey
	Source      Source
	NetworkType string
	TargetKind  string
	Rounds      []Round // by Time
}

// StartOTLPSink listens on addr (e.g. "198.18.0.1:0") and serves OTLP/gRPC metrics.
func StartOTLPSink(addr string) (*OTLPSink, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &OTLPSink{lis: lis, srv: grpc.NewServer(), series: map[SeriesKey]*Series{}, maxRounds: 3600}
	pmetricotlp.RegisterGRPCServer(s.srv, &sinkServer{s: s})
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

// Endpoint is the host:port agents send to.
func (s *OTLPSink) Endpoint() string { return s.lis.Addr().String() }

// Stop stops the server (in-flight exports are cut off).
func (s *OTLPSink) Stop() { s.srv.Stop() }

// Stats returns the number of export requests and the time of the last one.
func (s *OTLPSink) Stats() (exports int, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exports, s.lastExport
}

// Series returns a copy of every series, sorted by key.
func (s *OTLPSink) Series() []Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Series, 0, len(s.series))
	for _, x := range s.series {
		out = append(out, x.clone())
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Key, out[j].Key
		if a.SourceUID != b.SourceUID {
			return a.SourceUID < b.SourceUID
		}
		if a.Destination != b.Destination {
			return a.Destination < b.Destination
		}
		if a.Probe != b.Probe {
			return a.Probe < b.Probe
		}
		return a.Port < b.Port
	})
	return out
}

// Get returns a copy of one series.
func (s *OTLPSink) Get(key SeriesKey) (Series, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.series[key]
	if !ok {
		return Series{}, false
	}
	return x.clone(), true
}

func (x *Series) clone() Series {
	c := *x
	c.Rounds = make([]Round, len(x.Rounds))
	for i, r := range x.Rounds {
		c.Rounds[i] = r
		if r.Errors != nil {
			c.Rounds[i].Errors = make(map[string]int64, len(r.Errors))
			for k, v := range r.Errors {
				c.Rounds[i].Errors[k] = v
			}
		}
	}
	return c
}

// Since returns the rounds with Time after t.
func (x Series) Since(t time.Time) []Round {
	i := sort.Search(len(x.Rounds), func(i int) bool { return x.Rounds[i].Time.After(t) })
	return x.Rounds[i:]
}

// Before returns the last round at or before t, if any.
func (x Series) Before(t time.Time) (Round, bool) {
	i := sort.Search(len(x.Rounds), func(i int) bool { return x.Rounds[i].Time.After(t) })
	if i == 0 {
		return Round{}, false
	}
	return x.Rounds[i-1], true
}

type sinkServer struct {
	pmetricotlp.UnimplementedGRPCServer
	s *OTLPSink
}

func (ss *sinkServer) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	ss.s.record(req.Metrics())
	return pmetricotlp.NewExportResponse(), nil
}

func (s *OTLPSink) record(md pmetric.Metrics) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exports++
	s.lastExport = now
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		src := sourceOf(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				s.recordMetric(now, src, ms.At(k))
			}
		}
	}
}

func sourceOf(attrs pcommon.Map) Source {
	get := func(k string) string {
		if v, ok := attrs.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	return Source{
		PodName: get(contract.K8sPodName), PodUID: get(contract.K8sPodUID), PodIP: get(contract.K8sPodIP),
		Namespace: get(contract.K8sNamespaceName), NodeName: get(contract.K8sNodeName),
	}
}

func (s *OTLPSink) recordMetric(now time.Time, src Source, m pmetric.Metric) {
	switch m.Name() {
	case contract.MetricStatus:
		dps := m.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			s.round(now, src, dp.Attributes(), dp.Timestamp()).Status = dp.IntValue()
		}
	case contract.MetricLossRatio:
		dps := m.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			s.round(now, src, dp.Attributes(), dp.Timestamp()).LossRatio = dp.DoubleValue()
		}
	case contract.MetricPacketsSent, contract.MetricPacketsLost:
		dps := m.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			r := s.round(now, src, dp.Attributes(), dp.Timestamp())
			if m.Name() == contract.MetricPacketsSent {
				r.Sent = dp.IntValue()
			} else {
				r.Lost = dp.IntValue()
			}
		}
	case contract.MetricErrors:
		dps := m.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			r := s.round(now, src, dp.Attributes(), dp.Timestamp())
			et := ""
			if v, ok := dp.Attributes().Get(contract.ErrorType); ok {
				et = v.AsString()
			}
			if r.Errors == nil {
				r.Errors = map[string]int64{}
			}
			r.Errors[et] = dp.IntValue()
		}
	case contract.MetricDuration:
		if m.Type() != pmetric.MetricTypeExponentialHistogram {
			return
		}
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			r := s.round(now, src, dp.Attributes(), dp.Timestamp())
			r.RTTCount, r.RTTSum, r.HasRTT = dp.Count(), dp.Sum(), true
		}
	}
}

// round finds or creates the round of the series named by attrs at ts.
func (s *OTLPSink) round(now time.Time, src Source, attrs pcommon.Map, ts pcommon.Timestamp) *Round {
	key := SeriesKey{SourceUID: src.PodUID}
	var nt, kind string
	if v, ok := attrs.Get(contract.DestinationAddress); ok {
		key.Destination = v.AsString()
	}
	if v, ok := attrs.Get(contract.DestinationPort); ok {
		key.Port = v.Int()
	}
	if v, ok := attrs.Get(contract.ProbeType); ok {
		key.Probe = v.AsString()
	}
	if v, ok := attrs.Get(contract.NetworkType); ok {
		nt = v.AsString()
	}
	if v, ok := attrs.Get(contract.TargetKind); ok {
		kind = v.AsString()
	}
	x := s.series[key]
	if x == nil {
		x = &Series{Key: key, Source: src, NetworkType: nt, TargetKind: kind}
		s.series[key] = x
	}
	t := ts.AsTime()
	// Rounds arrive in order; search from the end.
	i := len(x.Rounds)
	for i > 0 && x.Rounds[i-1].Time.After(t) {
		i--
	}
	if i > 0 && x.Rounds[i-1].Time.Equal(t) {
		return &x.Rounds[i-1]
	}
	x.Rounds = append(x.Rounds, Round{})
	copy(x.Rounds[i+1:], x.Rounds[i:])
	x.Rounds[i] = Round{Time: t, Received: now, Status: -1, LossRatio: -1, Sent: -1, Lost: -1}
	if drop := len(x.Rounds) - s.maxRounds; drop > 0 {
		x.Rounds = append([]Round(nil), x.Rounds[drop:]...)
		if i -= drop; i < 0 {
			return &Round{} // older than what is kept: discard
		}
	}
	return &x.Rounds[i]
}
