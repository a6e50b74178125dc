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
	"github.com/netpulse/netpulse/internal/contract"
)

// A stable pair's path-MTU probes: one black hole is not reported (a lost burst), two in a
// row are, at once (a write); an ok probe clears it, at once; a takeover keeps it.
func TestPathMTUBlackHoleOnTheStablePair(t *testing.T) {
	r := newRing(10, 3)
	e := New(verdict.Config{})
	key := observation.KeyOf(&observation.Observation{Source: r.src(2), Target: r.tgt(3)})
	mtu := map[int]observation.PathMTU{
		3: {Status: contract.PathMTUBlackHole, Bytes: 1280},
		5: {Status: contract.PathMTUBlackHole, Bytes: 1280},
		7: {Status: contract.PathMTUOK, Bytes: 1450},
	}
	var writes []ObjectWrite
	last := map[observation.PairKey]ObjectWrite{}
	for round := 0; round < 9; round++ {
		obs := r.round(round, healthy)
		if m, ok := mtu[round]; ok {
			for i := range obs {
				if observation.KeyOf(&obs[i]) == key {
					obs[i].PathMTU = m
				}
			}
		}
		e.Observe(obs, r.at(round))
		res := e.Reconcile(r.at(round).Add(time.Second))
		for _, w := range res.Objects {
			last[w.Key] = w
			if w.Key == key && round >= 3 {
				writes = append(writes, w)
			}
		}
		s, ok := e.Summary(key)
		require.True(t, ok)
		assert.Equal(t, round >= 5 && round < 7, s.MTUBlackHole, "round %d", round)
		if round == 6 {
			assert.Equal(t, 1280, s.MTUPasses)
			// A takeover in the black hole: the new writer keeps it, writes nothing.
			b := New(verdict.Config{})
			persisted := persistedOf(last)
			for i := range persisted {
				if persisted[i].Key == key {
					persisted[i].MTUPasses = 1280
					persisted[i].DegradedFamilies = DegradedMTU
				}
			}
			b.Resume(persisted, r.at(round).Add(2*time.Second))
			b.Observe(r.round(round+1, healthy), r.at(round+1))
			for _, w := range b.Reconcile(r.at(round + 1).Add(time.Second)).Objects {
				assert.NotEqual(t, key, w.Key, "the black hole survives the takeover without a rewrite")
			}
		}
	}
	require.Len(t, writes, 2, "reported, then cleared: %+v", writes)
	assert.True(t, writes[0].Summary.MTUBlackHole)
	assert.False(t, writes[1].Summary.MTUBlackHole)
}

// A pair that loses half of its echoes at random loses both large echoes of a path-MTU
// probe 1 time in 4 while a small one comes back: two such probes in a row are chance, not a
// black hole (found end to end: a node losing half of its input read MTUBlackHole). The
// pair's window loss sets how many black holes in a row it needs; a long enough run still
// reads as one.
func TestPathMTUBlackHoleNeedsMoreOnALossyPair(t *testing.T) {
	r := newRing(10, 3)
	e := New(verdict.Config{})
	key := observation.KeyOf(&observation.Observation{Source: r.src(2), Target: r.tgt(3)})
	lossy := func(round int, obs []observation.Observation) {
		for i := range obs {
			if observation.KeyOf(&obs[i]) == key {
				obs[i].Lost = []uint64{1, 2, 1, 2}[round%4] // half of 3 echoes on average, answered
				if round >= 12 {
					obs[i].PathMTU = observation.PathMTU{Status: contract.PathMTUBlackHole, Bytes: 1280}
				}
			}
		}
	}
	holes := 0
	for round := 0; round < 80; round++ {
		obs := r.round(round, healthy)
		lossy(round, obs)
		e.Observe(obs, r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
		s, ok := e.Summary(key)
		require.True(t, ok)
		if round >= 12 {
			holes++
		}
		if holes <= 3 {
			assert.False(t, s.MTUBlackHole, "round %d: %d black holes in a row on a pair losing half of its echoes", round, holes)
		}
		if round == 79 {
			assert.True(t, s.MTUBlackHole, "%d black holes in a row are one", holes)
		}
	}
}
