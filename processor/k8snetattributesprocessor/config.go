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

	_ struct{}
}

// ScopeConfig limits the watches.
type ScopeConfig struct {
	// Namespace: only pods of this namespace.
	Namespace string `mapstructure:"namespace"`
	// LabelSelector: only pods matching this label selector.
	LabelSelector string `mapstructure:"label_selector"`
	// NodeName: only pods on this node (field selector spec.nodeName) and only this Node.
	// Agents set it from the downward API: node_name: ${env:K8S_NODE_NAME}.
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
	}
}

// Validate checks the configuration; every error names its field.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Config.Check(); err != nil {
		errs = append(errs, err)
	}
	if c.Scope.LabelSelector != "" {
		if _, err := labels.Parse(c.Scope.LabelSelector); err != nil {
			errs = append(errs, fmt.Errorf("scope.label_selector: %w", err))
		}
	}
	if c.Scope.Namespace != "" {
		if msgs := validation.IsDNS1123Label(c.Scope.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("scope.namespace: %q is not a namespace name: %s", c.Scope.Namespace, strings.Join(msgs, "; ")))
		}
	}
	if c.Scope.NodeName != "" {
		if msgs := validation.IsDNS1123Subdomain(c.Scope.NodeName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("scope.node_name: %q is not a node name: %s", c.Scope.NodeName, strings.Join(msgs, "; ")))
		}
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
			errs = append(errs, fmt.Errorf("pod_labels[%d]: %q is not a label key: %s", i, l, strings.Join(msgs, "; ")))
		}
		if j, dup := seenLabel[l]; dup {
			errs = append(errs, fmt.Errorf("pod_labels[%d]: %q repeats pod_labels[%d]", i, l, j))
		}
		seenLabel[l] = i
	}
	if len(c.Attributes) == 0 {
		errs = append(errs, errors.New("attributes: empty; list the identity attributes to write (default: all)"))
	}
	for i, a := range c.Attributes {
		if !slices.Contains(allAttributes, a) {
			errs = append(errs, fmt.Errorf("attributes[%d]: unknown attribute %q; want one of %s", i, a, strings.Join(allAttributes, ", ")))
		}
	}
	if len(c.Rules) == 0 {
		errs = append(errs, errors.New("rules: empty; the processor would change nothing (remove the key to get the default rules)"))
	}
	type ruleKey struct {
		from SourceKind
		attr string
	}
	seen := map[ruleKey]int{}
	for i, r := range c.Rules {
		if r == (RuleConfig{}) {
			errs = append(errs, fmt.Errorf("rules[%d]: empty rule; set from, attribute and prefix", i))
			continue
		}
		switch {
		case r.From == "":
			errs = append(errs, fmt.Errorf("rules[%d].from: missing; want one of %s", i, sourceKindList()))
		case !r.From.valid():
			errs = append(errs, fmt.Errorf("rules[%d].from: unknown source kind %q; want one of %s", i, r.From, sourceKindList()))
		}
		if strings.TrimSpace(r.Attribute) == "" {
			errs = append(errs, fmt.Errorf("rules[%d].attribute: missing; name the attribute that holds the address", i))
		}
		if err := validatePrefix(r.Prefix); err != nil {
			errs = append(errs, fmt.Errorf("rules[%d].prefix: %w", i, err))
		}
		k := ruleKey{r.From, r.Attribute}
		if j, dup := seen[k]; dup {
			errs = append(errs, fmt.Errorf("rules[%d]: same from and attribute as rules[%d] (%s %q)", i, j, r.From, r.Attribute))
		} else {
			seen[k] = i
		}
	}
	return errors.Join(errs...)
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
