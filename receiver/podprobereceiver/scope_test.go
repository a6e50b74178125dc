// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// The gateway's admission gives pod_probe metrics this scope name; it must be the
// receiver's own.
func TestScopeNameIsTheContracts(t *testing.T) {
	require.Equal(t, contract.ProbeScopeName, metadata.ScopeName)
}
