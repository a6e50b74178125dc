// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
)

// A Kubernetes client setting that is wrong is reported once, under its own name (not a
// second time under a "config::" path).
func TestKubeClientErrorReportedOnce(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.AuthType = "bogus"
	err := confmap.Validate(cfg)
	require.Error(t, err)
	require.Equal(t, 1, strings.Count(err.Error(), "auth_type: \"bogus\""), err.Error())
	require.NotContains(t, err.Error(), "config::")
}
