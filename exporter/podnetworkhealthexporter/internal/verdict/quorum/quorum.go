// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package quorum decides, from the verdicts of many observers, which nodes have a
// pod-network problem: the node-level network-readiness signal. It is pure and
// deterministic: the same edges always give the same result.
//
// A node X is marked only when at least Quorum distinct observer nodes other than X fail to
// reach pods on X (or X itself), those observers are healthy (they reach some node other
// than themselves and X), and they outnumber the healthy observer nodes that still reach X.
// Marking suppresses itself when too many observers fail in ways the candidates do not
// explain, or when too many nodes would be marked: a broken prober or a cluster-wide outage
// must not mark the cluster unhealthy. See docs/summary.md for the rules with examples.
package quorum // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/quorum"

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// Edge is one (observer -> target) outcome: the evidence behind a per-target verdict
// (verdict.Engine.edges builds them).
type Edge struct {
	// ObserverPod identifies the observing pod ("namespace/name").
	ObserverPod string
	// ObserverNode is the node the observer runs on.
	ObserverNode string
	// TargetNode is the node the target pod runs on, or the target node itself.
	TargetNode string
	TargetKind observation.TargetKind
	Verdict    observation.Verdict
}

// Config configures Evaluate. Zero fields take the defaults.
type Config struct {
	// Quorum is the number of distinct observer nodes (other than the node) that must fail
	// to reach a node before it is marked (default 2).
	Quorum int
	// MaxFailingShare (default 0.2): marking is suppressed when more than this share of
	// the observers fail towards targets that no candidate node explains, or when more
	// than max(1, floor(MaxFailingShare x nodes)) nodes would be marked.
	MaxFailingShare float64
	// WorkingObservers are observer nodes that the caller saw reach a node of its own
	// choosing that no edge targets and that is not theirs: evidence outside the edges
	// (a sharded gateway's successes towards other shards' targets, which it does not
	// judge and drops; docs/sharding.md). Each counts as healthy towards every node, as it
	// would if that success were an edge. It adds no edge: no node is reached, failed or
	// explained by it.
	WorkingObservers []string
}

// Defaults of Config.
const (
	DefaultQuorum          = 2
	DefaultMaxFailingShare = 0.2
	// MaxPeersInMessage bounds the failing peers a message lists.
	MaxPeersInMessage = 5
)

func (c Config) withDefaults() Config {
	if c.Quorum <= 0 {
		c.Quorum = DefaultQuorum
	}
	if c.MaxFailingShare <= 0 || c.MaxFailingShare > 1 {
		c.MaxFailingShare = DefaultMaxFailingShare
	}
	return c
}

// Reasons of NodeStatus (CamelCase, usable as condition reasons).
const (
	// ReasonUnreachableFromPeers: the node has a pod-network problem (Problem true).
	ReasonUnreachableFromPeers = "UnreachableFromPeers"
	// ReasonReachable: no healthy observer fails to reach the node.
	ReasonReachable = "ReachableFromPeers"
	// ReasonBelowQuorum: some observers fail to reach it, but fewer than Quorum, or fewer
	// than those that still reach it.
	ReasonBelowQuorum = "BelowQuorum"
	// ReasonNoObservations: no observer has a verdict about the node.
	ReasonNoObservations = "NoObservations"
	// ReasonSuppressed: marking is suppressed cluster-wide (see Result.SuppressedReason).
	ReasonSuppressed = "Suppressed"
)

// NodeStatus is the decision for one node.
type NodeStatus struct {
	Node    string
	Problem bool
	Reason  string
	Message string
	// FailingObservers are the healthy observer nodes (other than Node) that fail to reach
	// it; ReachingObservers those that reach it.
	FailingObservers  []string
	ReachingObservers []string
}

// Result is the decision for all nodes.
type Result struct {
	// Nodes, sorted by name: every node given to Evaluate and every node seen in an edge.
	Nodes []NodeStatus
	// Candidates are the nodes that met the quorum, before suppression.
	Candidates []string
	// Suppressed: no node is marked; SuppressedReason says why.
	Suppressed       bool
	SuppressedReason string
	// Observers is the number of distinct observer pods with a verdict; UnexplainedFailing
	// those of them that fail towards targets not on a candidate node while not being on
	// one themselves (sorted).
	Observers          int
	UnexplainedFailing []string
}

// Marked returns the nodes with Problem set, sorted.
func (r Result) Marked() []string {
	var out []string
	for _, n := range r.Nodes {
		if n.Problem {
			out = append(out, n.Node)
		}
	}
	return out
}

type set map[string]struct{}

func (s set) add(k string)      { s[k] = struct{}{} }
func (s set) has(k string) bool { _, ok := s[k]; return ok }
func (s set) sorted() []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func lazy(m map[string]set, k string) set {
	s := m[k]
	if s == nil {
		s = set{}
		m[k] = s
	}
	return s
}

// Evaluate decides which of nodes (plus any node named by an edge) have a pod-network
// problem. Edges to External targets, edges without an observer or target node, and
// Unknown verdicts are ignored.
func Evaluate(nodes []string, edges []Edge, cfg Config) Result {
	cfg = cfg.withDefaults()
	all, es := usable(nodes, edges)
	working := set{}
	for _, n := range cfg.WorkingObservers {
		working.add(n)
	}

	reaches := map[string]set{}       // observer node -> nodes (other than itself) it reaches
	failing := map[string]set{}       // target node -> observer nodes (other) failing to reach it
	podReached := map[string]set{}    // target node -> observer nodes reaching a pod on it
	reachedBy := map[string]set{}     // target node -> observer nodes reaching it
	failPods := map[string][]string{} // target node -> "observer pod (observer node)" failing
	observers := set{}
	for _, e := range es {
		observers.add(e.ObserverPod)
		if e.ObserverNode == e.TargetNode {
			continue // a node's view of itself says nothing about its pod network from outside
		}
		if e.Verdict == observation.VerdictReachable {
			lazy(reaches, e.ObserverNode).add(e.TargetNode)
			lazy(reachedBy, e.TargetNode).add(e.ObserverNode)
			if e.TargetKind == observation.TargetPod {
				lazy(podReached, e.TargetNode).add(e.ObserverNode)
			}
			continue
		}
		lazy(failing, e.TargetNode).add(e.ObserverNode)
		p := e.ObserverPod + " (" + e.ObserverNode + ")"
		if !slices.Contains(failPods[e.TargetNode], p) {
			failPods[e.TargetNode] = append(failPods[e.TargetNode], p)
		}
	}
	// healthy: the observer node reaches some node other than itself and x (a working
	// observer reaches one that no edge targets, so not x).
	healthy := func(o, x string) bool {
		if working.has(o) {
			return true
		}
		for y := range reaches[o] {
			if y != x {
				return true
			}
		}
		return false
	}

	res := Result{Observers: len(observers)}
	type verdict struct{ failing, reaching []string }
	per := map[string]verdict{}
	candidates := set{}
	for _, x := range all.sorted() {
		f, r := set{}, set{}
		for o := range failing[x] {
			// An observer that reaches a pod on x sees x's pod network working: a single
			// failing pod there is that pod's problem, not the node's.
			if healthy(o, x) && !podReached[x].has(o) {
				f.add(o)
			}
		}
		for o := range reachedBy[x] {
			if !f.has(o) && healthy(o, x) {
				r.add(o)
			}
		}
		per[x] = verdict{f.sorted(), r.sorted()}
		if len(f) >= cfg.Quorum && len(f) > len(r) {
			candidates.add(x)
		}
	}
	res.Candidates = candidates.sorted()

	// Observers failing towards targets that no candidate explains.
	unexplained := set{}
	for _, e := range es {
		if e.Verdict == observation.VerdictUnreachable && !candidates.has(e.TargetNode) && !candidates.has(e.ObserverNode) {
			unexplained.add(e.ObserverPod)
		}
	}
	res.UnexplainedFailing = unexplained.sorted()
	maxMarked := max(1, int(math.Floor(cfg.MaxFailingShare*float64(len(all))+1e-9)))
	switch {
	// Fewer than Quorum unexplained observers could not mark a node by themselves, so they
	// are no reason to stop marking: typically one broken prober, or the first observer to
	// report to a writer that just started (1 of 1 is 100 %).
	case len(unexplained) >= cfg.Quorum && float64(len(unexplained)) > cfg.MaxFailingShare*float64(len(observers)):
		res.Suppressed = true
		res.SuppressedReason = fmt.Sprintf("%d of %d observers (%.0f%%) fail towards targets on nodes that are not candidates (more than %.0f%%): broken probers or a wide outage; no node is marked",
			len(unexplained), len(observers), 100*float64(len(unexplained))/float64(len(observers)), 100*cfg.MaxFailingShare)
	case len(candidates) > maxMarked:
		res.Suppressed = true
		res.SuppressedReason = fmt.Sprintf("%d of %d nodes would be marked (at most %d): a systemic outage, not a node problem; no node is marked",
			len(candidates), len(all), maxMarked)
	}

	for _, x := range all.sorted() {
		v := per[x]
		ns := NodeStatus{Node: x, FailingObservers: v.failing, ReachingObservers: v.reaching}
		switch {
		case res.Suppressed:
			ns.Reason, ns.Message = ReasonSuppressed, res.SuppressedReason
		case candidates.has(x):
			ns.Problem, ns.Reason = true, ReasonUnreachableFromPeers
			ns.Message = fmt.Sprintf("pod network unreachable from %d observer nodes (quorum %d, %d still reach it): %s",
				len(v.failing), cfg.Quorum, len(v.reaching), listPeers(failPods[x], v.failing))
		case len(v.failing) > 0:
			ns.Reason = ReasonBelowQuorum
			ns.Message = fmt.Sprintf("unreachable from %d observer nodes, reachable from %d (quorum %d): %s",
				len(v.failing), len(v.reaching), cfg.Quorum, listPeers(failPods[x], v.failing))
		case len(v.reaching) > 0:
			ns.Reason = ReasonReachable
			ns.Message = fmt.Sprintf("reachable from %d observer nodes", len(v.reaching))
		default:
			ns.Reason, ns.Message = ReasonNoObservations, "no observer has a verdict about this node"
		}
		res.Nodes = append(res.Nodes, ns)
	}
	return res
}

// usable returns every node named (nodes, and the edges' nodes) and the edges Evaluate
// uses: not towards External targets, with both nodes, with a Reachable or Unreachable
// verdict, and with an observer pod ("@node" when unnamed).
func usable(nodes []string, edges []Edge) (set, []Edge) {
	all := set{}
	for _, n := range nodes {
		if n != "" {
			all.add(n)
		}
	}
	var es []Edge
	for _, e := range edges {
		if e.ObserverNode == "" || e.TargetNode == "" || e.TargetKind == observation.TargetExternal ||
			(e.Verdict != observation.VerdictReachable && e.Verdict != observation.VerdictUnreachable) {
			continue
		}
		if e.ObserverPod == "" {
			e.ObserverPod = "@" + e.ObserverNode
		}
		es = append(es, e)
		all.add(e.ObserverNode)
		all.add(e.TargetNode)
	}
	return all, es
}

// listPeers lists at most MaxPeersInMessage failing observers ("pod (node)"), sorted, of
// the counted observer nodes only.
func listPeers(pods []string, nodes []string) string {
	var keep []string
	for _, p := range pods {
		for _, n := range nodes {
			if strings.HasSuffix(p, " ("+n+")") {
				keep = append(keep, p)
				break
			}
		}
	}
	slices.Sort(keep)
	if len(keep) <= MaxPeersInMessage {
		return strings.Join(keep, ", ")
	}
	return strings.Join(keep[:MaxPeersInMessage], ", ") + fmt.Sprintf(" and %d more", len(keep)-MaxPeersInMessage)
}
