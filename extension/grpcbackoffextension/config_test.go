// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package grpcbackoffextension

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/netpulse/netpulse/extension/grpcbackoffextension/internal/metadata"
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

func TestDefaultsAreGRPCsButMaxDelay(t *testing.T) {
	cfg := load(t, "")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, &Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 10 * time.Second, MinConnectTimeout: 20 * time.Second}, cfg)
}

func TestEverySetting(t *testing.T) {
	cfg := load(t, "custom")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, &Config{BaseDelay: 500 * time.Millisecond, Multiplier: 2, Jitter: 0.5, MaxDelay: 30 * time.Second, MinConnectTimeout: 5 * time.Second}, cfg)
}

func TestInvalidSettingsAreEachNamed(t *testing.T) {
	err := confmap.Validate(load(t, "invalid"))
	require.Error(t, err)
	for _, want := range []string{
		"base_delay must be positive, got 0s",
		"multiplier must be at least 1, got 0.5",
		"jitter must be in [0, 1], got 2",
		"max_delay (-1s) must be at least base_delay (0s)",
		"min_connect_timeout must be positive, got 0s",
	} {
		assert.Contains(t, err.Error(), want)
	}
}
