// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package zones localises failures above the node: it decides, from the observers'
// newest outcomes grouped by (observer zone, target zone), which ordered zone pairs are
// cut while both zones work. It is pure and deterministic.
//
// The rule (docs/summary.md, Zones): the zone pair A → B (A ≠ B) is cut when
//
//  1. at least MinNodes distinct observer nodes in A fail towards B, and at least MinNodes
//     distinct target nodes in B are failed from A (both capped by the nodes the zone has
//     in the evidence, never below 2: one node is a node problem, and one compromised
//     agent alone can never cut a zone pair);
//  2. at least MinFailingShare of the (observer node, target node) pairs from A to B fail;
//  3. both zones work inside: at least MinHealthyShare of each zone's node pairs within
//     itself succeed. A zone of one node has none: then its observers' pairs towards the
//     zones other than B (for A), or its targets' pairs from the zones other than A (for
//     B), stand in. There must be at least one.
//
// So a zone cut off from all others (its uplink) cuts every pair in and out of it, while a
// zone whose nodes fail one by one (each node's pod network) cuts none: its inside fails.
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
	// MinFailingShare of the zone pair's node pairs must fail (default 0.8).
	MinFailingShare float64
	// MinHealthyShare of each zone's other node pairs must succeed (default 0.8).
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
	// NodePairs and FailingNodePairs count (observer node, target node) pairs from From to To.
	NodePairs, FailingNodePairs int
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

type pairAcc struct {
	tally
	failObs, failTgt map[string]struct{}
}

type nodePair struct{ observer, target string }

type tally struct{ ok, total int }

func (a *pairAcc) tallyOrZero() tally {
	if a == nil {
		return tally{}
	}
	return a.tally
}

func (t tally) share() float64 { return float64(t.ok) / float64(t.total) }

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
	type zonePair struct{ from, to string }
	pairs := map[zonePair]*pairAcc{}
	zoneNodes := map[string]map[string]struct{}{}
	for k, nk := range newest {
		ok := nk.ok
		zp := zonePair{zoneOf[k.observer], zoneOf[k.target]}
		for _, n := range [2]string{k.observer, k.target} {
			if zoneNodes[zoneOf[n]] == nil {
				zoneNodes[zoneOf[n]] = map[string]struct{}{}
			}
			zoneNodes[zoneOf[n]][n] = struct{}{}
		}
		a := pairs[zp]
		if a == nil {
			a = &pairAcc{failObs: map[string]struct{}{}, failTgt: map[string]struct{}{}}
			pairs[zp] = a
		}
		a.total++
		if ok {
			a.ok++
		} else {
			a.failObs[k.observer] = struct{}{}
			a.failTgt[k.target] = struct{}{}
		}
	}
	// What "outside B" and "outside A" sum over: every zone's node pairs as observers and
	// as targets, less the pair's own.
	fromSum, toSum := map[string]tally{}, map[string]tally{}
	for zp, a := range pairs {
		f, t := fromSum[zp.from], toSum[zp.to]
		fromSum[zp.from] = tally{f.ok + a.ok, f.total + a.total}
		toSum[zp.to] = tally{t.ok + a.ok, t.total + a.total}
	}
	var res Result
	for zp, a := range pairs {
		if zp.from == zp.to {
			continue
		}
		p := Pair{From: zp.from, To: zp.to, NodePairs: a.total, FailingNodePairs: a.total - a.ok,
			FailingObservers: sortedKeys(a.failObs), FailingTargets: sortedKeys(a.failTgt), Reason: ReasonReachable}
		failing := 1 - a.share()
		if p.FailingNodePairs == 0 || failing < cfg.MinFailingShare {
			p.Message = fmt.Sprintf("%d of %d node pairs fail", p.FailingNodePairs, p.NodePairs)
			res.Pairs = append(res.Pairs, p)
			continue
		}
		// Each side works inside: its own node pairs, or for a zone without any (one node),
		// its node pairs with the zones other than the pair's.
		fromOK, fromWhere := pairs[zonePair{zp.from, zp.from}].tallyOrZero(), "inside"
		if fromOK.total == 0 {
			fromOK, fromWhere = tally{fromSum[zp.from].ok - a.ok, fromSum[zp.from].total - a.total}, "towards other zones"
		}
		toOK, toWhere := pairs[zonePair{zp.to, zp.to}].tallyOrZero(), "inside"
		if toOK.total == 0 {
			toOK, toWhere = tally{toSum[zp.to].ok - a.ok, toSum[zp.to].total - a.total}, "from other zones"
		}
		needObs := min(cfg.MinNodes, max(2, len(zoneNodes[zp.from])))
		needTgt := min(cfg.MinNodes, max(2, len(zoneNodes[zp.to])))
		switch {
		case len(p.FailingObservers) < needObs || len(p.FailingTargets) < needTgt:
			p.Reason = ReasonPartial
			p.Message = fmt.Sprintf("%d of %d node pairs fail, from %d observer nodes towards %d target nodes (at least %d and %d localise a zone pair): a node problem",
				p.FailingNodePairs, p.NodePairs, len(p.FailingObservers), len(p.FailingTargets), needObs, needTgt)
		case fromOK.total == 0 || fromOK.share() < cfg.MinHealthyShare:
			p.Reason = ReasonPartial
			p.Message = fmt.Sprintf("%d of %d node pairs fail, but zone %s does not work %s (%d of %d node pairs succeed)",
				p.FailingNodePairs, p.NodePairs, zp.from, fromWhere, fromOK.ok, fromOK.total)
		case toOK.total == 0 || toOK.share() < cfg.MinHealthyShare:
			p.Reason = ReasonPartial
			p.Message = fmt.Sprintf("%d of %d node pairs fail, but zone %s does not work %s (%d of %d node pairs succeed)",
				p.FailingNodePairs, p.NodePairs, zp.to, toWhere, toOK.ok, toOK.total)
		default:
			p.Cut, p.Reason = true, ReasonCut
			p.Message = fmt.Sprintf("zone %s cannot reach zone %s: %d of %d node pairs fail, from %d observer nodes towards %d target nodes, while both zones work (%s %d of %d, %s %d of %d node pairs succeed)",
				zp.from, zp.to, p.FailingNodePairs, p.NodePairs, len(p.FailingObservers), len(p.FailingTargets), fromWhere, fromOK.ok, fromOK.total, toWhere, toOK.ok, toOK.total)
		}
		res.Pairs = append(res.Pairs, p)
	}
	slices.SortFunc(res.Pairs, func(a, b Pair) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	return res
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
