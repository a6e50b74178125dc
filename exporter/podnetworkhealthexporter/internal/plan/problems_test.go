// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// pair_objects: problems. A healthy ring writes no object at all; a dead target's stable
// pair gets its object in the round it dies, at verdict priority, with the outage Event;
// healed, the object reads Reachable and is deleted once it has been clean for the
// retention, while the pair goes on being judged (a second outage gets a new object).
func TestProblemsOnlyWritesOnlyProblems(t *testing.T) {
	r := newRing(30, 3)
	const retention = 3 * time.Minute
	e := New(verdict.Config{ProblemsOnly: true, FailingPairRetention: retention})
	step := func(round int, ok func(int, int) bool) Result {
		e.Observe(r.round(round, ok), r.at(round))
		return e.Reconcile(r.at(round).Add(time.Second))
	}
	for round := range 20 {
		res := step(round, healthy)
		require.Empty(t, res.Objects, "a healthy ring writes nothing: round %d", round)
	}
	assert.Equal(t, r.n, e.Stats().StablePairs, "the stable pairs are judged all the same")

	dead := 7
	fault := func(_, d int) bool { return d != dead }
	stableKey := observation.KeyOf(&observation.Observation{Source: r.src(dead - 1), Target: r.tgt(dead)})
	res := step(20, fault)
	require.NotEmpty(t, res.Objects)
	assert.Equal(t, stableKey, res.Objects[0].Key)
	assert.Equal(t, observation.VerdictUnreachable, res.Objects[0].Summary.Verdict)
	assert.Equal(t, PriorityVerdict, res.Objects[0].Priority, "a problem's first write is a verdict")
	require.Len(t, res.Events, 1, "the outage Event of the new object")
	for _, w := range res.Objects {
		assert.Equal(t, observation.VerdictUnreachable, w.Summary.Verdict, "only the failing pair: %s", w.Key)
	}

	// Healed: the recovery is written; the object stays for the retention, then goes.
	var deletedAt time.Time
	round := 21
	for ; round < 21+int(2*retention/r.iv); round++ {
		res = step(round, healthy)
		for _, w := range res.Objects {
			require.Equal(t, stableKey, w.Key)
			if w.Delete {
				deletedAt = r.at(round)
			}
		}
		if !deletedAt.IsZero() {
			break
		}
	}
	require.False(t, deletedAt.IsZero(), "the healed object was never deleted")
	held := deletedAt.Sub(r.at(20))
	assert.GreaterOrEqual(t, held, retention, "kept the retention after its last failure")
	assert.Less(t, held, retention+time.Minute)
	assert.NotContains(t, e.ObjectKeys(), stableKey)
	assert.Zero(t, e.Objects())
	s, ok := e.Summary(stableKey)
	require.True(t, ok, "the pair is still judged")
	assert.Equal(t, observation.VerdictReachable, s.Verdict)

	// Nothing more while healthy; a second outage writes a new object.
	for range 5 {
		round++
		require.Empty(t, step(round, healthy).Objects)
	}
	round++
	res = step(round, fault)
	require.NotEmpty(t, res.Objects)
	assert.Equal(t, stableKey, res.Objects[0].Key)
	assert.False(t, res.Objects[0].Delete)
}
