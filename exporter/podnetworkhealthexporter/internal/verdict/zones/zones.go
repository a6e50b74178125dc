// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package zones localises failures above the node: it decides, from the observers'
// newest outcomes grouped by (observer zone, target zone), which ordered zone pairs are
// cut while both zones work. It is pure and deterministic.
//
// The rule (the exporter README, Zones): each observer node has one vote per target zone,
// its own share of the zone's nodes it failed to reach (each target node counted once,
// whatever it sent: an honest round holds K+M targets, a liar's up to the 64 of the
// admission's round limit, and both weigh one). The zone pair A → B (A ≠ B) is cut when
//
//  1. at least MinNodes distinct observer nodes in A fail towards B (each fails at least
//     half the nodes of B it reports on), and they fail at least MinNodes distinct target
//     nodes in B (both capped by the nodes the zone has in the evidence, never below 2: one
//     node is a node problem, and one compromised agent alone can never cut a zone pair);
//  2. the observer nodes of A with a vote on B fail, on average over the nodes, at least
//     MinFailingShare of their own node pairs towards B;
//  3. both zones work inside: the observer nodes of each zone reach, on average over the
//     nodes and leaving out the one that reaches least, at least MinHealthyShare of their
//     node pairs within it. A zone of one node has none: then its observers' votes on the
//     zones other than B (for A), or the votes on its node from the zones other than A
//     (for B), stand in. There must be at least one.
//
// So a zone cut off from all others (its uplink) cuts every pair in and out of it, while a
// zone whose nodes fail one by one (each node's pod network) cuts none: its inside fails.
// One liar in A or B hides no cut where a few honest observers of each zone report (its
// vote is one among theirs, and the lowest word on a zone's inside is left out), and L
// liars in A invent none while fewer than MinFailingShare of A's voting observers,
// i.e. L < 4·H with H honest ones (TestLiarsNeitherHideNorInventZoneCuts: 30, 300 and 3,000
// nodes, 50 seeds).
//
// A node pair's outcome is its newest edge's (several in one round - pods on the target
// node, the node itself - count as reached when any succeeds). The edges of a cut pair explain their failures: the node quorum
// does not see them, so a zone cut marks no node and does not suppress node marking.
package zones // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Edge is one (observer node → target node) outcome, with both nodes' zones.
type Edge struct {
	ObserverNode, ObserverZone string
	TargetNode, TargetZone     string
	Reachable                  bool
	// At is the outcome's round: a node pair's newest outcome stands (several in the same
	// round: reached when any succeeded).
	At time.Time
}

// Config configures Evaluate. Zero fields take the defaults.
type Config struct {
	// MinNodes distinct failing observer nodes in the source zone and failing target nodes
	// in the target zone (default 2; never below 2).
	MinNodes int
	// MinFailingShare: the source zone's observer nodes must fail this share of their own
	// node pairs towards the target zone, on average over the nodes (default 0.8).
	MinFailingShare float64
	// MinHealthyShare: each zone's observer nodes must reach this share of their node pairs
	// within it, on average over the nodes, the lowest left out (default 0.8).
	MinHealthyShare float64
}

// Defaults of Config.
const (
	DefaultMinNodes        = 2
	DefaultMinFailingShare = 0.8
	DefaultMinHealthyShare = 0.8
)

func (c Config) withDefaults() Config {
	if c.MinNodes < 2 {
		c.MinNodes = DefaultMinNodes
	}
	if c.MinFailingShare <= 0 || c.MinFailingShare > 1 {
		c.MinFailingShare = DefaultMinFailingShare
	}
	if c.MinHealthyShare <= 0 || c.MinHealthyShare > 1 {
		c.MinHealthyShare = DefaultMinHealthyShare
	}
	return c
}

// Reasons of a Pair.
const (
	// ReasonCut: the pair is cut while both zones work.
	ReasonCut = "ZonePairUnreachable"
	// ReasonReachable: no more than the failing share of the pair's node pairs fail.
	ReasonReachable = "ZonePairReachable"
	// ReasonPartial: many of the pair's node pairs fail, but too few nodes of a side fail
	// (a node problem) or a side does not work otherwise (not localised to the pair).
	ReasonPartial = "NotLocalised"
)

// Pair is the decision for one ordered zone pair with evidence.
type Pair struct {
	From, To string
	Cut      bool
	Reason   string
	Message  string
	// NodePairs and FailingNodePairs count (observer node, target node) pairs from From to To
	// (figures: the decision weighs observer nodes, not node pairs).
	NodePairs, FailingNodePairs int
	// ObserverNodes: the observer nodes in From with evidence about To.
	ObserverNodes int
	// FailingObservers (in From) and FailingTargets (in To): distinct nodes, sorted.
	FailingObservers, FailingTargets []string
}

// Result is the decision for every zone pair with evidence, sorted by (From, To).
type Result struct {
	Pairs []Pair
}

// Cut reports whether the zone pair from → to is cut.
func (r Result) Cut(from, to string) bool {
	i, ok := slices.BinarySearchFunc(r.Pairs, [2]string{from, to}, func(p Pair, k [2]string) int {
		return cmp.Or(cmp.Compare(p.From, k[0]), cmp.Compare(p.To, k[1]))
	})
	return ok && r.Pairs[i].Cut
}

// CutPairs returns the cut pairs.
func (r Result) CutPairs() []Pair {
	var out []Pair
	for _, p := range r.Pairs {
		if p.Cut {
			out = append(out, p)
		}
	}
	return out
}

// vote is one observer node's word on one target zone: the target nodes of the zone in its
// evidence (each counted once) and how many it reached. Whatever the observer sent, it is
// one vote, of weight one, per zone pair.
type vote struct{ ok, total int }

func (v vote) failing() float64 { return float64(v.total-v.ok) / float64(v.total) }

// votes is a set of observer votes: mean shares over the observers, not over their edges.
type votes []vote

// failingShare is the mean of the observers' own failing shares.
func (vs votes) failingShare() float64 {
	var sum float64
	for _, v := range vs {
		sum += v.failing()
	}
	return sum / float64(len(vs))
}

// workingShare is the mean of the observers' own reaching shares with the one most against
// it left out (when there are at least two): one node that says its zone fails inside,
// truthfully or not, is a node problem and cannot make the zone read broken.
func (vs votes) workingShare() float64 {
	var sum, worst float64
	worst = 1
	for _, v := range vs {
		ok := 1 - v.failing()
		sum += ok
		worst = min(worst, ok)
	}
	if len(vs) < 2 {
		return sum / float64(len(vs))
	}
	return (sum - worst) / float64(len(vs)-1)
}

type nodePair struct{ observer, target string }

type zonePair struct{ from, to string }

type tally struct{ ok, total int }

// Evaluate decides every ordered zone pair with evidence. Edges without both zones, and a
// node's edges to itself, are ignored.
func Evaluate(edges []Edge, cfg Config) Result {
	cfg = cfg.withDefaults()
	// Reduce to node pairs: the newest round's outcome, reached when any edge of it succeeds.
	type outcome struct {
		at time.Time
		ok bool
	}
	newest := map[nodePair]outcome{}
	zoneOf := map[string]string{}
	for _, e := range edges {
		if e.ObserverZone == "" || e.TargetZone == "" || e.ObserverNode == "" || e.TargetNode == "" || e.ObserverNode == e.TargetNode {
			continue
		}
		zoneOf[e.ObserverNode], zoneOf[e.TargetNode] = e.ObserverZone, e.TargetZone
		k := nodePair{e.ObserverNode, e.TargetNode}
		cur, seen := newest[k]
		switch {
		case !seen || e.At.After(cur.at):
			newest[k] = outcome{e.At, e.Reachable}
		case e.At.Equal(cur.at) && e.Reachable:
			newest[k] = outcome{e.At, true}
		}
	}
	// Each observer node's vote per target zone, and the node pairs per zone pair (for the
	// figures written, which weigh nothing).
	type obsZone struct{ observer, zone string }
	byObserver := map[obsZone]*vote{}
	pairs := map[zonePair]*tally{}
	zoneNodes := map[string]map[string]struct{}{}
	for k, nk := range newest {
		zp := zonePair{zoneOf[k.observer], zoneOf[k.target]}
		for _, n := range [2]string{k.observer, k.target} {
			if zoneNodes[zoneOf[n]] == nil {
				zoneNodes[zoneOf[n]] = map[string]struct{}{}
			}
			zoneNodes[zoneOf[n]][n] = struct{}{}
		}
		v := byObserver[obsZone{k.observer, zp.to}]
		if v == nil {
			v = &vote{}
			byObserver[obsZone{k.observer, zp.to}] = v
		}
		t := pairs[zp]
		if t == nil {
			t = &tally{}
			pairs[zp] = t
		}
		v.total++
		t.total++
		if nk.ok {
			v.ok++
			t.ok++
		}
	}
	// The observers' votes per zone pair, and for zones of one node (no pairs inside) each
	// observer's word on the zones other than one.
	pairVotes := map[zonePair]votes{}
	for k, v := range byObserver {
		zp := zonePair{zoneOf[k.observer], k.zone}
		pairVotes[zp] = append(pairVotes[zp], *v)
	}
	// fromElsewhere: the votes of from's observers on every zone but not; toElsewhere: the
	// votes on to from the observers of every zone but not.
	fromElsewhere := func(from, not string) votes {
		sum := map[string]vote{}
		for k, v := range byObserver {
			if zoneOf[k.observer] == from && k.zone != from && k.zone != not {
				s := sum[k.observer]
				sum[k.observer] = vote{s.ok + v.ok, s.total + v.total}
			}
		}
		out := make(votes, 0, len(sum))
		for _, v := range sum {
			out = append(out, v)
		}
		return out
	}
	toElsewhere := func(to, not string) votes {
		var out votes
		for k, v := range byObserver {
			if k.zone == to && zoneOf[k.observer] != to && zoneOf[k.observer] != not {
				out = append(out, *v)
			}
		}
		return out
	}
	// Failing observers: those that fail to reach at least half the zone's nodes they report
	// on; failing targets: the nodes those observers fail to reach.
	type failingNodes struct{ observers, targets map[string]struct{} }
	failing := map[zonePair]failingNodes{}
	for k, v := range byObserver {
		if v.failing() < 0.5 {
			continue
		}
		zp := zonePair{zoneOf[k.observer], k.zone}
		f, ok := failing[zp]
		if !ok {
			f = failingNodes{map[string]struct{}{}, map[string]struct{}{}}
			failing[zp] = f
		}
		f.observers[k.observer] = struct{}{}
	}
	for k, nk := range newest {
		if f, ok := failing[zonePair{zoneOf[k.observer], zoneOf[k.target]}]; ok && !nk.ok {
			if _, ok := f.observers[k.observer]; ok {
				f.targets[k.target] = struct{}{}
			}
		}
	}
	var res Result
	for zp, t := range pairs {
		if zp.from == zp.to {
			continue
		}
		vs := pairVotes[zp]
		failObs, failTgt := failing[zp].observers, failing[zp].targets
		p := Pair{From: zp.from, To: zp.to, NodePairs: t.total, FailingNodePairs: t.total - t.ok, ObserverNodes: len(vs),
			FailingObservers: sortedKeys(failObs), FailingTargets: sortedKeys(failTgt), Reason: ReasonReachable}
		share := vs.failingShare()
		if p.FailingNodePairs == 0 || share < cfg.MinFailingShare {
			p.Message = fmt.Sprintf("%d of %d node pairs fail (%.0f%% by observer node)", p.FailingNodePairs, p.NodePairs, 100*share)
			res.Pairs = append(res.Pairs, p)
			continue
		}
		// Each side works inside: its own node pairs, or for a zone without any (one node),
		// its node pairs with the zones other than the pair's.
		fromOK, fromWhere := pairVotes[zonePair{zp.from, zp.from}], "inside"
		if len(fromOK) == 0 {
			fromOK, fromWhere = fromElsewhere(zp.from, zp.to), "towards other zones"
		}
		toOK, toWhere := pairVotes[zonePair{zp.to, zp.to}], "inside"
		if len(toOK) == 0 {
			toOK, toWhere = toElsewhere(zp.to, zp.from), "from other zones"
		}
		needObs := min(cfg.MinNodes, max(2, len(zoneNodes[zp.from])))
		needTgt := min(cfg.MinNodes, max(2, len(zoneNodes[zp.to])))
		switch {
		case len(p.FailingObservers) < needObs || len(p.FailingTargets) < needTgt:
			p.Reason = ReasonPartial
			p.Message = fmt.Sprintf("%d of %d node pairs fail, from %d observer nodes towards %d target nodes (at least %d and %d localise a zone pair): a node problem",
				p.FailingNodePairs, p.NodePairs, len(p.FailingObservers), len(p.FailingTargets), needObs, needTgt)
		case len(fromOK) == 0 || fromOK.workingShare() < cfg.MinHealthyShare:
			p.Reason = ReasonPartial
			p.Message = fmt.Sprintf("%d of %d node pairs fail, but zone %s does not work %s (%s)",
				p.FailingNodePairs, p.NodePairs, zp.from, fromWhere, fromOK.describe())
		case len(toOK) == 0 || toOK.workingShare() < cfg.MinHealthyShare:
			p.Reason = ReasonPartial
			p.Message = fmt.Sprintf("%d of %d node pairs fail, but zone %s does not work %s (%s)",
				p.FailingNodePairs, p.NodePairs, zp.to, toWhere, toOK.describe())
		default:
			p.Cut, p.Reason = true, ReasonCut
			p.Message = fmt.Sprintf("zone %s cannot reach zone %s: %d of %d observer nodes fail (%.0f%% by observer node), towards %d target nodes, while both zones work (%s %s, %s %s)",
				zp.from, zp.to, len(p.FailingObservers), p.ObserverNodes, 100*share, len(p.FailingTargets), fromWhere, fromOK.describe(), toWhere, toOK.describe())
		}
		res.Pairs = append(res.Pairs, p)
	}
	slices.SortFunc(res.Pairs, func(a, b Pair) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	return res
}

// describe says how many observer nodes vote and how much they reach.
func (vs votes) describe() string {
	if len(vs) == 0 {
		return "no observer node"
	}
	return fmt.Sprintf("%.0f%% reached by %d observer nodes", 100*vs.workingShare(), len(vs))
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
