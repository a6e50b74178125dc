// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/relay"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/shard"
)

// Config of the pod_network_health exporter.
type Config struct {
	kubeclient.Config `mapstructure:",squash"`

	// No sending queue or retry: consuming only updates in-memory summaries, which cannot
	// fail transiently; API writes are queued, coalesced and retried by the writer itself.

	// Window is how far back the status figures (quantiles, loss, observers) look.
	Window time.Duration `mapstructure:"window"`
	// FailuresToUnreachable consecutive failed rounds turn a pair Unreachable;
	// SuccessesToReachable consecutive successful rounds bring it back.
	FailuresToUnreachable int `mapstructure:"failures_to_unreachable"`
	SuccessesToReachable  int `mapstructure:"successes_to_reachable"`
	// MaxOutages kept per object, newest first.
	MaxOutages int `mapstructure:"max_outages"`
	// FlapWindow (default 1m; 0: off): a pair that fails again within this of recovering
	// reopens its outage (counting a flap) instead of starting a new one, with one
	// ConnectivityFlapping Event, and the outage ends only once the pair has answered for
	// the window without a break. On by default: a link flapping 10 s down, 10 s up for 3
	// minutes otherwise gives each of its pairs 9 outages and 18 Events.
	FlapWindow time.Duration `mapstructure:"flap_window"`

	// Heartbeat rewrites an unchanged status this often, so staleness is visible (freshness:
	// heartbeat only).
	Heartbeat time.Duration `mapstructure:"heartbeat"`
	// Freshness: how a reader tells a current pair status from a stale one. "lease": an
	// unchanged status is never rewritten and carries no freshUntil; it is current while the
	// writer's Lease (named by its NetworkHealthSummary) is renewed, and everything the
	// writer stops observing is marked (ObserverSilent) or deleted (target_ttl), so a
	// healthy pair is written once. "heartbeat": rewritten every heartbeat, freshUntil
	// twice that. "auto" (default): lease when the writer keeps a summary (summary and
	// leader_election enabled, no namespace), heartbeat otherwise.
	Freshness string `mapstructure:"freshness"`
	// RTTTolerance (relative) and LossTolerance (absolute) bound how far latency and loss
	// may move before the status is rewritten ahead of the heartbeat.
	RTTTolerance  float64 `mapstructure:"rtt_tolerance"`
	LossTolerance float64 `mapstructure:"loss_tolerance"`
	// TargetTTL: targets, and stable pairs, not observed this long are forgotten and their
	// objects deleted (the target went away, or the pair stopped being a stable pair).
	TargetTTL time.Duration `mapstructure:"target_ttl"`
	// TargetQuorum distinct observer nodes must fail to reach a target, with no success
	// after them, for the target to be judged Unreachable (fewer when it has fewer
	// observers); TargetRecovery distinct observer nodes must reach it again.
	TargetQuorum   int `mapstructure:"target_quorum"`
	TargetRecovery int `mapstructure:"target_recovery"`
	// FailingPairRetention keeps the object of a rotating pair that failed this long after
	// its last failure, so its outage stays readable.
	FailingPairRetention time.Duration `mapstructure:"failing_pair_retention"`
	// PairObjects: which pairs get PodNetworkHealth objects. "all" (default): every stable
	// pair, and rotating pairs while failing. "problems": stable pairs too only while they
	// are Unreachable or Degraded, deleted failing_pair_retention after their last problem;
	// the writer's NetworkHealthSummary stands for the healthy ones, so a cold start writes
	// the problems and the summary instead of an object per pair (docs/sharding.md).
	PairObjects string `mapstructure:"pair_objects"`
	// MaxProbeInterval is the longest probe interval of the agents (after the planner
	// stretched it to the probe budget): a cumulative point first seen with a longer history
	// only sets a baseline, and cumulative streams idle for 3x this are forgotten.
	MaxProbeInterval time.Duration `mapstructure:"max_probe_interval"`
	// MinProbeInterval is the shortest probe interval of the agents, and MaxEchoesPerRound
	// the largest icmp.count: a cumulative increment larger than a stream could have made
	// since its previous point (two rounds per MinProbeInterval, at most four saved up, each
	// of MaxEchoesPerRound echoes, replies or errors) is discarded and counted
	// (implausible_increment), so that no single point, forged or replayed, outweighs the
	// real rounds of the window. Points dated more than summary.FutureSkew(MinProbeInterval)
	// (2 x MinProbeInterval, at least 1s, at most 2s) after their arrival are refused
	// (future_timestamp).
	MinProbeInterval  time.Duration `mapstructure:"min_probe_interval"`
	MaxEchoesPerRound int           `mapstructure:"max_echoes_per_round"`
	// MaxStableTargetsPerSource is k8s_net_attributes' max_stable_targets_per_source on the
	// same gateway (default 16, as there): the cumulative streams remembered per source
	// are derived from it (sent, lost, duration and one errors stream per error type, per
	// target: 176 at 16). Raise both together; a point beyond the streams is refused and
	// counted (datapoints_skipped{reason="stream_limit"}) and logged.
	MaxStableTargetsPerSource int `mapstructure:"max_stable_targets_per_source"`
	// Workers write objects in parallel (the client's qps/burst bound the rate).
	Workers int `mapstructure:"workers"`
	// Namespace restricts the objects this exporter watches and writes to one namespace
	// (all-in-one mode: each agent writes its own pod's objects with a namespaced Role).
	// Empty: all namespaces (the gateway).
	Namespace string `mapstructure:"namespace"`

	// RequireAuthenticatedObservers accepts an observation only from the agent that made
	// it: the request must carry the identity the k8s_token_auth authenticator established
	// (client.Info auth data, or its reserved metadata keys through a batch processor), and
	// the Resource's k8s.namespace.name, k8s.pod.name, k8s.pod.uid and k8s.node.name must
	// be that agent's. Other data points are counted (unauthenticated_source,
	// source_identity_mismatch) and nothing is decided from them, so quorums count
	// distinct authenticated observer nodes. See docs/security.md.
	RequireAuthenticatedObservers bool `mapstructure:"require_authenticated_observers"`

	LeaderElection LeaderElectionConfig `mapstructure:"leader_election"`
	Events         EventsConfig         `mapstructure:"events"`
	NodeConditions NodeConditionsConfig `mapstructure:"node_conditions"`
	Zones          ZonesConfig          `mapstructure:"zones"`
	ReadinessGate  ReadinessGateConfig  `mapstructure:"readiness_gate"`
	Gray           GrayConfig           `mapstructure:"gray"`
	Checks         ChecksConfig         `mapstructure:"checks"`
	// Summary: the writer's NetworkHealthSummary (docs/api.md).
	Summary SummaryConfig `mapstructure:"summary"`
	// Shard: this gateway's share of the targets when several gateway shards judge them
	// (docs/sharding.md).
	Shard ShardConfig `mapstructure:"shard"`
	// Relay: a sharded gateway's shard forwards what its agents send it to the shards that
	// own their targets, so each agent holds one connection (to any shard) instead of one
	// to every shard (docs/sharding.md, One connection per agent).
	Relay RelayConfig `mapstructure:"relay"`
}

// Values of freshness.
const (
	FreshnessAuto      = "auto"
	FreshnessLease     = "lease"
	FreshnessHeartbeat = "heartbeat"
)

// leaseFreshness: whether pair statuses take their currency from the writer's Lease.
func (c *Config) leaseFreshness() bool {
	return c.Freshness == FreshnessLease || c.Freshness == FreshnessAuto && c.writesSummary()
}

// Values of pair_objects.
const (
	PairObjectsAll      = "all"
	PairObjectsProblems = "problems"
)

// SummaryConfig: the writer keeps one NetworkHealthSummary per Lease it leads (in the
// Lease's namespace, under its name): targets judged, Unreachable and Degraded (with their
// nodes), observers, queued writes, and whether every verdict is written (Complete). It is
// rewritten only when a figure changes, at most once per MinInterval; it is current while
// the Lease is renewed. Needs leader_election (it names the Lease) and the gateway's RBAC
// for networkhealthsummaries; a namespace-restricted writer (all-in-one) writes none.
type SummaryConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// MinInterval bounds the summary's writes (default 30s: at most 2 a minute, 0.033/s of
	// a shard's write budget).
	MinInterval time.Duration `mapstructure:"min_interval"`
}

// RelayConfig: forward each authenticated agent's points to the shard that owns their
// targets (a target's node's shard; an agent's heartbeat to every shard), over one gRPC
// connection per other shard, with the agent's identity on each Resource; what arrives
// from a relay (a caller of k8s_token_auth's relay_service_accounts) is never forwarded
// again. Needs shard.count > 1 and require_authenticated_observers.
type RelayConfig struct {
	Enabled      bool `mapstructure:"enabled"`
	relay.Config `mapstructure:",squash"`
}

// ShardConfig places this gateway among count shards. Each shard owns the targets whose
// node maps to its index (internal/shard, the function the agents route by): it drops
// observations of other targets, writes and prunes only objects labelled with its index,
// sets node conditions and readiness only on its nodes, and leads its own Lease
// (lease_name-index). Declared checks and zone objects are shard 0's alone.
type ShardConfig struct {
	// Count of shards (1: one gateway judges every target; the agents' pod_probe shards).
	Count int `mapstructure:"count"`
	// Index of this shard, 0..count-1.
	Index int `mapstructure:"index"`
}

// Validate checks the shard's place.
func (s ShardConfig) Validate() error {
	if s.Count < 1 || s.Count > shard.MaxCount {
		return fmt.Errorf("count: %d out of range [1, %d]", s.Count, shard.MaxCount)
	}
	if s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("index: %d out of range [0, count-1=%d]", s.Index, s.Count-1)
	}
	return nil
}

// label is the value of v1alpha1.LabelShard on this shard's objects, "<index>-of-<count>": a
// shard of another count (before or after a change of it) neither resumes nor prunes them.
func (s ShardConfig) label() string { return fmt.Sprintf("%d-of-%d", s.Index, s.Count) }

// sharded: more than one shard.
func (s ShardConfig) sharded() bool { return s.Count > 1 }

// owns: the target on node (Pod and Node targets; "" for External) is this shard's.
func (s ShardConfig) owns(node string) bool { return shard.Of(node, s.Count) == s.Index }

// ChecksConfig: serve declared checks (NetworkCheck; with openshift also
// PodNetworkConnectivityCheck): place them on a vantage point, fold the results the logs
// pipeline brings into their status, write it on change and as a heartbeat, under the one
// write budget (docs/checks.md).
type ChecksConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// OpenShift: also serve PodNetworkConnectivityChecks (their CRD must exist; RBAC in
	// deploy/rbac/openshift-checks.yaml).
	OpenShift bool `mapstructure:"openshift"`
	// Heartbeat: routine changes (new successes, repeated failures) are written at most this
	// often; significant ones (reachability, outages, placement) at once.
	Heartbeat time.Duration `mapstructure:"heartbeat"`
	// PruneAfter: a PodNetworkConnectivityCheck whose source pod has been gone and that has
	// had no result this long is deleted, as OpenShift does (NetworkChecks are the user's
	// and never deleted).
	PruneAfter time.Duration `mapstructure:"prune_after"`
	// MaxChecks bounds the checks served (state O(checks)).
	MaxChecks int `mapstructure:"max_checks"`
	// MaxChecksPerNamespace is each namespace's share of max_checks: a namespace's checks
	// beyond it (the newest) are not served and read Accepted=False/NamespaceQuotaExceeded.
	MaxChecksPerNamespace int `mapstructure:"max_checks_per_namespace"`
	// AllowCrossNamespaceTargets lets a check target a pod or Service of another namespace
	// (target.pod.namespace, target.service.namespace). Off by default: a namespace editor
	// would learn other namespaces' pod IPs, Services and ports. Cluster admins opt in.
	AllowCrossNamespaceTargets bool `mapstructure:"allow_cross_namespace_targets"`
	// WriteShare is the share of the write budget (qps, burst) declared checks may use, on
	// top of coming after the pairs' verdicts and Events: many flapping checks never delay
	// a pair's verdict.
	WriteShare float64 `mapstructure:"write_share"`
	// EventsPerMinute bounds declared checks' Events (their own limiter, apart from
	// events.per_minute, which is the pairs').
	EventsPerMinute int `mapstructure:"events_per_minute"`
	// The target policy of declared checks' literal addresses (the agents apply theirs to
	// every resolved address as well).
	AllowLoopback  bool `mapstructure:"allow_loopback"`
	AllowLinkLocal bool `mapstructure:"allow_link_local"`
	// ExplainNetworkPolicy: a failing check whose path the cluster's NetworkPolicies deny
	// reads Reachable=False reason NetworkPolicyDenied, naming the policies (docs/checks.md).
	// On by default: it watches NetworkPolicies and Namespaces (small objects, stripped to
	// selectors and labels before caching; no pods) and reads a check's pods only while it
	// fails. Needs list/watch on both (deploy/rbac/checks.yaml).
	ExplainNetworkPolicy bool `mapstructure:"explain_network_policy"`
}

// LeaderElectionConfig makes exactly one replica the writer (client-go Lease election).
type LeaderElectionConfig struct {
	Enabled        bool   `mapstructure:"enabled"`
	LeaseName      string `mapstructure:"lease_name"`
	LeaseNamespace string `mapstructure:"lease_namespace"`
	// Identity of this candidate (default: POD_NAME, else the host name).
	Identity      string        `mapstructure:"identity"`
	LeaseDuration time.Duration `mapstructure:"lease_duration"`
	RenewDeadline time.Duration `mapstructure:"renew_deadline"`
	RetryPeriod   time.Duration `mapstructure:"retry_period"`
	// LeaderLabel, when set, is put on this replica's own pod (named Identity, in
	// LeaseNamespace) with value "true" while it holds the Lease and removed when it stops,
	// so a Service selecting on it sends every agent's data to the writer.
	LeaderLabel string `mapstructure:"leader_label"`
}

// EventsConfig: Events on verdict transitions (ConnectivityOutageDetected / ConnectivityRestored).
type EventsConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// PerMinute bounds Events emitted per minute (burst: the same number).
	PerMinute int `mapstructure:"per_minute"`
}

// NodeConditionsConfig: the opt-in node-level pod-network signal.
type NodeConditionsConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Type of the condition written (never one the kubelet owns).
	Type string `mapstructure:"type"`
	// DegradedType, when set, is a second condition for gray failures (PacketLoss,
	// HighLatency: docs/gray.md) with the same hold and heartbeat; empty: off.
	DegradedType string `mapstructure:"degraded_type"`
	// Quorum: distinct observer nodes that must fail to reach a node before it is marked.
	Quorum int `mapstructure:"quorum"`
	// MaxFailingShare of observers failing beyond which marking suppresses itself.
	MaxFailingShare float64 `mapstructure:"max_failing_share"`
	// Heartbeat rewrites an unchanged True or Unknown condition this often (a False one,
	// a cleared mark, is written once; a node never marked gets none).
	Heartbeat time.Duration `mapstructure:"heartbeat"`
	// MinHold keeps a marked node marked until this long after the last evidence (flap
	// damping); marking itself is immediate.
	MinHold time.Duration `mapstructure:"min_hold"`
}

// ZonesConfig: localisation above the node (docs/summary.md, Zones). Failures that group
// by (observer zone, target zone) while both zones work are judged as a cut zone pair:
// a ZoneNetworkHealth object, Events and a gauge, and the node quorum does not count them
// (no node condition floods a zone). Zones are the nodes' topology.kubernetes.io/zone
// labels, as the gateway's k8s_net_attributes index reads them.
// GrayConfig: how packet loss and latency are judged (docs/gray.md in this component).
type GrayConfig struct {
	// Enabled (default true): judge packet loss and latency at all.
	Enabled bool `mapstructure:"enabled"`
	// Window: how far back loss evidence reaches, judged over its newest 1, 2, 4, ...
	// slots of SlotWidth (defaults 30m and 30s).
	Window    time.Duration     `mapstructure:"window"`
	SlotWidth time.Duration     `mapstructure:"slot_width"`
	Loss      GrayLossConfig    `mapstructure:"loss"`
	Latency   GrayLatencyConfig `mapstructure:"latency"`
}

// GrayLossConfig: PacketLoss when a window's answered echoes lose at least threshold and
// their log-likelihood ratio against the background reaches evidence (nats).
type GrayLossConfig struct {
	Background float64 `mapstructure:"background"`
	Threshold  float64 `mapstructure:"threshold"`
	Evidence   float64 `mapstructure:"evidence"`
}

// GrayLatencyConfig: HighLatency when most observer nodes' newest round is above
// baseline·(1+relative)+margin (or above bound, when set) for rounds rounds.
type GrayLatencyConfig struct {
	Relative float64       `mapstructure:"relative"`
	Margin   time.Duration `mapstructure:"margin"`
	Bound    time.Duration `mapstructure:"bound"`
	Rounds   int           `mapstructure:"rounds"`
}

// Validate checks the windows and each test's values, naming the key.
func (g GrayConfig) Validate() error {
	var errs []error
	if g.SlotWidth < time.Second || g.SlotWidth > 10*time.Minute {
		errs = append(errs, fmt.Errorf("slot_width: %v out of range [1s, 10m]", g.SlotWidth))
	} else if g.Window < g.SlotWidth || g.Window/g.SlotWidth > 240 {
		errs = append(errs, fmt.Errorf("window: %v must span 1 to 240 slots of slot_width %v", g.Window, g.SlotWidth))
	}
	if err := g.verdict().Loss.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("loss: %w", err))
	}
	if err := g.verdict().Latency.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("latency: %w", err))
	}
	return kubeclient.JoinErrors(errs...)
}

// verdict maps the configuration onto the verdict stage's.
func (g GrayConfig) verdict() verdict.GrayConfig {
	slots := 0
	if g.SlotWidth > 0 {
		slots = int(g.Window / g.SlotWidth)
	}
	return verdict.GrayConfig{
		Off:       !g.Enabled,
		Loss:      gray.LossConfig{Background: g.Loss.Background, Threshold: g.Loss.Threshold, Evidence: g.Loss.Evidence},
		Latency:   gray.LatencyConfig{Relative: g.Latency.Relative, Margin: g.Latency.Margin, Bound: g.Latency.Bound, Rounds: g.Latency.Rounds},
		SlotWidth: g.SlotWidth,
		Slots:     slots,
	}
}

type ZonesConfig struct {
	// Enabled judges zone pairs. WriteObjects (default true) also writes ZoneNetworkHealth
	// objects and their Events (RBAC: zonenetworkhealths, zonenetworkhealths/status);
	// without it the judgement still keeps zone cuts out of the node quorum and sets the
	// gauge.
	Enabled      bool `mapstructure:"enabled"`
	WriteObjects bool `mapstructure:"write_objects"`
	// MinNodes distinct observer nodes of the source zone, and target nodes of the target
	// zone, must fail (at least 2: one compromised agent never cuts a zone pair).
	MinNodes int `mapstructure:"min_nodes"`
	// MinFailingShare: the source zone's observer nodes must fail this share of their own
	// (observer node, target node) pairs towards the target zone, on average over the
	// nodes: each observer node is one vote, however many targets it reports on.
	MinFailingShare float64 `mapstructure:"min_failing_share"`
	// MinHealthyShare: each zone's observer nodes must reach this share of their node pairs
	// within it, on average over the nodes, the one that reaches least left out.
	MinHealthyShare float64 `mapstructure:"min_healthy_share"`
	// MinHold keeps a cut pair Unreachable this long after the last judgement that found it
	// cut; Retention deletes a recovered pair's object this long after it recovered.
	MinHold   time.Duration `mapstructure:"min_hold"`
	Retention time.Duration `mapstructure:"retention"`
}

// Validate checks the zone settings when they are enabled.
func (z ZonesConfig) Validate() error {
	if !z.Enabled {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if z.MinNodes < 2 || z.MinNodes > 100 {
		add("min_nodes: %d out of range [2, 100] (one node is a node problem)", z.MinNodes)
	}
	if z.MinFailingShare <= 0.5 || z.MinFailingShare > 1 {
		add("min_failing_share: %v out of range (0.5, 1]", z.MinFailingShare)
	}
	if z.MinHealthyShare <= 0.5 || z.MinHealthyShare > 1 {
		add("min_healthy_share: %v out of range (0.5, 1]", z.MinHealthyShare)
	}
	if z.MinHold < 0 || z.MinHold > time.Hour {
		add("min_hold: %v out of range [0, 1h]", z.MinHold)
	}
	if z.Retention < time.Minute || z.Retention > 24*time.Hour {
		add("retention: %v out of range [1m, 24h]", z.Retention)
	}
	return kubeclient.JoinErrors(errs...)
}

// ReadinessGateConfig: the opt-in pod network-readiness condition (alpha feature gate
// exporter.podnetworkhealth.readinessGate).
type ReadinessGateConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// ConditionType pods declare in spec.readinessGates.
	ConditionType string `mapstructure:"condition_type"`
	// MaxFlipsPerMinute bounds how many pods may be flipped per minute.
	MaxFlipsPerMinute int `mapstructure:"max_flips_per_minute"`
	// FailOpenTimeout: a pod never reached this long after creation is set True anyway
	// (reason FailOpen); 0 disables. On by default (DefaultFailOpenTimeout): a pod no
	// agent reaches (no selector covers it, a broken prober) must not stay out of its
	// Services for good.
	FailOpenTimeout time.Duration `mapstructure:"fail_open_timeout"`
	// MinReachingNodes: distinct observer nodes (other than the pod's) that must have
	// reached the pod. With require_authenticated_observers it must be at least 2, so
	// that no single agent decides another pod's readiness.
	MinReachingNodes int `mapstructure:"min_reaching_nodes"`
}

// Conditions the kubelet owns; netpulse never writes them.
var kubeletConditions = map[string]bool{
	"Ready": true, "MemoryPressure": true, "DiskPressure": true, "PIDPressure": true, "NetworkUnavailable": true,
}

// Validation. The collector's configuration walk (confmap.Validate) calls Validate on
// Config and on each of its parts (leader_election, events, node_conditions,
// readiness_gate) and puts the part's path in front of what it returns: each Validate
// names its own fields, relative to itself, and the checks that need
// require_authenticated_observers stay on Config.

// Validate checks the top-level fields, and the quorums that
// require_authenticated_observers raises.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	errs = append(errs, c.Config.Check())
	if c.Window < 10*time.Second || c.Window > 24*time.Hour {
		add("window: %v out of range [10s, 24h]", c.Window)
	}
	if c.FailuresToUnreachable < 1 || c.FailuresToUnreachable > 100 {
		add("failures_to_unreachable: %d out of range [1, 100]", c.FailuresToUnreachable)
	}
	if c.SuccessesToReachable < 1 || c.SuccessesToReachable > 100 {
		add("successes_to_reachable: %d out of range [1, 100]", c.SuccessesToReachable)
	}
	if c.FlapWindow < 0 || c.FlapWindow > time.Hour {
		add("flap_window: %v out of range [0, 1h] (0: off)", c.FlapWindow)
	}
	if c.MaxOutages < 1 || c.MaxOutages > 20 {
		add("max_outages: %d out of range [1, 20] (the CRD allows at most 20)", c.MaxOutages)
	}
	if c.Heartbeat < 10*time.Second || c.Heartbeat > 24*time.Hour {
		add("heartbeat: %v out of range [10s, 24h]", c.Heartbeat)
	}
	if c.RTTTolerance < 0 || c.RTTTolerance > 10 {
		add("rtt_tolerance: %v out of range [0, 10] (relative change)", c.RTTTolerance)
	}
	if c.LossTolerance < 0 || c.LossTolerance > 1 {
		add("loss_tolerance: %v out of range [0, 1]", c.LossTolerance)
	}
	if c.TargetTTL < time.Minute || c.TargetTTL > 30*24*time.Hour {
		add("target_ttl: %v out of range [1m, 720h]", c.TargetTTL)
	}
	if c.TargetQuorum < 1 || c.TargetQuorum > 16 {
		add("target_quorum: %d out of range [1, 16]", c.TargetQuorum)
	}
	if c.TargetRecovery < 1 || c.TargetRecovery > 16 {
		add("target_recovery: %d out of range [1, 16]", c.TargetRecovery)
	}
	if c.FailingPairRetention < time.Minute || c.FailingPairRetention > 24*time.Hour {
		add("failing_pair_retention: %v out of range [1m, 24h]", c.FailingPairRetention)
	}
	if c.MaxProbeInterval < time.Second || c.MaxProbeInterval > time.Hour {
		add("max_probe_interval: %v out of range [1s, 1h] (the longest probe interval of the agents)", c.MaxProbeInterval)
	}
	if c.MinProbeInterval < 100*time.Millisecond || c.MinProbeInterval > c.MaxProbeInterval {
		add("min_probe_interval: %v out of range [100ms, max_probe_interval=%v] (the shortest probe interval of the agents)", c.MinProbeInterval, c.MaxProbeInterval)
	}
	if c.MaxEchoesPerRound < 1 || c.MaxEchoesPerRound > 100 {
		add("max_echoes_per_round: %d out of range [1, 100] (the largest icmp.count of the agents)", c.MaxEchoesPerRound)
	}
	if c.MaxStableTargetsPerSource < 1 || c.MaxStableTargetsPerSource > 4096 {
		add("max_stable_targets_per_source: %d out of range [1, 4096] (k8s_net_attributes' max_stable_targets_per_source)", c.MaxStableTargetsPerSource)
	}
	errs = append(errs, c.checkFreshness())
	if c.PairObjects != PairObjectsAll && c.PairObjects != PairObjectsProblems {
		add("pair_objects: %q: want %q or %q", c.PairObjects, PairObjectsAll, PairObjectsProblems)
	}
	if c.Workers < 1 || c.Workers > 64 {
		add("workers: %d out of range [1, 64]", c.Workers)
	}
	if c.Namespace != "" {
		if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
			add("namespace: %q: %s", c.Namespace, strings.Join(msgs, "; "))
		}
	}
	if ch := c.Checks; ch.Enabled {
		if ch.Heartbeat < time.Minute || ch.Heartbeat > 24*time.Hour {
			add("checks::heartbeat: %v out of range [1m, 24h]", ch.Heartbeat)
		}
		if ch.PruneAfter < time.Hour {
			add("checks::prune_after: %v below 1h", ch.PruneAfter)
		}
		if ch.MaxChecks < 1 || ch.MaxChecks > 100000 {
			add("checks::max_checks: %d out of range [1, 100000]", ch.MaxChecks)
		}
		if ch.MaxChecksPerNamespace < 1 || ch.MaxChecksPerNamespace > ch.MaxChecks {
			add("checks::max_checks_per_namespace: %d out of range [1, max_checks]", ch.MaxChecksPerNamespace)
		}
		if !(ch.WriteShare >= 0.05 && ch.WriteShare <= 0.5) {
			add("checks::write_share: %v out of range [0.05, 0.5]", ch.WriteShare)
		}
		if ch.EventsPerMinute < 1 || ch.EventsPerMinute > 600 {
			add("checks::events_per_minute: %d out of range [1, 600]", ch.EventsPerMinute)
		}
	}
	// A quorum out of range is reported once, as out of range (above, NodeConditionsConfig,
	// ReadinessGateConfig).
	if c.RequireAuthenticatedObservers && c.TargetQuorum == 1 {
		add("target_quorum: %d with require_authenticated_observers: want at least 2, so that no single agent can make a target Unreachable", c.TargetQuorum)
	}
	if nc := c.NodeConditions; nc.Enabled && c.RequireAuthenticatedObservers && nc.Quorum == 1 {
		add("node_conditions::quorum: %d with require_authenticated_observers: want at least 2, so that no single agent can mark a node", nc.Quorum)
	}
	errs = append(errs, c.checkRelay())
	if rg := c.ReadinessGate; rg.Enabled && c.RequireAuthenticatedObservers && rg.MinReachingNodes == 1 {
		add("readiness_gate::min_reaching_nodes: %d with require_authenticated_observers: want at least 2, so that no single agent decides another pod's readiness", rg.MinReachingNodes)
	}
	return kubeclient.JoinErrors(errs...)
}

// Validate checks the summary's settings.
func (s SummaryConfig) Validate() error {
	if s.Enabled && (s.MinInterval < time.Second || s.MinInterval > time.Hour) {
		return fmt.Errorf("min_interval: %v out of range [1s, 1h]", s.MinInterval)
	}
	return nil
}

// writesSummary: the summary names the writer's Lease, so it needs leader election; a
// namespace-restricted writer (all-in-one: each agent its own pairs) judges no targets.
func (c *Config) writesSummary() bool {
	return c.Summary.Enabled && c.LeaderElection.Enabled && c.Namespace == ""
}

// checkFreshness checks freshness and what lease needs.
func (c *Config) checkFreshness() error {
	switch c.Freshness {
	case FreshnessAuto, FreshnessHeartbeat:
	case FreshnessLease:
		if !c.writesSummary() {
			return fmt.Errorf("freshness: %q needs the writer's NetworkHealthSummary (summary::enabled and leader_election::enabled, no namespace): readers find the Lease through it", c.Freshness)
		}
	default:
		return fmt.Errorf("freshness: %q: want %q, %q or %q", c.Freshness, FreshnessAuto, FreshnessLease, FreshnessHeartbeat)
	}
	return nil
}

// checkRelay checks relay.enabled's needs and settings.
func (c *Config) checkRelay() error {
	if !c.Relay.Enabled {
		return nil
	}
	var errs []error
	if !c.Shard.sharded() {
		errs = append(errs, errors.New("relay::enabled: needs shard::count above 1 (a single gateway judges every target)"))
	}
	if !c.RequireAuthenticatedObservers {
		errs = append(errs, errors.New("relay::enabled: needs require_authenticated_observers (a relay forwards the identity it authenticated)"))
	}
	if len(c.Relay.Endpoints) != c.Shard.Count {
		errs = append(errs, fmt.Errorf("relay::endpoints: %d, want one per shard (shard::count %d)", len(c.Relay.Endpoints), c.Shard.Count))
	}
	if err := c.Relay.Check(); err != nil {
		errs = append(errs, fmt.Errorf("relay::%w", err))
	}
	return errors.Join(errs...)
}

// DefaultFailOpenTimeout is readiness_gate.fail_open_timeout's default.
const DefaultFailOpenTimeout = 5 * time.Minute

// Validate checks the election settings when it is enabled.
func (le LeaderElectionConfig) Validate() error {
	if !le.Enabled {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if msgs := validation.IsDNS1123Subdomain(le.LeaseName); len(msgs) > 0 {
		add("lease_name: %q: %s", le.LeaseName, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Label(le.LeaseNamespace); len(msgs) > 0 {
		add("lease_namespace: %q: %s (set it, e.g. from POD_NAMESPACE)", le.LeaseNamespace, strings.Join(msgs, "; "))
	}
	if le.LeaderLabel != "" {
		if msgs := validation.IsQualifiedName(le.LeaderLabel); len(msgs) > 0 {
			add("leader_label: %q: %s", le.LeaderLabel, strings.Join(msgs, "; "))
		}
	}
	if le.LeaseDuration <= le.RenewDeadline || le.RenewDeadline <= le.RetryPeriod || le.RetryPeriod <= 0 {
		add("want lease_duration (%v) > renew_deadline (%v) > retry_period (%v) > 0", le.LeaseDuration, le.RenewDeadline, le.RetryPeriod)
	}
	return kubeclient.JoinErrors(errs...)
}

// Validate checks the Event rate when Events are enabled.
func (e EventsConfig) Validate() error {
	if e.Enabled && (e.PerMinute < 1 || e.PerMinute > 600) {
		return fmt.Errorf("per_minute: %d out of range [1, 600]", e.PerMinute)
	}
	return nil
}

// Validate checks the node condition settings when they are enabled; Config checks the
// quorum against require_authenticated_observers.
func (nc NodeConditionsConfig) Validate() error {
	if !nc.Enabled {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if kubeletConditions[nc.Type] {
		add("type: %q is owned by the kubelet; netpulse never writes it", nc.Type)
	} else if msgs := validation.IsQualifiedName(nc.Type); nc.Type == "" || len(msgs) > 0 {
		add("type: %q is not a valid condition type: %s", nc.Type, strings.Join(msgs, "; "))
	}
	if d := nc.DegradedType; d != "" {
		if kubeletConditions[d] {
			add("degraded_type: %q is owned by the kubelet; netpulse never writes it", d)
		} else if msgs := validation.IsQualifiedName(d); len(msgs) > 0 {
			add("degraded_type: %q is not a valid condition type: %s", d, strings.Join(msgs, "; "))
		} else if d == nc.Type {
			add("degraded_type: %q is type's: the two conditions must differ", d)
		}
	}
	if nc.Quorum < 1 || nc.Quorum > 100 {
		add("quorum: %d out of range [1, 100]", nc.Quorum)
	}
	if nc.MaxFailingShare <= 0 || nc.MaxFailingShare > 1 {
		add("max_failing_share: %v out of range (0, 1]", nc.MaxFailingShare)
	}
	if nc.Heartbeat < 10*time.Second {
		add("heartbeat: %v below 10s", nc.Heartbeat)
	}
	if nc.MinHold < 0 || nc.MinHold > time.Hour {
		add("min_hold: %v out of range [0, 1h]", nc.MinHold)
	}
	return kubeclient.JoinErrors(errs...)
}

// Validate checks the readiness gate settings when it is enabled; Config checks
// min_reaching_nodes against require_authenticated_observers.
func (rg ReadinessGateConfig) Validate() error {
	if !rg.Enabled {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if gate := metadata.ExporterPodnetworkhealthReadinessGateFeatureGate; !gate.IsEnabled() {
		add("enabled: requires the alpha feature gate: run with --feature-gates=%s", gate.ID())
	}
	if msgs := validation.IsQualifiedName(rg.ConditionType); len(msgs) > 0 {
		add("condition_type: %q: %s", rg.ConditionType, strings.Join(msgs, "; "))
	}
	if rg.MaxFlipsPerMinute < 1 || rg.MaxFlipsPerMinute > 6000 {
		add("max_flips_per_minute: %d out of range [1, 6000]", rg.MaxFlipsPerMinute)
	}
	if rg.FailOpenTimeout < 0 {
		add("fail_open_timeout: %v is negative", rg.FailOpenTimeout)
	}
	if rg.MinReachingNodes < 1 || rg.MinReachingNodes > 4 {
		add("min_reaching_nodes: %d out of range [1, 4]", rg.MinReachingNodes)
	}
	return kubeclient.JoinErrors(errs...)
}
