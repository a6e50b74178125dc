// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"

	"github.com/netpulse/netpulse/internal/k8sindex"
)

// StaticIndexProcessor is the processor's metrics path (binding and admission, exactly as
// shipped) over an index its caller fills, with no API server: the exporter's scale
// simulation drives the gateway's intake through it at cluster sizes no test can host.
// The admission's clock is time.Now (a simulation moves it with testing/synctest).
type StaticIndexProcessor struct{ p *netAttributesProcessor }

// NewStaticIndexProcessor validates cfg and starts the processor over ix.
func NewStaticIndexProcessor(set processor.Settings, cfg *Config, ix *k8sindex.Index) (*StaticIndexProcessor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p, err := newProcessor(set, cfg)
	if err != nil {
		return nil, err
	}
	p.acquire = func() (*k8sindex.Handle, error) { return k8sindex.StaticHandle(ix), nil }
	// start does not use the host.
	if err := p.start(context.Background(), nil); err != nil {
		return nil, err
	}
	return &StaticIndexProcessor{p: p}, nil
}

// DefaultGatewayConfig is the processor's default configuration with the admission on and
// the shipped gateway's limits (deploy/agent-gateway/config/gateway.yaml) except
// require_authenticated_source, which needs the receiver's authenticated client.
func DefaultGatewayConfig() *Config {
	cfg := createDefaultConfig()
	cfg.Admission.Enabled = true
	return cfg
}

// ProcessMetrics binds and admits one batch in place (as the pipeline hands it on).
func (s *StaticIndexProcessor) ProcessMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	return s.p.processMetrics(ctx, md)
}

// AdmissionSources is the number of sources the admission table holds.
func (s *StaticIndexProcessor) AdmissionSources() int {
	if s.p.admitter == nil {
		return 0
	}
	return s.p.admitter.table.Stats().Sources
}

// Shutdown releases the index handle.
func (s *StaticIndexProcessor) Shutdown(ctx context.Context) error { return s.p.stop(ctx) }
