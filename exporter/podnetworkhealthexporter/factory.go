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

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/internal/kubeclient"
)

// NewFactory creates the pod_network_health exporter factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithMetrics(createMetrics, metadata.MetricsStability))
}

func createDefaultConfig() component.Config {
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		identity, _ = os.Hostname()
	}
	return &Config{
		Config:                kubeclient.DefaultConfig(),
		Window:                5 * time.Minute,
		FailuresToUnreachable: 3,
		SuccessesToReachable:  2,
		MaxOutages:            20,
		Heartbeat:             10 * time.Minute,
		RTTTolerance:          0.2,
		LossTolerance:         0.05,
		TargetTTL:             10 * time.Minute,
		TargetQuorum:          3,
		TargetRecovery:        2,
		FailingPairRetention:  30 * time.Minute,
		MaxProbeInterval:      time.Minute,
		MinProbeInterval:      time.Second,
		MaxEchoesPerRound:     10,
		Workers:               2,
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
		ReadinessGate:  ReadinessGateConfig{ConditionType: "netpulse.io/network-ready", MaxFlipsPerMinute: 60, MinReachingNodes: 1},
	}
}

func createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	e, err := newExporter(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewMetrics(ctx, set, cfg, e.consume,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	)
}
