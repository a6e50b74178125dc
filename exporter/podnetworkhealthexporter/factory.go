// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"os"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/decode"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/sharedcomponent"
)

// NewFactory creates the pod_network_health exporter factory.
func NewFactory() exporter.Factory {
	f := &factory{exporters: sharedcomponent.NewMap[*Config, sharedExporter]()}
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithMetrics(f.createMetrics, metadata.MetricsStability),
		exporter.WithLogs(f.createLogs, metadata.LogsStability))
}

// factory shares one exporter (one writer, one Lease, one budget) between the metrics
// pipeline (probe observations) and the logs pipeline (declared checks' results) that use
// the same configuration; it stops when the last of them shuts down.
type factory struct {
	exporters *sharedcomponent.Map[*Config, sharedExporter]
}

// sharedExporter gives pnhExporter's start and shutdown the component.Component shape
// sharedcomponent shares.
type sharedExporter struct{ e *pnhExporter }

func (s sharedExporter) Start(ctx context.Context, host component.Host) error {
	return s.e.start(ctx, host)
}

func (s sharedExporter) Shutdown(ctx context.Context) error { return s.e.shutdown(ctx) }

func (f *factory) get(cfg *Config, set exporter.Settings) (*sharedcomponent.Component[sharedExporter], error) {
	return f.exporters.LoadOrStore(cfg, func() (sharedExporter, error) {
		e, err := newExporter(cfg, set)
		return sharedExporter{e: e}, err
	})
}

func createDefaultConfig() component.Config {
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		identity, _ = os.Hostname()
	}
	return &Config{
		Config:                    kubeclient.DefaultConfig(),
		Window:                    5 * time.Minute,
		FailuresToUnreachable:     3,
		SuccessesToReachable:      2,
		MaxOutages:                20,
		FlapWindow:                time.Minute,
		Heartbeat:                 10 * time.Minute,
		RTTTolerance:              0.2,
		LossTolerance:             0.02,
		TargetTTL:                 10 * time.Minute,
		TargetQuorum:              3,
		TargetRecovery:            2,
		FailingPairRetention:      30 * time.Minute,
		PairObjects:               PairObjectsAll,
		Freshness:                 FreshnessAuto,
		MaxProbeInterval:          time.Minute,
		MinProbeInterval:          time.Second,
		MaxEchoesPerRound:         10,
		MaxStableTargetsPerSource: decode.DefaultStableTargetsPerSource,
		Workers:                   2,
		LeaderElection: LeaderElectionConfig{
			Enabled:        true,
			LeaseName:      "netpulse-pod-network-health",
			LeaseNamespace: os.Getenv("POD_NAMESPACE"),
			Identity:       identity,
			LeaseDuration:  15 * time.Second,
			RenewDeadline:  10 * time.Second,
			RetryPeriod:    2 * time.Second,
		},
		Events:         EventsConfig{Enabled: true, PerMinute: 30},
		NodeConditions: NodeConditionsConfig{Type: "netpulse.io/PodNetworkProblem", Quorum: 2, MaxFailingShare: 0.2, Heartbeat: 10 * time.Minute, MinHold: time.Minute},
		Zones: ZonesConfig{Enabled: true, WriteObjects: true, MinNodes: zones.DefaultMinNodes, MinFailingShare: zones.DefaultMinFailingShare,
			MinHealthyShare: zones.DefaultMinHealthyShare, MinHold: plan.DefaultZoneMinHold, Retention: plan.DefaultZoneRetention},
		ReadinessGate: ReadinessGateConfig{ConditionType: "netpulse.io/network-ready", MaxFlipsPerMinute: 60, MinReachingNodes: 1, FailOpenTimeout: DefaultFailOpenTimeout},
		Shard:         ShardConfig{Count: 1},
		Summary:       SummaryConfig{Enabled: true, MinInterval: 30 * time.Second},
		Gray: GrayConfig{Enabled: true, Window: 30 * time.Minute, SlotWidth: 30 * time.Second,
			Loss:    GrayLossConfig{Background: gray.DefaultBackground, Threshold: gray.DefaultThreshold, Evidence: gray.DefaultEvidence},
			Latency: GrayLatencyConfig{Relative: gray.DefaultRelative, Margin: gray.DefaultMargin, Rounds: gray.DefaultLatencyRounds}},
		Checks: ChecksConfig{
			Heartbeat: 10 * time.Minute, PruneAfter: 48 * time.Hour, MaxChecks: 10000,
			MaxChecksPerNamespace: defaultMaxChecksPerNamespace, WriteShare: apply.DefaultCheckShare, EventsPerMinute: 30,
			ExplainNetworkPolicy: true,
		},
	}
}

func (f *factory) createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	c := cfg.(*Config)
	s, err := f.get(c, set)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewMetrics(ctx, set, cfg, s.Unwrap().e.consume,
		exporterhelper.WithStart(s.Start),
		exporterhelper.WithShutdown(s.Shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	)
}

// createLogs: the logs pipeline carries declared checks' results (checks.enabled).
func (f *factory) createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	c := cfg.(*Config)
	s, err := f.get(c, set)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewLogs(ctx, set, cfg, s.Unwrap().e.consumeLogs,
		exporterhelper.WithStart(s.Start),
		exporterhelper.WithShutdown(s.Shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	)
}
