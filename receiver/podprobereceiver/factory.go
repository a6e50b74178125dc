// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"context"
	"os"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/sharedcomponent"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// Downward-API environment variables the default configuration reads the source pod from.
const (
	EnvPodName   = "POD_NAME"
	EnvPodUID    = "POD_UID"
	EnvNamespace = "POD_NAMESPACE"
	EnvNodeName  = "NODE_NAME"
	EnvPodIPs    = "POD_IPS"
	EnvPodIP     = "POD_IP"
)

// DefaultPeerSelector is the label the deploy/ agent DaemonSet puts on its pods.
const DefaultPeerSelector = "app.kubernetes.io/name=netpulse-agent"

// NewFactory creates the pod_probe receiver factory.
func NewFactory() receiver.Factory {
	f := &factory{receivers: sharedcomponent.NewMap[*Config, *podProbeReceiver]()}
	return receiver.NewFactory(metadata.Type, createDefaultConfig,
		receiver.WithMetrics(f.createMetrics, metadata.MetricsStability),
		receiver.WithTraces(f.createTraces, metadata.TracesStability),
		receiver.WithLogs(f.createLogs, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	podIPs := os.Getenv(EnvPodIPs)
	if podIPs == "" {
		podIPs = os.Getenv(EnvPodIP)
	}
	return &Config{
		Config:          kubeclient.DefaultConfig(),
		Interval:        10 * time.Second,
		Timeout:         2 * time.Second,
		K:               3,
		StablePeers:     1,
		ProbeBudget:     1000,
		Shards:          1,
		AddressFamilies: slices.Clone(contract.NetworkTypes[:]),
		MaxConcurrency:  64,
		ICMP: ICMPConfig{
			Mode:          ICMPAuto,
			Count:         3,
			EchoInterval:  100 * time.Millisecond,
			ReceiveBuffer: 4 << 20,
			PathMTU:       PathMTUConfig{Every: defaultPathMTUEvery, SmallSize: defaultPathMTUSmallSize, Count: defaultPathMTUCount},
		},
		Peers: PeersConfig{
			Enabled:          true,
			LabelSelector:    DefaultPeerSelector,
			ReadyGracePeriod: 10 * time.Second,
			ZoneFromNodes:    true,
			Probes:           []string{contract.ProbeTypeICMP},
			HTTP:             HTTPProbeConfig{Scheme: "http", Path: "/"},
		},
		Spans: SpansOff,
		Source: SourceConfig{
			PodName:   os.Getenv(EnvPodName),
			PodUID:    os.Getenv(EnvPodUID),
			Namespace: os.Getenv(EnvNamespace),
			NodeName:  os.Getenv(EnvNodeName),
			PodIPs:    podIPs,
		},
		Checks:               ChecksConfig{Vantage: "agent", MaxChecks: 100},
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
	}
}

// factory shares one receiver between the metrics, traces and logs pipelines that use the
// same configuration, so probes run once and feed all of them.
type factory struct {
	receivers *sharedcomponent.Map[*Config, *podProbeReceiver]
}

func (f *factory) get(set receiver.Settings, cfg *Config) *sharedcomponent.Component[*podProbeReceiver] {
	r, _ := f.receivers.LoadOrStore(cfg, func() (*podProbeReceiver, error) { return newReceiver(set, cfg), nil })
	return r
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	r := f.get(set, cfg.(*Config))
	r.Unwrap().metricsConsumer = next
	return r, nil
}

func (f *factory) createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	r := f.get(set, cfg.(*Config))
	r.Unwrap().tracesConsumer = next
	return r, nil
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	r := f.get(set, cfg.(*Config))
	r.Unwrap().logsConsumer = next
	return r, nil
}
