// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestDefaultConfig(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "netpulse")
	t.Setenv("POD_NAME", "gw-1")
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, confmap.Validate(cfg))
	require.Equal(t, 10*time.Minute, cfg.Heartbeat)
	require.Equal(t, float32(5), cfg.QPS)
	require.Equal(t, 10, cfg.Burst)
	require.Equal(t, "gw-1", cfg.LeaderElection.Identity)
	require.False(t, cfg.NodeConditions.Enabled, "node conditions are opt-in")
	require.False(t, cfg.ReadinessGate.Enabled, "the readiness gate is opt-in")
	require.False(t, cfg.RequireAuthenticatedObservers, "binding is opt-in until the deploy configs authenticate agents")
	require.Equal(t, 1, cfg.ReadinessGate.MinReachingNodes)
}

func TestFullConfig(t *testing.T) {
	cfg := loadConfig(t, "full")
	require.NoError(t, confmap.Validate(cfg))
	require.Equal(t, 10*time.Minute, cfg.Window)
	require.Equal(t, 5, cfg.FailuresToUnreachable)
	require.Equal(t, "pnh-writer", cfg.LeaderElection.LeaseName)
	require.Equal(t, "example.com/PodNetworkProblem", cfg.NodeConditions.Type)
	require.Equal(t, 3, cfg.NodeConditions.Quorum)
	require.True(t, cfg.RequireAuthenticatedObservers)
	require.Equal(t, 5*time.Second, cfg.MinProbeInterval)
	require.Equal(t, 5, cfg.MaxEchoesPerRound)
}

func TestInvalidConfigNamesFields(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "invalid"))
	require.Error(t, err)
	for _, want := range []string{
		"qps: 0 out of range",
		"window: 1s out of range [10s, 24h]",
		"failures_to_unreachable: 0 out of range [1, 100]",
		"max_outages: 21 out of range [1, 20]",
		"heartbeat: 1s out of range",
		"rtt_tolerance: -1 out of range",
		"loss_tolerance: 2 out of range [0, 1]",
		"target_ttl: 1s out of range",
		"workers: 0 out of range [1, 64]",
		"min_probe_interval: 2m0s out of range [100ms, max_probe_interval=1m0s]",
		"max_echoes_per_round: 0 out of range [1, 100]",
		`leader_election.lease_name: "Not_Valid"`,
		`leader_election.lease_namespace: ""`,
		"leader_election: want lease_duration (5s) > renew_deadline (10s)",
		"events.per_minute: 0 out of range",
		`node_conditions.type: "Ready" is owned by the kubelet`,
		"node_conditions.quorum: 0 out of range",
		"node_conditions.max_failing_share: 0 out of range",
		"readiness_gate.enabled: requires the alpha feature gate: run with --feature-gates=exporter.podnetworkhealth.readinessGate",
		"readiness_gate.max_flips_per_minute: 0 out of range",
		"readiness_gate.min_reaching_nodes: 0 out of range [1, 4]",
	} {
		require.ErrorContains(t, err, want)
	}
}

// With authenticated observers, no rule may let a single agent decide a node condition or
// another pod's readiness.
func TestAuthenticatedObserversNeedQuorums(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "single_observer_decides"))
	require.ErrorContains(t, err, "node_conditions.quorum: 1 with require_authenticated_observers: want at least 2")
	require.ErrorContains(t, err, "readiness_gate.min_reaching_nodes: 1 with require_authenticated_observers: want at least 2")
}
