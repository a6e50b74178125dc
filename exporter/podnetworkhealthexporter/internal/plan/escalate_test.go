// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"strings"
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

// v6 turns an observation into its IPv6 twin.
func v6(o observation.Observation) observation.Observation {
	o.Target.Address = "fd00::" + o.Target.Address[len("10.0."):]
	o.Target.Address = strings.ReplaceAll(o.Target.Address, ".", ":")
	return o
}

// A dual-stack pod dies; its rotating observers probe IPv4 and its stable pair IPv6. The
// stable pair turns Unreachable with the IPv4 target's verdict, not after its own 3 failed
// rounds: at 65,000 nodes (the shard simulation) the IPv4 target was Unreachable 9 s after
// the fault and the IPv6 stable pair's status reached the API at 31 s.
func TestStablePairEscalatedWithTheOtherFamilysVerdict(t *testing.T) {
	r := newRing(50, 3)
	e := New(verdict.Config{})
	const dead = 7
	stableKey := observation.KeyOf(&observation.Observation{Source: r.src(dead - 1), Target: r.tgt(dead)})
	round := func(i int, ok func(int, int) bool) []observation.Observation {
		obs := r.round(i, ok)
		for j, o := range obs {
			if observation.KeyOf(&o) == stableKey {
				obs[j] = v6(o)
			}
		}
		return obs
	}
	for i := range 5 {
		e.Observe(round(i, healthy), r.at(i))
		e.Reconcile(r.at(i).Add(time.Second))
	}
	v6Key := observation.KeyOf(&observation.Observation{Source: r.src(dead - 1), Target: v6(observation.Observation{Target: r.tgt(dead)}).Target})
	v4Target := verdict.TargetKeyOf(&observation.Observation{Target: r.tgt(dead)})
	fault := func(_, d int) bool { return d != dead }
	for i := 5; i < 8; i++ {
		e.Observe(round(i, fault), r.at(i))
		res := e.Reconcile(r.at(i).Add(time.Second))
		ts, ok := e.Target(v4Target)
		require.True(t, ok)
		if ts.Verdict != observation.VerdictUnreachable {
			continue
		}
		require.Less(t, i, 7, "the IPv4 target's quorum comes within two rounds")
		var written bool
		for _, w := range res.Objects {
			if w.Key == v6Key {
				written = true
				assert.Equal(t, observation.VerdictUnreachable, w.Summary.Verdict)
			}
		}
		require.True(t, written, "round %d: the IPv6 stable pair's status is written Unreachable with the IPv4 target's verdict", i)
		return
	}
	t.Fatal("the IPv4 target never turned Unreachable")
}

// The other family failing alone (AddressFamilyUnreachable: IPv6 into the pod is dropped
// for everyone while IPv4 answers) escalates no pair that probes IPv4 only: its one failed
// round is its own, judged by its own rounds.
func TestOneFamilysOutageEscalatesNoPairOfTheOther(t *testing.T) {
	r := newRing(50, 3)
	e := New(verdict.Config{})
	const target = 7
	v4Key := observation.KeyOf(&observation.Observation{Source: r.src(target - 1), Target: r.tgt(target)})
	dual := func(i int, v6ok func(int, int) bool, v4fail bool) []observation.Observation {
		obs := r.round(i, healthy)
		for _, o := range r.round(i, v6ok) {
			if observation.KeyOf(&o) != v4Key { // this pair probes IPv4 only
				obs = append(obs, v6(o))
			}
		}
		if v4fail {
			for j, o := range obs {
				if observation.KeyOf(&o) == v4Key {
					obs[j].Success, obs[j].Lost, obs[j].ErrorType = false, obs[j].Sent, "timeout"
				}
			}
		}
		return obs
	}
	for i := range 5 {
		e.Observe(dual(i, healthy, false), r.at(i))
		e.Reconcile(r.at(i).Add(time.Second))
	}
	v6Target := verdict.TargetKeyOf(&observation.Observation{Target: v6(observation.Observation{Target: r.tgt(target)}).Target})
	noV6 := func(_, d int) bool { return d != target }
	for i := 5; i < 8; i++ {
		e.Observe(dual(i, noV6, false), r.at(i))
		e.Reconcile(r.at(i).Add(time.Second))
	}
	ts, ok := e.Target(v6Target)
	require.True(t, ok)
	require.Equal(t, observation.VerdictUnreachable, ts.Verdict, "IPv6 into the pod fails for everyone")
	e.Observe(dual(8, noV6, true), r.at(8))
	res := e.Reconcile(r.at(8).Add(time.Second))
	for _, w := range res.Objects {
		if w.Key == v4Key {
			assert.NotEqual(t, observation.VerdictUnreachable, w.Summary.Verdict, "one failed IPv4 round while IPv4 answers the others")
		}
	}
	for _, s := range e.Summaries() {
		if s.Key == v4Key {
			assert.NotEqual(t, observation.VerdictUnreachable, s.Verdict)
		}
	}
}
