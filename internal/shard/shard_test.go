// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOfIsStableAndInRange(t *testing.T) {
	require.Equal(t, 0, Of("node-1", 1))
	require.Equal(t, 0, Of("node-1", 0))
	require.Equal(t, 0, Of("", 8))
	for n := 2; n <= MaxCount; n++ {
		for i := range 100 {
			key := fmt.Sprintf("node-%d", i)
			s := Of(key, n)
			require.GreaterOrEqual(t, s, 0)
			require.Less(t, s, n)
			require.Equal(t, s, Of(key, n), "a pure function")
		}
	}
	// Pinned: agents and gateways of different builds must agree.
	require.Equal(t, 1, Of("node-1", 2))
	require.Equal(t, 0, Of("node-2", 2))
}

// The share of each shard at 65,000 nodes with 8 shards stays within 5 % of 1/8: no shard
// carries much more than its share of the targets (docs/sharding.md).
func TestOfSpreadsNodesEvenly(t *testing.T) {
	const nodes, count = 65000, 8
	per := make([]int, count)
	for i := range nodes {
		per[Of(fmt.Sprintf("gke-pool-%d-%05d", i%7, i), count)]++
	}
	for s, n := range per {
		require.InDelta(t, float64(nodes)/count, float64(n), 0.05*nodes/count, "shard %d", s)
	}
}
