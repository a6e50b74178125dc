// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package zones

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/quorum"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cluster is n nodes per zone; fails says which (observer zone, target zone) pairs or
// (observer node, target node) pairs fail.
type cluster struct {
	zones   []string
	perZone int
	cutZone map[[2]string]bool
	deadOut map[string]bool // node whose pod network is down: nobody reaches it, it reaches nobody
}

func node(z string, i int) string { return fmt.Sprintf("%s-n%d", z, i) }

func (c cluster) edges() []Edge {
	var out []Edge
	for _, oz := range c.zones {
		for i := range c.perZone {
			for _, tz := range c.zones {
				for j := range c.perZone {
					o, t := node(oz, i), node(tz, j)
					if o == t {
						continue
					}
					ok := !c.cutZone[[2]string{oz, tz}] && !c.deadOut[o] && !c.deadOut[t]
					out = append(out, Edge{ObserverNode: o, ObserverZone: oz, TargetNode: t, TargetZone: tz, Reachable: ok})
				}
			}
		}
	}
	return out
}

func TestHealthyClusterCutsNothing(t *testing.T) {
	r := Evaluate(cluster{zones: []string{"a", "b", "c"}, perZone: 4}.edges(), Config{})
	assert.Empty(t, r.CutPairs())
	require.Len(t, r.Pairs, 6, "every ordered pair of distinct zones with evidence")
	for _, p := range r.Pairs {
		assert.Equal(t, ReasonReachable, p.Reason)
	}
}

func TestZonePairCutBothWays(t *testing.T) {
	c := cluster{zones: []string{"a", "b", "c"}, perZone: 4, cutZone: map[[2]string]bool{{"a", "b"}: true, {"b", "a"}: true}}
	r := Evaluate(c.edges(), Config{})
	cut := r.CutPairs()
	require.Len(t, cut, 2)
	assert.Equal(t, [2]string{"a", "b"}, [2]string{cut[0].From, cut[0].To})
	assert.Equal(t, [2]string{"b", "a"}, [2]string{cut[1].From, cut[1].To})
	assert.Equal(t, 16, cut[0].FailingNodePairs)
	assert.Len(t, cut[0].FailingObservers, 4)
	assert.Contains(t, cut[0].Message, "zone a cannot reach zone b")
	assert.True(t, r.Cut("a", "b"))
	assert.False(t, r.Cut("a", "c"))
	assert.False(t, r.Cut("x", "y"))
}

// Two zones only: each side's "elsewhere" is its own zone.
func TestTwoZonesCut(t *testing.T) {
	c := cluster{zones: []string{"a", "b"}, perZone: 3, cutZone: map[[2]string]bool{{"a", "b"}: true, {"b", "a"}: true}}
	r := Evaluate(c.edges(), Config{})
	assert.True(t, r.Cut("a", "b"))
	assert.True(t, r.Cut("b", "a"))
}

// One direction only (an egress rule in one zone).
func TestOneWayCut(t *testing.T) {
	c := cluster{zones: []string{"a", "b", "c"}, perZone: 3, cutZone: map[[2]string]bool{{"c", "a"}: true}}
	r := Evaluate(c.edges(), Config{})
	require.Len(t, r.CutPairs(), 1)
	assert.True(t, r.Cut("c", "a"))
}

// A zone cut off from every other zone: every pair in and out of it is cut.
func TestIsolatedZone(t *testing.T) {
	cut := map[[2]string]bool{}
	for _, z := range []string{"a", "c"} {
		cut[[2]string{z, "b"}], cut[[2]string{"b", z}] = true, true
	}
	r := Evaluate(cluster{zones: []string{"a", "b", "c"}, perZone: 3, cutZone: cut}.edges(), Config{})
	assert.Len(t, r.CutPairs(), 4)
}

// One dead node is a node problem: its zone pairs have a failing share far below the rule,
// and even a zone of two nodes with one dead is not a zone pair cut (one target node).
func TestDeadNodeIsNotAZoneCut(t *testing.T) {
	r := Evaluate(cluster{zones: []string{"a", "b", "c"}, perZone: 4, deadOut: map[string]bool{"b-n0": true}}.edges(), Config{})
	assert.Empty(t, r.CutPairs())
	r = Evaluate(cluster{zones: []string{"a", "b"}, perZone: 2, deadOut: map[string]bool{"b-n0": true}}.edges(), Config{})
	assert.Empty(t, r.CutPairs())
	for _, p := range r.Pairs {
		if p.From == "a" && p.To == "b" {
			assert.Equal(t, ReasonReachable, p.Reason, "1 of 2 targets fail: 50%% < 80%%")
		}
	}
	// Both nodes of a 2-node zone dead: the zone's targets fail from everywhere, its own
	// observers included: not localised to a pair.
	r = Evaluate(cluster{zones: []string{"a", "b", "c"}, perZone: 2, deadOut: map[string]bool{"b-n0": true, "b-n1": true}}.edges(), Config{})
	assert.Empty(t, r.CutPairs())
	var ab Pair
	for _, p := range r.Pairs {
		if p.From == "a" && p.To == "b" {
			ab = p
		}
	}
	assert.Equal(t, ReasonPartial, ab.Reason)
	assert.Contains(t, ab.Message, "zone b does not work inside")
}

// A cluster-wide outage (broken probers) is no zone cut: each zone's observers fail
// everywhere.
func TestEverythingFailsIsNotAZoneCut(t *testing.T) {
	cut := map[[2]string]bool{}
	for _, a := range []string{"a", "b", "c"} {
		for _, b := range []string{"a", "b", "c"} {
			cut[[2]string{a, b}] = true
		}
	}
	r := Evaluate(cluster{zones: []string{"a", "b", "c"}, perZone: 3, cutZone: cut}.edges(), Config{})
	assert.Empty(t, r.CutPairs())
}

// One compromised agent reports failures towards every node of another zone: one observer
// node never localises a zone pair.
func TestOneObserverCannotCutAZonePair(t *testing.T) {
	var es []Edge
	for _, e := range (cluster{zones: []string{"a", "b", "c"}, perZone: 1}).edges() {
		if e.ObserverNode == "a-n0" && e.TargetZone == "b" {
			e.Reachable = false
		}
		es = append(es, e)
	}
	r := Evaluate(es, Config{})
	assert.Empty(t, r.CutPairs(), "zones of one node: one observer and one target")
	es = es[:0]
	for _, e := range (cluster{zones: []string{"a", "b", "c"}, perZone: 4}).edges() {
		if e.ObserverNode == "a-n0" && e.TargetZone == "b" {
			e.Reachable = false
		}
		es = append(es, e)
	}
	r = Evaluate(es, Config{MinFailingShare: 0.2})
	assert.Empty(t, r.CutPairs(), "a lowered share still needs two observer nodes")
	for _, p := range r.Pairs {
		if p.From == "a" && p.To == "b" {
			assert.Equal(t, ReasonPartial, p.Reason)
			assert.Contains(t, p.Message, "from 1 observer nodes")
		}
	}
}

// A node pair is reached when any of its edges succeeds (a pod on the target node, or the
// node itself); edges without zones and a node's edges to itself say nothing.
func TestNodePairsAndIgnoredEdges(t *testing.T) {
	es := cluster{zones: []string{"a", "b"}, perZone: 2, cutZone: map[[2]string]bool{{"a", "b"}: true}}.edges()
	// A second pod on b-n0 that a-n0 reaches: a-n0 → b-n0 is reached.
	es = append(es, Edge{ObserverNode: "a-n0", ObserverZone: "a", TargetNode: "b-n0", TargetZone: "b", Reachable: true},
		Edge{ObserverNode: "a-n0", ObserverZone: "", TargetNode: "b-n1", TargetZone: "b"},
		Edge{ObserverNode: "a-n1", ObserverZone: "a", TargetNode: "a-n1", TargetZone: "a"})
	r := Evaluate(es, Config{})
	for _, p := range r.Pairs {
		if p.From == "a" && p.To == "b" {
			assert.Equal(t, 4, p.NodePairs)
			assert.Equal(t, 3, p.FailingNodePairs)
			assert.False(t, p.Cut, "3 of 4 is 75%% < 80%%")
		}
	}
	assert.True(t, Evaluate(es, Config{MinFailingShare: 0.75}).Cut("a", "b"))
}

// BenchmarkEvaluate: the zone judgement over what the engine hands it at N nodes in 10
// zones - each observer's newest round, K+M = 4 targets x 2 families = 8 edges - one zone
// pair cut. It runs with every node judgement (each target verdict change, at least every
// 5 s). The reference, measured in the same run, is the node quorum over the same edges
// (quorum.Evaluate), which the node judgement already pays.
func BenchmarkEvaluate(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		zoneOf := func(i int) string { return fmt.Sprintf("zone-%d", i%10) }
		var es []Edge
		var qs []quorum.Edge
		for o := range n {
			for range 4 {
				t := rng.IntN(n)
				if t == o {
					continue
				}
				ok := !(zoneOf(o) == "zone-0" && zoneOf(t) == "zone-1")
				for range 2 {
					es = append(es, Edge{ObserverNode: fmt.Sprint(o), ObserverZone: zoneOf(o), TargetNode: fmt.Sprint(t), TargetZone: zoneOf(t), Reachable: ok})
					v := observation.VerdictReachable
					if !ok {
						v = observation.VerdictUnreachable
					}
					qs = append(qs, quorum.Edge{ObserverPod: fmt.Sprint(o), ObserverNode: fmt.Sprint(o), TargetNode: fmt.Sprint(t), TargetKind: observation.TargetPod, Verdict: v})
				}
			}
		}
		require.True(b, Evaluate(es, Config{}).Cut("zone-0", "zone-1"))
		b.Run(fmt.Sprintf("nodes=%d/zones", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Evaluate(es, Config{})
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/reference=quorum", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				quorum.Evaluate(nil, qs, quorum.Config{})
			}
		})
	}
}
