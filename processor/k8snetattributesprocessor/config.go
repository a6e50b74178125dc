// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor // import "github.com/netpulse/netpulse/processor/k8snetattributesprocessor"

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/admission"
)

// SourceKind says which telemetry element a rule reads its address from (and writes the
// identity to).
type SourceKind string

const (
	// SourceResource: a Resource attribute (all signals).
	SourceResource SourceKind = "resource"
	// SourceDataPoint: a metric data point attribute (every metric type).
	SourceDataPoint SourceKind = "datapoint"
	// SourceSpan: a span attribute.
	SourceSpan SourceKind = "span"
	// SourceLog: a log record attribute.
	SourceLog SourceKind = "log"
)

var sourceKinds = []SourceKind{SourceResource, SourceDataPoint, SourceSpan, SourceLog}

func (k SourceKind) valid() bool { return slices.Contains(sourceKinds, k) }

func sourceKindList() string {
	names := make([]string, len(sourceKinds))
	for i, k := range sourceKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// Attribute names accepted by Config.Attributes (written under each rule's prefix).
const (
	AttrPodName   = contract.K8sPodName
	AttrPodUID    = contract.K8sPodUID
	AttrNamespace = contract.K8sNamespaceName
	AttrNodeName  = contract.K8sNodeName
	AttrZone      = contract.CloudZone
	AttrRegion    = contract.CloudRegion
)

// allAttributes is the default and the accepted set of Config.Attributes, in write order.
var allAttributes = []string{
	AttrPodName, AttrNamespace, AttrPodUID, AttrNodeName,
	contract.K8sDeploymentName, contract.K8sReplicaSetName, contract.K8sStatefulSetName,
	contract.K8sDaemonSetName, contract.K8sJobName, contract.K8sCronJobName,
	AttrZone, AttrRegion,
}

// Config is the k8s_net_attributes configuration.
type Config struct {
	// Client configuration (auth_type, kubeconfig, context, qps, burst).
	kubeclient.Config `mapstructure:",squash"`

	// Scope limits what the index watches (agents: their own node, or a namespace or
	// label selector). The default is the whole cluster.
	Scope ScopeConfig `mapstructure:"scope"`

	// Rules name the attributes that hold addresses and the prefix under which the
	// identity is written. Setting rules replaces the defaults entirely.
	Rules []RuleConfig `mapstructure:"rules"`

	// Attributes are the identity attributes written (default: all of them). The workload
	// keys (k8s.deployment.name, ...) are written for the pod's own workload kind only.
	Attributes []string `mapstructure:"attributes"`

	// PodLabels are pod labels to keep in the index and write as
	// <prefix>k8s.pod.label.<key>. Every other label is dropped before caching.
	PodLabels []string `mapstructure:"pod_labels"`

	// DeletedPodGrace keeps a deleted pod's IPs resolvable to it for this long, as long
	// as no live pod has them, so late telemetry still resolves. 0 disables.
	DeletedPodGrace time.Duration `mapstructure:"deleted_pod_grace"`

	// WaitForSync makes Start wait (at most WaitForSyncTimeout) for the index's initial
	// list; without it Start returns at once and addresses resolve as the index fills.
	WaitForSync        bool          `mapstructure:"wait_for_sync"`
	WaitForSyncTimeout time.Duration `mapstructure:"wait_for_sync_timeout"`

	// Admission bounds what pod_probe metrics (netpulse.probe.*) may make the gateway keep,
	// export or write, per source pod and in total. Off by default; the gateway enables it.
	Admission AdmissionConfig `mapstructure:"admission"`

	_ struct{}
}

// AdmissionConfig: the gateway's admission of pod_probe data (README, Admission). With it
// enabled, every pod_probe data point keeps only the contract's attributes and values, its
// destination identity comes from the index alone, and what is over a limit is refused,
// counted (otelcol_k8s_net_attributes_admission_refused{reason}) and logged at most every
// 30 s. Nothing admitted is evicted by a newcomer.
type AdmissionConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// MaxDataPointsPerRequest of one source pod in one request (a round of the shipped
	// agent is ~60; a batch holds a few rounds).
	MaxDataPointsPerRequest int `mapstructure:"max_data_points_per_request"`
	// MaxTargetsPerRound: distinct targets (address, port, probe type) of one source in one
	// round (data point timestamp). The receiver probes at most (stable_peers + k) peers x
	// their addresses x probe types, their nodes, plus static and DNS targets.
	MaxTargetsPerRound int `mapstructure:"max_targets_per_round"`
	// MaxStableTargetsPerSource: distinct targets one source reports as stable pairs (the
	// exported per-pair series and the stable objects): stable_peers x (addresses x probe
	// types + node addresses) + static + DNS targets; the shipped agent has 4.
	MaxStableTargetsPerSource int `mapstructure:"max_stable_targets_per_source"`
	// MaxExternalTargetsPerSource: distinct external targets (no pod or node in the index)
	// of one source.
	MaxExternalTargetsPerSource int `mapstructure:"max_external_targets_per_source"`
	// DeclaredExternalTargets: the external targets admitted at all (IPs, CIDRs or host
	// names, as the agents' static and DNS targets name them; "*" admits any, still bounded
	// per source). Empty: none, since the shipped agents probe only pods and nodes.
	DeclaredExternalTargets []string `mapstructure:"declared_external_targets"`
	// MaxSources: distinct source pods remembered (more than the cluster's agents).
	MaxSources int `mapstructure:"max_sources"`
	// IdleTTL: a source's target not reported this long is forgotten (3x the longest probe
	// interval; stable targets are reported every round).
	IdleTTL time.Duration `mapstructure:"idle_ttl"`
	// RequireAuthenticatedSource refuses pod_probe data whose Resource names another pod or
	// node than the agent the k8s_token_auth authenticator established (the exporter's
	// require_authenticated_observers, for every pipeline, the exported series included).
	RequireAuthenticatedSource bool `mapstructure:"require_authenticated_source"`
	// KeepRelayedIdentity keeps, on the Resources a relay forwarded (a sharded gateway's
	// shard: k8s_token_auth's relay_service_accounts), the agent's identity the relay vouched
	// for (netpulse.relayed.* attributes), for pod_network_health's binding downstream.
	// Off: they are removed once admission matched them (an export pipeline, whose series
	// would otherwise carry them as labels). Attributes of that name from any other caller
	// are always removed.
	KeepRelayedIdentity bool `mapstructure:"keep_relayed_identity"`
}

// ScopeConfig limits the watches.
type ScopeConfig struct {
	// Namespace: only pods of this namespace.
	Namespace string `mapstructure:"namespace"`
	// LabelSelector: only pods matching this label selector.
	LabelSelector string `mapstructure:"label_selector"`
	// NodeName: only pods on this node (field selector spec.nodeName) and only this Node.
	// Agents set it from the downward API: node_name: ${env:NODE_NAME} (the DaemonSet sets
	// NODE_NAME; an unset variable is empty, which means every pod).
	NodeName string `mapstructure:"node_name"`
	// WatchNodes watches Node objects (node IPs, zones, regions). Default true; false
	// needs no RBAC on nodes.
	WatchNodes bool `mapstructure:"watch_nodes"`
}

// RuleConfig is one address-to-identity mapping.
type RuleConfig struct {
	// From is where the address is read: resource, datapoint, span or log.
	From SourceKind `mapstructure:"from"`
	// Attribute holds the address ("10.0.0.1", "10.0.0.1:80", "[fd00::1]:53", ...).
	Attribute string `mapstructure:"attribute"`
	// Prefix is prepended to the identity keys: "" writes k8s.pod.name, "destination."
	// writes destination.k8s.pod.name. Empty or ending with ".".
	Prefix string `mapstructure:"prefix"`
}

// DefaultRules cover the pod_probe telemetry contract and common span peer keys.
func DefaultRules() []RuleConfig {
	return []RuleConfig{
		// The probing pod, on the Resource: standard k8s.* keys when they are missing.
		{From: SourceResource, Attribute: contract.K8sPodIP, Prefix: ""},
		// The probe target, on data points (and on the receiver's optional spans).
		{From: SourceDataPoint, Attribute: contract.DestinationAddress, Prefix: contract.DestinationPrefix},
		{From: SourceSpan, Attribute: contract.DestinationAddress, Prefix: contract.DestinationPrefix},
		{From: SourceLog, Attribute: contract.DestinationAddress, Prefix: contract.DestinationPrefix},
		// Peers of ordinary spans.
		{From: SourceSpan, Attribute: "network.peer.address", Prefix: "network.peer."},
		{From: SourceSpan, Attribute: "server.address", Prefix: "server."},
		{From: SourceSpan, Attribute: "client.address", Prefix: "client."},
	}
}

func createDefaultConfig() *Config {
	return &Config{
		Config:             kubeclient.DefaultConfig(),
		Scope:              ScopeConfig{WatchNodes: true},
		Rules:              DefaultRules(),
		Attributes:         append([]string(nil), allAttributes...),
		DeletedPodGrace:    30 * time.Second,
		WaitForSyncTimeout: 10 * time.Second,
		Admission: AdmissionConfig{
			MaxDataPointsPerRequest:     10000,
			MaxTargetsPerRound:          64,
			MaxStableTargetsPerSource:   admission.DefaultMaxStableTargetsPerSource,
			MaxExternalTargetsPerSource: admission.DefaultMaxExternalTargetsPerSource,
			MaxSources:                  admission.DefaultMaxSources,
			IdleTTL:                     admission.DefaultIdleTTL,
		},
	}
}

// Validation. The collector's configuration walk (confmap.Validate) calls Validate on
// Config and on each of its parts (scope, admission, every rule) and puts the part's path
// in front of what it returns: each Validate names its own fields, relative to itself.
// What needs two parts (rules repeated, admission's rule) stays on Config.

// Validate checks the top-level fields, the rules as a list, and that admission has the
// rule it needs.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.Config.Check())
	if c.Admission.Enabled && !slices.ContainsFunc(c.Rules, func(r RuleConfig) bool {
		return r.From == SourceDataPoint && r.Attribute == contract.DestinationAddress && r.Prefix == contract.DestinationPrefix
	}) {
		errs = append(errs, errors.New("admission: needs the data point rule destination.address -> destination. (it tells pods and nodes from external targets)"))
	}
	if c.DeletedPodGrace < 0 {
		errs = append(errs, fmt.Errorf("deleted_pod_grace: %v must not be negative", c.DeletedPodGrace))
	}
	if c.WaitForSync && c.WaitForSyncTimeout <= 0 {
		errs = append(errs, fmt.Errorf("wait_for_sync_timeout: %v must be positive when wait_for_sync is true", c.WaitForSyncTimeout))
	}
	if len(c.PodLabels) > maxPodLabels {
		errs = append(errs, fmt.Errorf("pod_labels: %d labels; at most %d", len(c.PodLabels), maxPodLabels))
	}
	seenLabel := map[string]int{}
	for i, l := range c.PodLabels {
		if msgs := validation.IsQualifiedName(l); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("pod_labels::%d: %q is not a label key: %s", i, l, strings.Join(msgs, "; ")))
		}
		if j, dup := seenLabel[l]; dup {
			errs = append(errs, fmt.Errorf("pod_labels::%d: %q repeats pod_labels::%d", i, l, j))
		}
		seenLabel[l] = i
	}
	if len(c.Attributes) == 0 {
		errs = append(errs, errors.New("attributes: empty; list the identity attributes to write (default: all)"))
	}
	for i, a := range c.Attributes {
		if !slices.Contains(allAttributes, a) {
			errs = append(errs, fmt.Errorf("attributes::%d: unknown attribute %q; want one of %s", i, a, strings.Join(allAttributes, ", ")))
		}
	}
	if len(c.Rules) == 0 {
		errs = append(errs, errors.New("rules: empty; the processor would change nothing (remove the key to get the default rules)"))
	}
	// RuleConfig.Validate reports an empty rule.
	type ruleKey struct {
		from SourceKind
		attr string
	}
	seen := map[ruleKey]int{}
	for i, r := range c.Rules {
		if r == (RuleConfig{}) {
			continue
		}
		k := ruleKey{r.From, r.Attribute}
		if j, dup := seen[k]; dup {
			errs = append(errs, fmt.Errorf("rules::%d: same from and attribute as rules::%d (%s %q)", i, j, r.From, r.Attribute))
		} else {
			seen[k] = i
		}
	}
	return kubeclient.JoinErrors(errs...)
}

// Validate checks the limits when admission is enabled; Config checks that the rules
// include the one admission needs.
func (a AdmissionConfig) Validate() error {
	if !a.Enabled {
		return nil
	}
	var errs []error
	for _, r := range []struct {
		name   string
		v, max int
	}{
		{"max_data_points_per_request", a.MaxDataPointsPerRequest, 1 << 20},
		{"max_targets_per_round", a.MaxTargetsPerRound, 65536},
		{"max_stable_targets_per_source", a.MaxStableTargetsPerSource, 4096},
		{"max_external_targets_per_source", a.MaxExternalTargetsPerSource, 4096},
		{"max_sources", a.MaxSources, 1 << 20},
	} {
		if r.v < 1 || r.v > r.max {
			errs = append(errs, fmt.Errorf("%s: %d out of range [1, %d]", r.name, r.v, r.max))
		}
	}
	if a.IdleTTL < 10*time.Second || a.IdleTTL > 24*time.Hour {
		errs = append(errs, fmt.Errorf("idle_ttl: %v out of range [10s, 24h]", a.IdleTTL))
	}
	for i, d := range a.DeclaredExternalTargets {
		if d == "*" {
			continue
		}
		if _, err := parseDeclared(d); err != nil && (strings.ContainsAny(d, "/:[] ") || len(validation.IsDNS1123Subdomain(strings.ToLower(d))) > 0) {
			errs = append(errs, fmt.Errorf("declared_external_targets::%d: %q is neither an IP, a CIDR nor a host name", i, d))
		}
	}
	return kubeclient.JoinErrors(errs...)
}

// Validate checks the scope's selectors.
func (s ScopeConfig) Validate() error {
	var errs []error
	if s.LabelSelector != "" {
		if _, err := labels.Parse(s.LabelSelector); err != nil {
			errs = append(errs, fmt.Errorf("label_selector: %w", err))
		}
	}
	if s.Namespace != "" {
		if msgs := validation.IsDNS1123Label(s.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("namespace: %q is not a namespace name: %s", s.Namespace, strings.Join(msgs, "; ")))
		}
	}
	if s.NodeName != "" {
		if msgs := validation.IsDNS1123Subdomain(s.NodeName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("node_name: %q is not a node name: %s", s.NodeName, strings.Join(msgs, "; ")))
		}
	}
	return kubeclient.JoinErrors(errs...)
}

// Validate checks one rule; Config checks that no two rules read the same attribute.
func (r RuleConfig) Validate() error {
	if r == (RuleConfig{}) {
		return errors.New("empty rule; set from, attribute and prefix")
	}
	var errs []error
	switch {
	case r.From == "":
		errs = append(errs, fmt.Errorf("from: missing; want one of %s", sourceKindList()))
	case !r.From.valid():
		errs = append(errs, fmt.Errorf("from: unknown source kind %q; want one of %s", r.From, sourceKindList()))
	}
	if strings.TrimSpace(r.Attribute) == "" {
		errs = append(errs, errors.New("attribute: missing; name the attribute that holds the address"))
	}
	if err := validatePrefix(r.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("prefix: %w", err))
	}
	return kubeclient.JoinErrors(errs...)
}

func validatePrefix(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasSuffix(p, ".") {
		return fmt.Errorf("%q must be empty or end with \".\" (e.g. %q)", p, p+".")
	}
	if strings.HasPrefix(p, ".") || strings.Contains(p, "..") {
		return fmt.Errorf("%q has an empty segment", p)
	}
	for _, c := range p {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("%q contains whitespace or control characters", p)
		}
	}
	return nil
}

// maxPodLabels keeps a rule's keys within maxSlots.
const maxPodLabels = 40
