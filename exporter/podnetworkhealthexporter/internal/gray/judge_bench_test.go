// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package gray

import (
	"math/rand/v2"
	"testing"
	"time"
)

// What one judgement costs on a healthy node's windows (half an hour of 0.1 % background,
// 4 peers a round on each side): one side alone (Judge, the rule before the node's two
// sides were judged together) against JudgeNode with the other side. Run: go test -run
// '^$' -bench BenchmarkJudge ./exporter/podnetworkhealthexporter/internal/gray/
func BenchmarkJudge(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	tw, ow := NewWindow(60, 30*time.Second), NewWindow(60, 30*time.Second)
	var tc, oc Contributors
	var at time.Time
	for r := range 180 {
		at = t0.Add(time.Duration(r) * 10 * time.Second)
		nodeRound(rng, tw, ow, &tc, &oc, at, 0.001, 4, 3)
	}
	_, top := tc.Top()
	all := ExcludingAcross(nodeOf, nil, &tc, &oc)
	others := []*Window{ow}
	b.Run("one-side", func(b *testing.B) {
		var l Loss
		for range b.N {
			LossConfig{}.Judge(&l, tw, top, at)
		}
	})
	b.Run("both-sides", func(b *testing.B) {
		var l Loss
		for range b.N {
			LossConfig{}.JudgeNode(&l, tw, top, others, all, at)
		}
	})
}
