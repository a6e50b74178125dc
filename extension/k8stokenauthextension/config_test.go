// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/netpulse/netpulse/extension/k8stokenauthextension/internal/metadata"
	"github.com/netpulse/netpulse/internal/kubeclient"
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
	want := createDefaultConfig().(*Config)
	want.Audience = "netpulse-gateway"
	want.ServiceAccounts = []string{"netpulse/netpulse-agent"}
	assert.Equal(t, want, def)
	assert.Equal(t, kubeclient.AuthServiceAccount, def.AuthType)
	assert.Equal(t, 5*time.Minute, def.Cache.MaxTTL)
	assert.Equal(t, 10*time.Minute, def.Cache.StaleIfError)
	assert.Equal(t, VerificationLocal, def.Verification, "local verification (TokenReview when undecided) is the default")
	assert.Equal(t, 10*time.Second, def.Keys.MinRefetchInterval)

	custom, err := loadConfig(t, "custom")
	require.NoError(t, err)
	assert.Equal(t, &Config{
		Config:               kubeclient.Config{AuthType: kubeclient.AuthKubeConfig, Kubeconfig: "/etc/netpulse/kubeconfig", QPS: 50, Burst: 100},
		Verification:         VerificationReview,
		Keys:                 KeysConfig{RefreshInterval: time.Hour, MinRefetchInterval: 30 * time.Second},
		Audience:             "netpulse-gateway",
		ServiceAccounts:      []string{"netpulse/netpulse-agent", "monitoring/netpulse-agent", "shop/web", "netpulse/netpulse-gateway"},
		AgentServiceAccounts: []string{"netpulse/netpulse-agent", "monitoring/netpulse-agent"},
		RelayServiceAccounts: []string{"netpulse/netpulse-gateway"},
		Issuer:               "https://kubernetes.default.svc.cluster.local",
		Cache:                CacheConfig{MaxEntries: 100, MaxNegativeEntries: 50, MaxTTL: time.Minute, NegativeTTL: 0},
		MaxConcurrentReviews: 2,
		ReviewTimeout:        2 * time.Second,
		PeerReviews:          PeerReviewsConfig{Rate: 0.5, Burst: 3},
	}, custom)
	assert.Equal(t, []string{"netpulse/netpulse-agent"}, def.agentAccounts(), "one account: the agents'")
}

func TestValidateNamesEveryField(t *testing.T) {
	_, err := loadConfig(t, "invalid")
	require.Error(t, err)
	requireProblems(t, err,
		`auth_type: "bogus"`, `audience: "net pulse" contains white space`,
		`service_accounts::0: "no-slash": want "namespace/name"`, `service_accounts::1: namespace "Bad_NS"`, `service_accounts::2: name ""`,
		`agent_service_accounts::0: "netpulse/netpulse-agent" is not in service_accounts`,
		`relay_service_accounts::0: "netpulse/netpulse-gateway" is not in service_accounts`,
		`issuer: "https://kubernetes .default" contains white space`,
		`verification: "offline": want "local"`,
		"keys: refresh_interval: 1s out of range [1m, 24h]", "keys: min_refetch_interval: 0s out of range [1s, 10m]",
		"cache: max_entries: 0 out of range [1, 1000000]", "cache: max_negative_entries: 0 out of range [1, 1000000]",
		"cache: max_ttl: 2h0m0s out of range [1s, 1h]",
		"peer_reviews: rate: 0 out of range (0, 100]", "peer_reviews: burst: 0 out of range [1, 1000]",
		"cache: negative_ttl: -1s out of range [0, 5m]", "cache: stale_if_error: 2h0m0s out of range [0, 1h]",
		"max_concurrent_reviews: 0 out of range [1, 64]", "review_timeout: 10ms out of range [100ms, 1m]",
	)
	// Each error once, under its own name (not again under a "config::" path).
	assert.Equal(t, 1, strings.Count(err.Error(), `auth_type: "bogus"`), err.Error())
	assert.NotContains(t, err.Error(), "config::")

	_, err = loadConfig(t, "ambiguous")
	requireProblems(t, err, `agent_service_accounts: required when service_accounts names more than one account`)

	_, err = loadConfig(t, "relayagent")
	requireProblems(t, err, `relay_service_accounts::0: "netpulse/netpulse-agent" is an agents' account`)

	_, err = loadConfig(t, "empty")
	requireProblems(t, err, "audience: required", "service_accounts: required")
}

// requireProblems asserts that each want begins one of the problems err reports, read with
// its whole path (a struct's path from the validation walk, then the field), and that no
// problem is reported twice.
func requireProblems(t *testing.T, err error, wants ...string) {
	t.Helper()
	require.NoError(t, kubeclient.MatchProblems(err, wants...))
}
