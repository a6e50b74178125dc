// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpulseviewextension

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/netpulse/netpulse/extension/netpulseviewextension/internal/metadata"
	"github.com/netpulse/netpulse/internal/kubeclient"
)

func load(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config)
}

func TestDefaults(t *testing.T) {
	cfg := load(t, "")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "localhost:8089", cfg.NetAddr.Endpoint)
	assert.Equal(t, kubeclient.AuthServiceAccount, cfg.AuthType)
	assert.Equal(t, "netpulse.io/PodNetworkProblem", cfg.NodeConditionType)
	assert.Equal(t, "app.kubernetes.io/part-of=netpulse,app.kubernetes.io/component=agent", cfg.PodSelector)
	assert.Equal(t, 2*time.Second, cfg.RefreshInterval)
	assert.Equal(t, 150, cfg.MaxMatrixNodes)
	assert.Empty(t, cfg.Namespace)
	assert.Empty(t, cfg.AllowedHosts, "IP literals and localhost only")
	assert.Equal(t, LiveConfig{Enabled: true, MaxCells: 1_000_000, MaxAge: 10 * time.Minute}, cfg.Live)
}

func TestEverySetting(t *testing.T) {
	cfg := load(t, "custom")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "0.0.0.0:9000", cfg.NetAddr.Endpoint)
	assert.Equal(t, kubeclient.AuthKubeConfig, cfg.AuthType)
	assert.Equal(t, "/etc/netpulse/kubeconfig", cfg.Kubeconfig)
	assert.Equal(t, float32(2), cfg.QPS)
	assert.Equal(t, 4, cfg.Burst)
	assert.Equal(t, "netpulse", cfg.Namespace)
	assert.Equal(t, "example.com/NetworkProblem", cfg.NodeConditionType)
	assert.Equal(t, "app=agent", cfg.PodSelector)
	assert.Equal(t, 5*time.Second, cfg.RefreshInterval)
	assert.Equal(t, 300, cfg.MaxMatrixNodes)
	assert.Equal(t, []string{"netpulse.example.com", "*.view.example.org"}, cfg.AllowedHosts)
	assert.Equal(t, LiveConfig{Enabled: true, MaxCells: 25_000_000, MaxAge: 5 * time.Minute}, cfg.Live)
}

func TestInvalidNamesEveryField(t *testing.T) {
	err := load(t, "invalid").Validate()
	require.Error(t, err)
	for _, want := range []string{
		`auth_type: "bogus" is not supported`,
		"endpoint: required",
		`namespace: "Not_A_Namespace"`,
		`node_condition_type: "has spaces"`,
		`pod_selector: "a in (b"`,
		"refresh_interval: 10ms out of range",
		"max_matrix_nodes: 5 out of range",
		`allowed_hosts::0: "netpulse.example.com:8089"`,
		"live::max_cells: 10 out of range",
		"live::max_age: 1s out of range",
	} {
		assert.ErrorContains(t, err, want)
	}
	cfg := load(t, "")
	cfg.PodSelector = "-"
	assert.NoError(t, cfg.Validate(), "- turns the pod informer off")
	cfg = load(t, "invalid")
	cfg.Live.Enabled = false
	assert.NotContains(t, cfg.Validate().Error(), "live::", "the bounds of a disabled live matrix do not matter")
}
