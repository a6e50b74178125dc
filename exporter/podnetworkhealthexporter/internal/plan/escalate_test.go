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

// A stable pair whose failed round was judged before its target's quorum came in turns
// Unreachable with the target's verdict, not at its own next round: at 65,000 nodes the
// rotating observers' votes arrive after the stable observer's within a round, and the
// stable pair's status reached the API two intervals after the verdict.
func TestStablePairEscalatedWithItsTargetsLateQuorum(t *testing.T) {
	r := newRing(50, 3)
	e := New(verdict.Config{})
	for round := range 5 {
		e.Observe(r.round(round, healthy), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	dead := 7
	fault := func(_, d int) bool { return d != dead }
	obs := r.round(5, fault)
	stableKey := observation.KeyOf(&observation.Observation{Source: r.src(dead - 1), Target: r.tgt(dead)})
	var first, rest []observation.Observation
	for _, o := range obs {
		if observation.KeyOf(&o) == stableKey {
			first = append(first, o)
		} else {
			rest = append(rest, o)
		}
	}
	require.Len(t, first, 1)
	e.Observe(first, r.at(5))
	res := e.Reconcile(r.at(5).Add(100 * time.Millisecond))
	for _, w := range res.Objects {
		require.NotEqual(t, observation.VerdictUnreachable, w.Summary.Verdict, "one failed round is no verdict yet")
	}
	e.Observe(rest, r.at(5))
	res = e.Reconcile(r.at(5).Add(time.Second))
	ts, ok := e.Target(verdict.TargetKeyOf(&observation.Observation{Target: r.tgt(dead)}))
	require.True(t, ok)
	require.Equal(t, observation.VerdictUnreachable, ts.Verdict)
	var written bool
	for _, w := range res.Objects {
		if w.Key == stableKey {
			written = true
			assert.Equal(t, observation.VerdictUnreachable, w.Summary.Verdict)
			assert.Equal(t, PriorityVerdict, w.Priority)
		}
	}
	assert.True(t, written, "the stable pair's Unreachable status is written with its target's verdict")
}
