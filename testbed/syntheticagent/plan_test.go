// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package syntheticagent

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Plan gives each agent K + M distinct peers a round, never itself, the stable ones every
// round, and spreads the rotating probes evenly: every pod is probed by K rotating agents.
func TestPlan(t *testing.T) {
	for _, n := range []int{ShippedK + ShippedStablePeers + 2, 7, 1000} {
		for r := range 40 {
			probedBy := make([]int, n)
			for i := range n {
				stable, rotating := Plan(i, n, r)
				require.Len(t, stable, ShippedStablePeers)
				require.Len(t, rotating, ShippedK)
				seen := map[int]bool{i: true}
				for _, p := range append(slices.Clone(stable), rotating...) {
					require.False(t, seen[p], "n=%d r=%d agent %d: peer %d twice or itself", n, r, i, p)
					seen[p] = true
				}
				s0, _ := Plan(i, n, r+1)
				require.Equal(t, stable, s0, "stable peers change between rounds")
				for _, p := range rotating {
					probedBy[p]++
				}
			}
			for p, c := range probedBy {
				require.Equal(t, ShippedK, c, "n=%d r=%d: pod %d probed by %d rotating agents", n, r, p, c)
			}
		}
	}
}
