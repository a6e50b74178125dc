// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix

import (
	"cmp"
	"slices"
	"strings"
)

// Top lists the n worst pairs (every pair when n <= 0): by loss, then by RTT p50,
// highest first; Unreachable pairs without a loss figure count as loss 1, pairs with
// neither figure come last. Ties are ordered by namespace and name.
func (m *Model) Top(n int) []Pair {
	idx := make([]int, len(m.Pairs))
	for i := range idx {
		idx[i] = i
	}
	loss := func(p *Pair) float64 {
		switch {
		case p.HasLoss:
			return p.Loss
		case p.Verdict == Unreachable:
			return 1
		}
		return -1
	}
	slices.SortFunc(idx, func(a, b int) int {
		pa, pb := &m.Pairs[a], &m.Pairs[b]
		return cmp.Or(
			-cmp.Compare(loss(pa), loss(pb)),
			-cmp.Compare(pa.p50, pb.p50),
			-cmp.Compare(pa.Verdict.Severity(), pb.Verdict.Severity()),
			strings.Compare(pa.Namespace, pb.Namespace),
			strings.Compare(pa.Name, pb.Name),
		)
	})
	if n > 0 && n < len(idx) {
		idx = idx[:n]
	}
	out := make([]Pair, 0, len(idx))
	for _, i := range idx {
		out = append(out, m.Pairs[i])
	}
	return out
}
