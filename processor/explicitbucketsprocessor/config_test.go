// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package explicitbucketsprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/netpulse/netpulse/processor/explicitbucketsprocessor/internal/metadata"
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
	require.Equal(t, createDefaultConfig(), def)
	b := def.Bounds()
	require.Len(t, b, 19)
	require.Equal(t, 0x1p-15, b[0])
	require.Equal(t, 1.0, b[15])
	require.Equal(t, 8.0, b[18])

	c, err := loadConfig(t, "custom")
	require.NoError(t, err)
	require.Equal(t, &Config{Metrics: []string{"netpulse.probe.duration", "other.duration"}, MinExponent: -20, MaxExponent: 4, BucketsPerOctave: 2}, c)
	b = c.Bounds()
	require.Len(t, b, 49)
	require.InDelta(t, 0x1p-20*1.4142135623730951, b[1], 1e-18)

	for name, want := range map[string]string{
		"too_many":   "at most 64",
		"bad_octave": "buckets_per_octave: 3",
		"inverted":   "must be below max_exponent",
	} {
		_, err := loadConfig(t, name)
		require.ErrorContains(t, err, want, name)
	}
}
