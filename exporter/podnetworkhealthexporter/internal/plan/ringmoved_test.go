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

// A stable pair whose observer's ring moved off it (its peer's pod replaced in a roll) loses
// its object within a few rounds instead of TargetTTL, so that a roll does not pile up
// objects beyond (M+1)·N; a pair its observer skipped for fewer than RingMovedRounds rounds
// keeps its object (no delete and re-create); a pair that was failing when the ring moved
// stays readable for FailingPairRetention like any failing pair, unless its failures began
// only once the gateway's index found the target pod leaving (the deletion's failures).
func TestRingMovedOffDropsTheOldStablePair(t *testing.T) {
	r := newRing(10, 3)
	const replacedAt, skipFrom, skipTo = 8, 20, 22 // node-5's pod replaced at round 8; 7→8 skipped in rounds 20-21
	replaced := func(obs []observation.Observation) []observation.Observation {
		for i := range obs {
			if obs[i].Source.Node == "node-5" {
				obs[i].Source.Name, obs[i].Source.UID = "agent-5b", "uid-5b"
			}
			if obs[i].Target.Node == "node-5" {
				obs[i].Target.Name, obs[i].Target.UID = "agent-5b", "uid-5b"
			}
		}
		return obs
	}
	// failing: 4→5 fails in the three rounds before the replacement; leaving: the gateway's
	// index found agent-5 terminating from the first of them (a deletion's failures).
	run := func(failing, leaving bool) (deletedAt map[string]int, live map[observation.PairKey]ObjectWrite) {
		e := New(verdict.Config{})
		deletedAt = map[string]int{}
		live = map[observation.PairKey]ObjectWrite{}
		for round := range 40 {
			ok := healthy
			if failing && round >= replacedAt-3 && round < replacedAt {
				ok = func(s, d int) bool { return !(s == 4 && d == 5) }
			}
			obs := r.round(round, ok)
			if leaving && round >= replacedAt-3 && round < replacedAt {
				for i := range obs {
					obs[i].TargetLeaving = obs[i].Target.Name == "agent-5"
				}
			}
			if round >= replacedAt {
				obs = replaced(obs)
			}
			if round >= skipFrom && round < skipTo {
				var kept []observation.Observation
				for _, o := range obs {
					if !(o.Source.Name == "agent-7" && o.Target.Name == "agent-8" && o.Stable) {
						kept = append(kept, o)
					}
				}
				obs = kept
			}
			e.Observe(obs, r.at(round))
			for _, w := range e.Reconcile(r.at(round).Add(time.Second)).Objects {
				if w.Delete {
					delete(live, w.Key)
					deletedAt[w.Key.SourcePod+"→"+w.Key.TargetName] = round
				} else {
					live[w.Key] = w
				}
			}
		}
		return deletedAt, live
	}

	deletedAt, live := run(false, false)
	at, ok := deletedAt["agent-4→agent-5"]
	require.True(t, ok, "agent-4's old stable pair (towards the replaced pod) was never deleted in 40 rounds")
	assert.LessOrEqual(t, at, replacedAt+verdict.RingMovedRounds+2, "deleted within a few rounds of the replacement, not TargetTTL (%v)", verdict.DefaultTargetTTL)
	_, churn := deletedAt["agent-7→agent-8"]
	assert.False(t, churn, "a stable pair skipped for %d rounds is kept", skipTo-skipFrom)
	pairs := map[string]bool{}
	for k := range live {
		pairs[k.SourcePod+"→"+k.TargetName] = true
	}
	assert.True(t, pairs["agent-4→agent-5b"], "the new stable pair has its object")
	assert.True(t, pairs["agent-7→agent-8"])

	deletedAt, _ = run(true, false)
	_, dropped := deletedAt["agent-4→agent-5"]
	assert.False(t, dropped, "a pair failing when its ring moved is kept for FailingPairRetention (%v)", verdict.DefaultFailingPairRetention)

	deletedAt, _ = run(true, true)
	at, dropped = deletedAt["agent-4→agent-5"]
	require.True(t, dropped, "a pair that failed only once its target pod was leaving is not held for the failing pairs' retention")
	assert.LessOrEqual(t, at, replacedAt+verdict.RingMovedRounds+2)
}
