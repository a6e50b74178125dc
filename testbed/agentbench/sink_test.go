// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package agentbench

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // the otlp_grpc exporter compresses with gzip by default

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/pdatautil"
)

// sink is the gateway as far as the agents are concerned: an OTLP/gRPC server over TLS
// that accepts everything and remembers, per reporting pod (k8s.pod.name on the
// Resource), how many requests and data points it sent and which targets it probed with
// which outcome.
type sink struct {
	srv *grpc.Server
	lis net.Listener

	mu   sync.Mutex
	pods map[string]*podReport

	logRecords atomic.Int64
}

type podReport struct {
	requests, points int64
	// targets: destination.address -> the last netpulse.probe.status seen.
	targets map[string]int64
}

type metricsService struct {
	pmetricotlp.UnimplementedGRPCServer
	s *sink
}

type logsService struct {
	plogotlp.UnimplementedGRPCServer
	s *sink
}

func startSink(addr, certFile, keyFile string) (*sink, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &sink{lis: lis, pods: map[string]*podReport{}}
	s.srv = grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	pmetricotlp.RegisterGRPCServer(s.srv, &metricsService{s: s})
	plogotlp.RegisterGRPCServer(s.srv, &logsService{s: s})
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

func (s *sink) stop() { s.srv.Stop() }

func (m *metricsService) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	md := req.Metrics()
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	for i := range md.ResourceMetrics().Len() {
		rm := md.ResourceMetrics().At(i)
		pod := "(none)"
		if v, ok := rm.Resource().Attributes().Get(contract.K8sPodName); ok {
			pod = v.Str()
		}
		r := m.s.pods[pod]
		if r == nil {
			r = &podReport{targets: map[string]int64{}}
			m.s.pods[pod] = r
		}
		r.requests++
		for j := range rm.ScopeMetrics().Len() {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := range ms.Len() {
				mt := ms.At(k)
				r.points += int64(pdatautil.DataPointCount(mt))
				if mt.Name() != contract.MetricStatus || mt.Type() != pmetric.MetricTypeGauge {
					continue
				}
				dps := mt.Gauge().DataPoints()
				for d := range dps.Len() {
					dp := dps.At(d)
					if v, ok := dp.Attributes().Get(contract.DestinationAddress); ok {
						r.targets[v.Str()] = dp.IntValue()
					}
				}
			}
		}
	}
	return pmetricotlp.NewExportResponse(), nil
}

func (l *logsService) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	l.s.logRecords.Add(int64(req.Logs().LogRecordCount()))
	return plogotlp.NewExportResponse(), nil
}

// report is a copy of what pod has sent so far.
func (s *sink) report(pod string) podReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.pods[pod]
	if r == nil {
		return podReport{targets: map[string]int64{}}
	}
	out := podReport{requests: r.requests, points: r.points, targets: map[string]int64{}}
	for k, v := range r.targets {
		out.targets[k] = v
	}
	return out
}
