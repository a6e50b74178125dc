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
	"github.com/netpulse/netpulse/internal/kubeclient"
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
	require.True(t, cfg.Zones.Enabled, "zone localisation is on: it only removes zone-shaped failures from the node quorum and reports them")
	require.True(t, cfg.Zones.WriteObjects)
	require.Equal(t, SummaryConfig{Enabled: true, MinInterval: 30 * time.Second}, cfg.Summary)
	require.Equal(t, PairObjectsAll, cfg.PairObjects, "an object per stable pair unless the summary is asked to stand for them")
	require.True(t, cfg.writesSummary(), "a gateway with leader election writes its summary")
	require.Equal(t, FreshnessAuto, cfg.Freshness)
	require.True(t, cfg.leaseFreshness(), "beside a summary, readers take currency from the Lease: no heartbeat")
	cfg.Namespace = "netpulse"
	require.False(t, cfg.writesSummary(), "a namespace-restricted writer (all-in-one) judges no targets: no summary")
	require.False(t, cfg.leaseFreshness(), "without a summary nothing names the Lease: the heartbeat and freshUntil")
	require.NoError(t, cfg.Validate())
	cfg.Freshness = FreshnessLease
	require.ErrorContains(t, cfg.Validate(), `freshness: "lease" needs the writer's NetworkHealthSummary`)
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
	require.Equal(t, ShardConfig{Count: 4, Index: 3}, cfg.Shard)
	require.Equal(t, SummaryConfig{Enabled: true, MinInterval: time.Minute}, cfg.Summary)
	require.Equal(t, PairObjectsProblems, cfg.PairObjects)
	require.Equal(t, FreshnessLease, cfg.Freshness)
	require.True(t, cfg.leaseFreshness())
	require.Equal(t, ZonesConfig{Enabled: true, MinNodes: 3, MinFailingShare: 0.9, MinHealthyShare: 0.9, MinHold: 2 * time.Minute, Retention: time.Hour}, cfg.Zones)
	require.Equal(t, GrayConfig{Enabled: true, Window: 20 * time.Minute, SlotWidth: time.Minute,
		Loss:    GrayLossConfig{Background: 0.0005, Threshold: 0.01, Evidence: 15},
		Latency: GrayLatencyConfig{Relative: 1, Margin: 5 * time.Millisecond, Bound: 250 * time.Millisecond, Rounds: 4}}, cfg.Gray)
	g := cfg.Gray.verdict()
	require.Equal(t, 20, g.Slots)
}

// requireProblems asserts that each want begins one of the problems err reports, read with
// its whole path (a struct's path from the validation walk, then the field), and that no
// problem is reported twice.
func requireProblems(t *testing.T, err error, wants ...string) {
	t.Helper()
	require.NoError(t, kubeclient.MatchProblems(err, wants...))
}

func TestInvalidConfigNamesFields(t *testing.T) {
	requireProblems(t, confmap.Validate(loadConfig(t, "invalid")),
		"qps: 0 out of range",
		"window: 1s out of range [10s, 24h]",
		"failures_to_unreachable: 0 out of range [1, 100]",
		"max_outages: 21 out of range [1, 20]",
		"heartbeat: 1s out of range",
		"rtt_tolerance: -1 out of range",
		"loss_tolerance: 2 out of range [0, 1]",
		"target_ttl: 1s out of range",
		"workers: 0 out of range [1, 64]",
		`pair_objects: "some": want "all" or "problems"`,
		`freshness: "sometimes": want "auto", "lease" or "heartbeat"`,
		"min_probe_interval: 2m0s out of range [100ms, max_probe_interval=1m0s]",
		"max_echoes_per_round: 0 out of range [1, 100]",
		`leader_election: lease_name: "Not_Valid"`,
		`leader_election: lease_namespace: ""`,
		"leader_election: want lease_duration (5s) > renew_deadline (10s)",
		"events: per_minute: 0 out of range",
		`node_conditions: type: "Ready" is owned by the kubelet`,
		"node_conditions: quorum: 0 out of range",
		"node_conditions: max_failing_share: 0 out of range",
		"zones: min_nodes: 1 out of range [2, 100]",
		"zones: min_failing_share: 0.5 out of range (0.5, 1]",
		"zones: min_healthy_share: 1.5 out of range (0.5, 1]",
		"zones: min_hold: 2h0m0s out of range [0, 1h]",
		"zones: retention: 10s out of range [1m, 24h]",
		"shard: index: 2 out of range [0, count-1=1]",
		"summary: min_interval: 2h0m0s out of range [1s, 1h]",
		"readiness_gate: enabled: requires the alpha feature gate: run with --feature-gates=exporter.podnetworkhealth.readinessGate",
		"readiness_gate: max_flips_per_minute: 0 out of range",
		"gray: window: 10h0m0s must span 1 to 240 slots of slot_width 30s",
		"gray: loss: threshold: 0.005 must be above background (0.01)",
		"gray: latency: margin: -1ms must not be negative",
		"readiness_gate: min_reaching_nodes: 0 out of range [1, 4]",
	)
}

// The fields that have no case in testdata: each is reported under its own path.
func TestInvalidPartsNameTheirPath(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "netpulse")
	t.Setenv("POD_NAME", "gw-1")
	cfg := createDefaultConfig().(*Config)
	cfg.SuccessesToReachable = 0
	cfg.TargetQuorum = 17
	cfg.TargetRecovery = 0
	cfg.FailingPairRetention = time.Second
	cfg.MaxProbeInterval = 2 * time.Hour
	cfg.MaxStableTargetsPerSource = 0
	cfg.Namespace = "Not_A_Namespace"
	cfg.LeaderElection.Enabled = true
	cfg.LeaderElection.LeaderLabel = "not a label"
	cfg.NodeConditions = NodeConditionsConfig{Enabled: true, Type: "no spaces allowed", Quorum: 2, MaxFailingShare: 0.5, Heartbeat: time.Second, MinHold: 2 * time.Hour}
	cfg.ReadinessGate.Enabled = true
	cfg.ReadinessGate.ConditionType = "not valid!"
	cfg.ReadinessGate.FailOpenTimeout = -time.Second
	requireProblems(t, confmap.Validate(cfg),
		"successes_to_reachable: 0 out of range [1, 100]",
		"target_quorum: 17 out of range [1, 16]",
		"target_recovery: 0 out of range [1, 16]",
		"failing_pair_retention: 1s out of range [1m, 24h]",
		"max_probe_interval: 2h0m0s out of range [1s, 1h]",
		"max_stable_targets_per_source: 0 out of range [1, 4096]",
		`namespace: "Not_A_Namespace": `,
		`leader_election: leader_label: "not a label": `,
		`node_conditions: type: "no spaces allowed" is not a valid condition type: `,
		"node_conditions: heartbeat: 1s below 10s",
		"node_conditions: min_hold: 2h0m0s out of range [0, 1h]",
		`readiness_gate: condition_type: "not valid!": `,
		"readiness_gate: fail_open_timeout: -1s is negative",
	)

	// Disabled parts are not checked.
	cfg = createDefaultConfig().(*Config)
	cfg.LeaderElection = LeaderElectionConfig{LeaseName: "Not_Valid"}
	cfg.Events = EventsConfig{PerMinute: -1}
	cfg.NodeConditions = NodeConditionsConfig{Type: "Ready"}
	cfg.ReadinessGate = ReadinessGateConfig{MinReachingNodes: 9}
	require.NoError(t, confmap.Validate(cfg))
}

// With authenticated observers, no rule may let a single agent decide a target's verdict,
// a node condition or another pod's readiness.
func TestAuthenticatedObserversNeedQuorums(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "single_observer_decides"))
	requireProblems(t, err,
		"target_quorum: 1 with require_authenticated_observers: want at least 2",
		"node_conditions::quorum: 1 with require_authenticated_observers: want at least 2",
		"readiness_gate::min_reaching_nodes: 1 with require_authenticated_observers: want at least 2",
	)

	// A quorum out of range is reported once, as out of range.
	cfg := loadConfig(t, "single_observer_decides")
	cfg.TargetQuorum = 0
	cfg.NodeConditions.Quorum = 0
	cfg.ReadinessGate.MinReachingNodes = 0
	err = confmap.Validate(cfg)
	requireProblems(t, err, "target_quorum: 0 out of range [1, 16]", "node_conditions: quorum: 0 out of range [1, 100]", "readiness_gate: min_reaching_nodes: 0 out of range [1, 4]")
	require.NotContains(t, err.Error(), "with require_authenticated_observers")
}

func TestShardConfigRanges(t *testing.T) {
	require.NoError(t, ShardConfig{Count: 1}.Validate())
	require.NoError(t, ShardConfig{Count: 64, Index: 63}.Validate())
	require.EqualError(t, ShardConfig{Count: 0}.Validate(), "count: 0 out of range [1, 64]")
	require.EqualError(t, ShardConfig{Count: 65}.Validate(), "count: 65 out of range [1, 64]")
	require.EqualError(t, ShardConfig{Count: 2, Index: -1}.Validate(), "index: -1 out of range [0, count-1=1]")
	lease := leaseOf(LeaderElectionConfig{LeaseName: "netpulse-gateway"}, ShardConfig{Count: 1})
	require.Equal(t, "netpulse-gateway", lease.LeaseName, "unsharded: the Lease of one gateway")
	lease = leaseOf(LeaderElectionConfig{LeaseName: "netpulse-gateway"}, ShardConfig{Count: 3, Index: 2})
	require.Equal(t, "netpulse-gateway-2", lease.LeaseName, "each shard leads its own")
}

func TestShardLabelNamesTheCount(t *testing.T) {
	require.Equal(t, "2-of-3", ShardConfig{Count: 3, Index: 2}.label(), "a shard of another count neither resumes nor prunes it")
}

// The gray node condition (degraded_type) is checked like type, and must differ from it.
func TestDegradedTypeValidation(t *testing.T) {
	valid := NodeConditionsConfig{Enabled: true, Type: "netpulse.io/PodNetworkProblem", Quorum: 2, MaxFailingShare: 0.5, Heartbeat: time.Minute}
	require.NoError(t, valid.Validate(), "off by default")
	nc := valid
	nc.DegradedType = "netpulse.io/PodNetworkDegraded"
	require.NoError(t, nc.Validate())
	for typ, want := range map[string]string{
		"MemoryPressure":                `degraded_type: "MemoryPressure" is owned by the kubelet`,
		"not valid!":                    `degraded_type: "not valid!" is not a valid condition type: `,
		"netpulse.io/PodNetworkProblem": `degraded_type: "netpulse.io/PodNetworkProblem" is type's: the two conditions must differ`,
	} {
		nc.DegradedType = typ
		err := nc.Validate()
		require.Error(t, err, typ)
		require.Contains(t, err.Error(), want)
	}
}
