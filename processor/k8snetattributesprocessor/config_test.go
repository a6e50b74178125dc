// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config), confmap.Validate(cfg)
}

func TestLoadConfig(t *testing.T) {
	def, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, createDefaultConfig(), def)
	assert.Equal(t, DefaultRules(), def.Rules)
	assert.Equal(t, kubeclient.AuthServiceAccount, def.AuthType)
	assert.True(t, def.Scope.WatchNodes)
	assert.False(t, def.WaitForSync)
	assert.Equal(t, 30*time.Second, def.DeletedPodGrace)

	gw, err := loadConfig(t, "gateway")
	require.NoError(t, err)
	assert.Equal(t, &Config{
		Config:             kubeclient.Config{AuthType: kubeclient.AuthServiceAccount, QPS: 20, Burst: 40},
		Scope:              ScopeConfig{WatchNodes: true},
		WaitForSync:        true,
		WaitForSyncTimeout: 30 * time.Second,
		DeletedPodGrace:    time.Minute,
		PodLabels:          []string{"app.kubernetes.io/name", "team"},
		Attributes:         []string{"k8s.pod.name", "k8s.namespace.name", "k8s.node.name", "k8s.deployment.name", "cloud.availability_zone"},
		Rules: []RuleConfig{
			{From: SourceResource, Attribute: "k8s.pod.ip"},
			{From: SourceDataPoint, Attribute: "destination.address", Prefix: "destination."},
			{From: SourceSpan, Attribute: "server.address", Prefix: "server."},
		},
		Admission: AdmissionConfig{
			Enabled: true, MaxDataPointsPerRequest: 10000, MaxTargetsPerRound: 64, MaxStableTargetsPerSource: 6,
			MaxExternalTargetsPerSource: 8, MaxSources: 10000, IdleTTL: 3 * time.Minute,
			DeclaredExternalTargets:    []string{"10.96.0.10", "192.0.2.0/24", "example.com"},
			RequireAuthenticatedSource: true,
		},
	}, gw)

	agent, err := loadConfig(t, "agent")
	require.NoError(t, err)
	assert.Equal(t, kubeclient.AuthKubeConfig, agent.AuthType)
	assert.Equal(t, "/etc/netpulse/kubeconfig", agent.Kubeconfig)
	assert.Equal(t, ScopeConfig{NodeName: "node-17", LabelSelector: "app.kubernetes.io/name=netpulse-agent", WatchNodes: false}, agent.Scope)
	assert.Equal(t, DefaultRules(), agent.Rules, "rules not set: defaults")
}

// requireProblems asserts that each want begins one of the problems err reports, read with
// its whole path (a struct's path from the validation walk, then the field), and that no
// problem is reported twice.
func requireProblems(t *testing.T, err error, wants ...string) {
	t.Helper()
	require.NoError(t, kubeclient.MatchProblems(err, wants...))
}

func TestAdmissionConfigErrorsNameTheField(t *testing.T) {
	_, err := loadConfig(t, "bad_admission")
	requireProblems(t, err,
		"admission: max_targets_per_round: 0 out of range [1, 65536]",
		"admission: max_sources: -1 out of range [1, 1048576]",
		"admission: idle_ttl: 1s out of range [10s, 24h]",
		`admission: declared_external_targets::0: "10.0.0.0/33" is neither an IP, a CIDR nor a host name`,
		"admission: needs the data point rule destination.address -> destination.",
	)

	// Disabled admission is not checked.
	cfg := createDefaultConfig()
	cfg.Admission = AdmissionConfig{MaxSources: -1, DeclaredExternalTargets: []string{"10.0.0.0/33"}}
	cfg.Rules = []RuleConfig{{From: SourceSpan, Attribute: "server.address", Prefix: "server."}}
	require.NoError(t, confmap.Validate(cfg))
}

func TestConfigErrorsNameTheField(t *testing.T) {
	_, err := loadConfig(t, "bad_rules")
	requireProblems(t, err,
		`rules::1: prefix: "dest" must be empty or end with "." (e.g. "dest.")`,
		`rules::2: from: unknown source kind "span_event"; want one of resource, datapoint, span, log`,
		`rules::3: empty rule; set from, attribute and prefix`,
		`rules::4: attribute: missing; name the attribute that holds the address`,
		`rules::5: same from and attribute as rules::1 (datapoint "destination.address")`,
	)
	assert.NotContains(t, err.Error(), "rules::0")

	_, err = loadConfig(t, "bad_other")
	requireProblems(t, err,
		`auth_type: "token" is not supported`,
		`scope: label_selector: `,
		`deleted_pod_grace: -1s must not be negative`,
		`wait_for_sync_timeout: 0s must be positive when wait_for_sync is true`,
		`pod_labels::0: "bad key!" is not a label key`,
		`pod_labels::2: "team" repeats pod_labels::1`,
		`attributes::1: unknown attribute "k8s.pod.ip"; want one of k8s.pod.name, `,
	)
}

func TestValidateMore(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Rules = nil
	requireProblems(t, confmap.Validate(cfg), "rules: empty")

	cfg = createDefaultConfig()
	cfg.Attributes = nil
	requireProblems(t, confmap.Validate(cfg), "attributes: empty")

	cfg = createDefaultConfig()
	cfg.PodLabels = make([]string, maxPodLabels+1)
	for i := range cfg.PodLabels {
		cfg.PodLabels[i] = fmt.Sprintf("l%d", i)
	}
	requireProblems(t, confmap.Validate(cfg), fmt.Sprintf("pod_labels: %d labels; at most %d", maxPodLabels+1, maxPodLabels))

	cfg = createDefaultConfig()
	cfg.Rules = []RuleConfig{{Attribute: "a", Prefix: "x."}}
	requireProblems(t, confmap.Validate(cfg), "rules::0: from: missing; want one of resource, datapoint, span, log")

	for prefix, want := range map[string]string{
		".dst.":     "has an empty segment",
		"dst..x.":   "has an empty segment",
		"my dest.":  "contains whitespace",
		"dst\t.":    "contains whitespace",
		"dst":       `must be empty or end with "."`,
		"peer.k8s.": "",
	} {
		cfg = createDefaultConfig()
		cfg.Rules = []RuleConfig{{From: SourceSpan, Attribute: "a", Prefix: prefix}}
		err := confmap.Validate(cfg)
		if want == "" {
			assert.NoError(t, err, prefix)
		} else {
			requireProblems(t, err, fmt.Sprintf("rules::0: prefix: %q ", prefix))
			assert.ErrorContains(t, err, want, prefix)
		}
	}

	cfg = createDefaultConfig()
	cfg.Scope.Namespace = "Not_A_Namespace"
	cfg.Scope.NodeName = "node 1"
	requireProblems(t, confmap.Validate(cfg),
		`scope: namespace: "Not_A_Namespace" is not a namespace name`,
		`scope: node_name: "node 1" is not a node name`,
	)

	cfg = createDefaultConfig()
	cfg.Admission = AdmissionConfig{
		Enabled: true, MaxDataPointsPerRequest: 0, MaxTargetsPerRound: 1, MaxStableTargetsPerSource: 4097,
		MaxExternalTargetsPerSource: 0, MaxSources: 1, IdleTTL: time.Minute,
		DeclaredExternalTargets: []string{"*", "example.com", "192.0.2.0/24", "bad name!"},
	}
	requireProblems(t, confmap.Validate(cfg),
		"admission: max_data_points_per_request: 0 out of range [1, 1048576]",
		"admission: max_stable_targets_per_source: 4097 out of range [1, 4096]",
		"admission: max_external_targets_per_source: 0 out of range [1, 4096]",
		`admission: declared_external_targets::3: "bad name!" is neither an IP, a CIDR nor a host name`,
	)
}
