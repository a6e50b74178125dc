// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package zones

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The liar simulation (#40 item 2): what the engine hands Evaluate - each reporting
// observer's newest round - at 30, 300 and 3,000 nodes, over 50 seeds each. An honest
// agent's round holds K+M = 4 targets (its ring successor and 3 others at random); a liar's
// holds up to 64, the admission's targets per round. The zones are of 10, 30 and 100 nodes
// (3, 10 and 30 zones): the more zones, the fewer honest rounds cross any one zone pair,
// and the more a liar's 64 edges weighed when every node pair counted once.
//
// One liar, in zone A or in zone B, hides no real A <-> B cut, whatever it claims: that it
// reaches B's nodes, that its own zone fails inside, or both. 2 to 6 liars in A claiming
// that B fails (and that A works) invent no cut.

const (
	simSeeds      = 50
	simRing       = 4  // K+M targets of an honest round
	simLiarEdges  = 64 // a round's targets at most (k8s_net_attributes max_targets_per_round)
	simMaxLiars   = 6
	simZoneA      = "z00"
	simZoneB      = "z01"
	simFirstLiars = 2
)

type simCluster struct {
	n, zones int
	rng      *rand.Rand
	ring     []int // a random order: each node's stable peer is its successor
	names    []string
	zoneOf   []string
	members  map[string][]int
}

func newSimCluster(n, zones int, seed uint64) *simCluster {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	c := &simCluster{n: n, zones: zones, rng: rng, ring: rng.Perm(n), members: map[string][]int{}}
	for i := range n {
		c.names = append(c.names, fmt.Sprintf("n%04d", i))
		c.zoneOf = append(c.zoneOf, fmt.Sprintf("z%02d", i%zones))
		c.members[c.zoneOf[i]] = append(c.members[c.zoneOf[i]], i)
	}
	return c
}

func (c *simCluster) zone(i int) string     { return c.zoneOf[i] }
func (c *simCluster) nodeName(i int) string { return c.names[i] }
func (c *simCluster) nodesIn(z string) []int {
	return append([]int(nil), c.members[z]...)
}

func (c *simCluster) edge(o, t int, ok bool) Edge {
	return Edge{ObserverNode: c.nodeName(o), ObserverZone: c.zone(o), TargetNode: c.nodeName(t), TargetZone: c.zone(t), Reachable: ok}
}

// honest is every node's newest round but the liars': its ring successor and 3 others at
// random, failing across a cut zone pair (both directions).
func (c *simCluster) honest(liars map[int]bool, cut bool) []Edge {
	succ := make([]int, c.n)
	for i, o := range c.ring {
		succ[o] = c.ring[(i+1)%c.n]
	}
	var out []Edge
	for o := range c.n {
		if liars[o] {
			continue
		}
		targets := map[int]bool{succ[o]: true}
		for len(targets) < simRing {
			if t := c.rng.IntN(c.n); t != o {
				targets[t] = true
			}
		}
		for t := range targets {
			zo, zt := c.zone(o), c.zone(t)
			if zo != simZoneA && zo != simZoneB && zt != simZoneA && zt != simZoneB {
				continue // decides nothing about A and B (their zones have many nodes): left out for speed
			}
			crosses := (zo == simZoneA && zt == simZoneB) || (zo == simZoneB && zt == simZoneA)
			out = append(out, c.edge(o, t, !(cut && crosses)))
		}
	}
	return out
}

// lie is a liar's round: up to 64 targets, claimed reached (ok) or not, drawn from zones
// (as many distinct nodes as the zones have).
func (c *simCluster) lie(liar int, max int, ok bool, zones ...string) []Edge {
	var pool []int
	for _, z := range zones {
		for _, t := range c.nodesIn(z) {
			if t != liar {
				pool = append(pool, t)
			}
		}
	}
	c.rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	var out []Edge
	for _, t := range pool[:min(max, len(pool))] {
		out = append(out, c.edge(liar, t, ok))
	}
	return out
}

func (c *simCluster) pick(z string, k int) map[int]bool {
	nodes := c.nodesIn(z)
	c.rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	out := map[int]bool{}
	for _, o := range nodes[:k] {
		out[o] = true
	}
	return out
}

func cutBothWays(r Result) bool { return r.Cut(simZoneA, simZoneB) && r.Cut(simZoneB, simZoneA) }

func TestLiarsNeitherHideNorInventZoneCuts(t *testing.T) {
	for _, size := range []struct{ n, zones int }{{30, 3}, {300, 10}, {3000, 30}} {
		t.Run(fmt.Sprintf("nodes=%d", size.n), func(t *testing.T) {
			var found, hidden int
			hiddenBy := map[string]int{}
			invented := make([]int, simMaxLiars+1)
			for seed := range uint64(simSeeds) {
				// A real cut, without liars: found.
				c := newSimCluster(size.n, size.zones, seed)
				if !cutBothWays(Evaluate(c.honest(nil, true), Config{})) {
					continue
				}
				found++
				// The same cut, one liar in A or in B lying as it likes.
				liedAway := false
				for _, z := range []string{simZoneA, simZoneB} {
					other := simZoneB
					if z == simZoneB {
						other = simZoneA
					}
					for _, how := range []string{"reaches the other zone", "own zone fails", "both"} {
						c := newSimCluster(size.n, size.zones, seed)
						liars := c.pick(z, 1)
						es := c.honest(liars, true)
						for l := range liars {
							switch how {
							case "reaches the other zone":
								es = append(es, c.lie(l, simLiarEdges, true, other)...)
							case "own zone fails":
								es = append(es, c.lie(l, simLiarEdges, false, z)...)
							default:
								es = append(es, c.lie(l, simLiarEdges/2, true, other)...)
								es = append(es, c.lie(l, simLiarEdges/2, false, z)...)
							}
						}
						if r := Evaluate(es, Config{}); !r.Cut(simZoneA, simZoneB) {
							hiddenBy[fmt.Sprintf("liar in %s, %s", z, how)]++
							liedAway = true
						}
					}
				}
				if liedAway {
					hidden++
				}
			}
			// No cut, a few liars in A: B fails, A works.
			for seed := range uint64(simSeeds) {
				for k := simFirstLiars; k <= simMaxLiars; k++ {
					c := newSimCluster(size.n, size.zones, seed)
					liars := c.pick(simZoneA, k)
					es := c.honest(liars, false)
					for l := range liars {
						es = append(es, c.lie(l, simLiarEdges-simRing, false, simZoneB)...)
						es = append(es, c.lie(l, simRing, true, simZoneA)...)
					}
					if Evaluate(es, Config{}).Cut(simZoneA, simZoneB) {
						invented[k]++
					}
				}
			}
			t.Logf("%d nodes in %d zones, %d seeds: the real cut found without liars in %d; hidden by one liar in %d %v; invented by k liars in A (k=%d..%d): %v",
				size.n, size.zones, simSeeds, found, hidden, hiddenBy, simFirstLiars, simMaxLiars, invented[simFirstLiars:])
			if found < simSeeds*9/10 {
				t.Errorf("the real cut is found in only %d of %d seeds without liars", found, simSeeds)
			}
			if hidden > 0 {
				t.Errorf("one liar hid a real cut in %d of %d seeds: %v", hidden, found, hiddenBy)
			}
			for k, n := range invented {
				if n > 0 {
					t.Errorf("%d liars in A invented a cut in %d of %d seeds", k, n, simSeeds)
				}
			}
		})
	}
}
