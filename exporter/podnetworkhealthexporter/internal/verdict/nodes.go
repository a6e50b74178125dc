// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"maps"
	"slices"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/quorum"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"
)

// Node condition statuses (the values of corev1.ConditionStatus).
const (
	StatusTrue    = "True"
	StatusFalse   = "False"
	StatusUnknown = "Unknown"
)

// Reasons and messages of the node condition. Messages carry no counts or peer lists:
// those change with every rotation of the observers, and a message change alone is no
// reason to write (the quorum details are in the exporter's log and the PodNetworkHealth
// objects).
const (
	NodeReasonUnreachable    = quorum.ReasonUnreachableFromPeers
	NodeReasonReachable      = quorum.ReasonReachable
	NodeReasonBelowQuorum    = quorum.ReasonBelowQuorum
	NodeReasonNoObservations = quorum.ReasonNoObservations
	NodeReasonSuppressed     = quorum.ReasonSuppressed

	msgUnreachable    = "pods on this node are unreachable from healthy observers on other nodes (a quorum of them, and more than still reach it)"
	msgHolding        = "pods on this node were unreachable from a quorum of healthy observers within the hold time; the condition clears when they stay reachable for it"
	msgReachable      = "pods on this node are reachable from their observers on other nodes"
	msgBelowQuorum    = "some observers fail to reach pods on this node, fewer than the quorum or than those that still reach them"
	msgNoObservations = "no recent observation of pods on this node"
	msgSuppressed     = "node marking is suppressed: too many observers or nodes fail at once for a single node to be blamed (a cluster-wide fault or broken probers); the PodNetworkHealth objects show what fails"
)

// NodeConfig configures the node judgement. Zero fields take the defaults.
type NodeConfig struct {
	// Quorum and MaxFailingShare: see package quorum.
	Quorum          int
	MaxFailingShare float64
	// Heartbeat rewrites an unchanged True or Unknown condition this often (default 10m;
	// a False one is written once), stretched with
	// the objects' heartbeats to fit the budget.
	Heartbeat time.Duration
	// MinHold keeps a node marked until this long after the last evidence against it
	// (default 1m): conditions that other controllers act on must not follow a flapping
	// link round by round. Marking itself is immediate.
	MinHold time.Duration
	// EdgeMaxAge: observations older than this say nothing about now (default 2m).
	EdgeMaxAge time.Duration
	// Zones, when set, localises failures above the node first (package zones): the
	// edges of a cut zone pair are explained by it and the node quorum does not see them.
	Zones *zones.Config
}

// Defaults of NodeConfig.
const (
	DefaultNodeHeartbeat  = 10 * time.Minute
	DefaultNodeMinHold    = time.Minute
	DefaultNodeEdgeMaxAge = 2 * time.Minute
	// nodeWriteInFlight: a condition decided this recently is not decided again while the
	// node informer has not caught up with it.
	nodeWriteInFlight = 30 * time.Second
)

func (c NodeConfig) withDefaults() NodeConfig {
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultNodeHeartbeat
	}
	if c.MinHold < 0 {
		c.MinHold = 0
	} else if c.MinHold == 0 {
		c.MinHold = DefaultNodeMinHold
	}
	if c.EdgeMaxAge <= 0 {
		c.EdgeMaxAge = DefaultNodeEdgeMaxAge
	}
	return c
}

// NodeCondition is the condition of one node as the API holds it (or as it should).
type NodeCondition struct {
	Status, Reason, Message string
	// LastHeartbeat: when it was last written (zero when unknown).
	LastHeartbeat time.Time
}

// NodeWrite is one node condition to write. How urgent it is is the plan stage's
// decision (plan.NodeWritePriority), from what it replaces.
type NodeWrite struct {
	Node      string
	Condition NodeCondition
	// Changed: status or reason differ from the API's (otherwise a heartbeat).
	Changed bool
	// Replaces is the condition this write replaces: the API's, or the one this engine
	// decided while the node informer has not caught up with it; nil when the node has
	// none.
	Replaces *NodeCondition
}

// NodeDecision is the outcome of ReconcileNodes.
type NodeDecision struct {
	Writes []NodeWrite
	// Marked: nodes judged to have a pod-network problem now (before the hold).
	Marked []string
	// Suppressed, with the quorum's reason (which carries counts: for logs, not for the
	// API).
	Suppressed       bool
	SuppressedReason string
	// Zones is the zone judgement (empty unless NodeConfig.Zones is set).
	Zones zones.Result
	// Gray: the gray node condition's judgement (ReconcileGrayNodes), not the outage
	// condition's.
	Gray bool
}

type nodeState struct {
	problem      bool      // the condition says True
	lastEvidence time.Time // newest decision that marked it
	reason       string    // the mark's reason (the gray condition holds it)
	// decided is the last condition this engine decided to write, and when.
	decided   NodeCondition
	decidedAt time.Time
}

type nodeStates map[string]*nodeState

// edges reduces the per-target judgement to quorum edges: the evidence behind each pod or
// node target's verdict (its observers' newest successes, or the failures of its newest
// run), younger than maxAge. A failure counts against a node only when its target is
// judged unreachable by its observers: a lone failure the others contradict says nothing
// about the node (and an observer whose failures nobody shares reaches nobody, so quorum
// finds it unhealthy anyway).
func (e *Engine) edges(now time.Time, maxAge time.Duration) []quorum.Edge {
	var out []quorum.Edge
	// A target nobody has probed for this long is gone or no longer probed (a deleted
	// pod: its peers stop probing it at once): its last successes say nothing about its
	// node now, and would hide a fault of the node's new pod from the quorum ("an observer
	// that reaches a pod on the node"). Found end to end: a pod deleted and replaced, then
	// its node partitioned, read as a wide outage until the old pod's target expired.
	gone := e.settleTime()
	for _, t := range e.targets {
		if t.key.Kind == observation.TargetExternal || t.target.Node == "" || now.Sub(t.lastSeen) > gone {
			continue
		}
		if ob := e.observers[t.key.UID]; t.key.UID != "" && ob != nil && ob.silent && t.leaving {
			// An agent that stopped reporting while its pod goes away (a roll, a drain:
			// the gateway's index saw it terminating or deleted) is no evidence about its
			// node: probes that failed as it went away say nothing about the node, and the
			// node's new agent speaks for it. An agent that stopped reporting while its pod
			// lives on is evidence: a partition of its node cuts its own reports to the
			// gateway too (found on real nodes, where the gateway is a pod elsewhere).
			continue
		}
		for _, o := range t.evidence() {
			if now.Sub(o.at) > maxAge {
				break // newest first
			}
			if ob := e.observers[o.observer]; ob != nil && ob.silent {
				// A silent observer's last outcomes are no evidence about now: typically
				// a pod deleted in a roll, whose last probes failed towards peers that
				// were going away at the same time.
				continue
			}
			v := observation.VerdictReachable
			if !o.ok {
				v = observation.VerdictUnreachable
			}
			out = append(out, quorum.Edge{ObserverPod: o.observer, ObserverNode: o.node, TargetNode: t.target.Node,
				TargetKind: t.key.Kind, Verdict: v})
		}
	}
	return out
}

// ReachedElsewhere takes successes towards targets this engine does not judge, and that
// the caller drops: a sharded gateway's points towards other shards' targets (the agents
// of another shard count, or not rolled yet, send them). Each is evidence that its
// observer's node works, which a shard's node quorum cannot otherwise see when its own
// targets are on few nodes: on 3 nodes and 2 shards, the shard of 2 nodes sees each
// observer reach at most one node, the one it then fails to reach (docs/sharding.md).
// Only the newest time per voter node is kept; no target, pair or verdict is made. The
// caller guarantees that no target this engine judges is on such a target's node.
//
// A success counts for its source's node only (Source.Node, from the gateway's index or
// the authenticated identity, never a target's claim), towards a pod or node on another
// node: a sender claiming successes makes at most its own node a working observer, as it
// could by claiming a success towards any other node of an unsharded gateway. It returns
// how many observations were unusable (no source, no target node, dated more than
// MaxFutureSkew after now); failures and External targets are not used and not counted.
func (e *Engine) ReachedElsewhere(obs []observation.Observation, now time.Time) (ignored int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	future := now.Add(e.cfg.MaxFutureSkew)
	for i := range obs {
		o := &obs[i]
		if !o.Success || o.Target.Kind == observation.TargetExternal {
			continue
		}
		node, votes := e.voterOf(o.Source)
		if o.Source.UID == "" || node == "" || o.Target.Node == "" || o.Timestamp.IsZero() || o.Timestamp.After(future) {
			ignored++
			continue
		}
		if !votes || o.Target.Node == node {
			continue // a node's view of itself says nothing about its pod network
		}
		if o.Timestamp.After(e.reachedElsewhere[node]) {
			e.reachedElsewhere[node] = o.Timestamp
		}
	}
	return ignored
}

// workingElsewhere returns the voter nodes that reached a node elsewhere within maxAge,
// sorted, and forgets those older than TargetTTL (caller holds mu).
func (e *Engine) workingElsewhere(now time.Time, maxAge time.Duration) []string {
	var out []string
	for n, at := range e.reachedElsewhere {
		switch age := now.Sub(at); {
		case age > e.cfg.TargetTTL:
			delete(e.reachedElsewhere, n)
		case age <= maxAge:
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// localiseZones judges the zone pairs and returns the edges that no zone pair explains
// (caller holds mu): those of a cut zone pair, and the failures towards a node that only
// one other zone sees (unlocalised below).
//
// The zone judgement's evidence is, for each reporting observer and each target zone, the
// votes of its newest round that probed the zone among its last zoneRounds rounds,
// failures included whatever the target's verdict: a zone cut fails a third of a target's
// observers in a three-zone cluster, which never makes the target Unreachable and so
// never shows in the quorum's edges. Newest rounds, so that the judgement sees a cut
// within a round or two of the node quorum (older successes would dilute it for longer);
// per target zone, because a sampled round holds K+M targets: in a small cluster some
// rounds of the rotation send only one or two of a zone's observers to another zone, and
// the newest round alone flickered between cut and not localised (found end to end: a
// 16-node, 3-zone cut never held for plan.ZoneObjects' confirmation, and a node was marked
// in a round where it did not hold). At most targetVotes votes per target: O(N) edges.
//
// A node's zone is the one the gateway's index gave its pods as targets (destination
// cloud.availability_zone, from the Node's label, never from a sender): a node that is no
// target yet has no zone, and its edges count for no zone.
func (e *Engine) localiseZones(now time.Time, maxAge time.Duration, edges []quorum.Edge, cfg zones.Config) ([]quorum.Edge, zones.Result) {
	zoneOf := make(map[string]string, len(e.targets))
	for _, t := range e.targets {
		if t.target.Node != "" && t.target.Zone != "" {
			zoneOf[t.target.Node] = t.target.Zone
		}
	}
	// An observer's node that no target here is on (a sharded gateway judges only its
	// shard's targets, and hears every agent): its zone as the index gave its own pod.
	// Without it, 7 of 8 observers of a shard of 8 had no zone, so their failures across a
	// cut zone pair stayed in the node quorum and marked nodes (the shard simulation's
	// zone cut: 58 nodes of 2,000).
	for _, ob := range e.observers {
		if ob.node != "" && ob.zone != "" && !ob.silent {
			if _, ok := zoneOf[ob.node]; !ok {
				zoneOf[ob.node] = ob.zone
			}
		}
	}
	ze := e.zoneEdges(now, maxAge, zoneOf)
	zr := zones.Evaluate(ze, cfg)
	e.setCutZones(zr.CutPairs(), zoneOf, now)
	if len(zr.CutPairs()) > 0 {
		edges = slices.DeleteFunc(edges, func(ed quorum.Edge) bool {
			return zr.Cut(zoneOf[ed.ObserverNode], zoneOf[ed.TargetNode])
		})
	}
	// The quorum's edges of a target judged Unreachable are its failures only: whether its
	// own zone reaches it comes from the zone judgement's votes, successes included.
	reachedInZone := map[string]bool{}
	for _, z := range ze {
		if z.Reachable && z.ObserverZone == z.TargetZone && z.ObserverNode != z.TargetNode {
			reachedInZone[z.TargetNode] = true
		}
	}
	return unlocalised(edges, zoneOf, reachedInZone), zr
}

// zoneRounds is how many of an observer's newest rounds its zone votes may come from.
const zoneRounds = 3

// zoneEdges is the zone judgement's evidence (see localiseZones; caller holds mu).
func (e *Engine) zoneEdges(now time.Time, maxAge time.Duration, zoneOf map[string]string) []zones.Edge {
	type observerZone struct{ observer, zone string }
	newest := map[observerZone]time.Time{}
	usable := func(v *vote) bool {
		if zoneOf[v.node] == "" || now.Sub(v.at) > maxAge {
			return false
		}
		ob := e.observers[v.observer]
		if ob == nil || ob.silent {
			return false
		}
		// Its last zoneRounds rounds: a vote older than that is not news about the zone.
		iv := min(ob.interval, e.cfg.MaxProbeInterval)
		return !v.at.Before(ob.lastSeen.Add(-(zoneRounds*iv - iv/2)))
	}
	for _, t := range e.targets {
		tz := zoneOf[t.target.Node]
		if t.key.Kind == observation.TargetExternal || tz == "" {
			continue
		}
		for i := 0; i < t.n; i++ {
			if v := &t.votes[i]; usable(v) {
				k := observerZone{v.observer, tz}
				if v.at.After(newest[k]) {
					newest[k] = v.at
				}
			}
		}
	}
	var ze []zones.Edge
	for _, t := range e.targets {
		tz := zoneOf[t.target.Node]
		if t.key.Kind == observation.TargetExternal || tz == "" {
			continue
		}
		for i := 0; i < t.n; i++ {
			if v := &t.votes[i]; usable(v) && v.at.Equal(newest[observerZone{v.observer, tz}]) {
				ze = append(ze, zones.Edge{ObserverNode: v.node, ObserverZone: zoneOf[v.node], TargetNode: t.target.Node, TargetZone: tz, Reachable: v.ok, At: v.at})
			}
		}
	}
	return ze
}

// unlocalised drops the failures towards a node that a cut above the node explains as
// well as a problem of the node does, when the zones involved have two nodes or more
// (reachedInZone: the target nodes an observer of their own zone reaches):
//   - observers of one other zone alone fail it (a cut between the two zones);
//   - observers of other zones fail it while an observer of its own zone reaches it, or
//     while two nodes of its zone are in that case (its zone cut off from the others: the
//     node works inside its zone; a sampled node may have no own-zone outcome yet). Found in the shard
//     simulation: a zone isolated from the two others marked 29 of its nodes for the
//     rounds before the zone judgement localised the cut (observers of two zones failed
//     each, so the first rule did not apply).
//
// Such a node is not marked until an observer of its own zone (or, for the first rule, of
// a third zone) fails too: a node whose pod network is down fails them all, within a
// round or two of sampled probes. The zone judgement localises the cut once it holds;
// this keeps the rounds before that (and a flicker of it) from marking nodes. A node alone
// in its zone, or seen failing from a zone of one node, is judged as before: no zone pair
// can be localised there.
func unlocalised(edges []quorum.Edge, zoneOf map[string]string, reachedInZone map[string]bool) []quorum.Edge {
	zoneSize := map[string]int{}
	for _, z := range zoneOf {
		zoneSize[z]++
	}
	failingZones := map[string]map[string]struct{}{} // target node -> zones of its failing observers
	for _, ed := range edges {
		if ed.Verdict != observation.VerdictUnreachable || ed.ObserverNode == ed.TargetNode {
			continue
		}
		zs := failingZones[ed.TargetNode]
		if zs == nil {
			zs = map[string]struct{}{}
			failingZones[ed.TargetNode] = zs
		}
		zs[zoneOf[ed.ObserverNode]] = struct{}{}
	}
	// A zone two or more of whose nodes are reached inside it and failed from outside
	// looks cut off: a node of it that no observer of its own zone has sampled yet is
	// judged with them, not alone.
	cutOff := map[string]int{}
	for target, zs := range failingZones {
		if tz := zoneOf[target]; tz != "" && reachedInZone[target] && !hasZone(zs, tz) {
			cutOff[tz]++
		}
	}
	ambiguous := map[string]bool{}
	for target, zs := range failingZones {
		tz := zoneOf[target]
		if tz == "" || zoneSize[tz] < 2 || (len(zs) != 1 && !reachedInZone[target] && cutOff[tz] < 2) {
			continue
		}
		ambiguous[target] = true
		for oz := range zs {
			if oz == "" || oz == tz || zoneSize[oz] < 2 {
				ambiguous[target] = false
				break
			}
		}
	}
	maps.DeleteFunc(ambiguous, func(_ string, v bool) bool { return !v })
	if len(ambiguous) == 0 {
		return edges
	}
	return slices.DeleteFunc(edges, func(ed quorum.Edge) bool {
		return ed.Verdict == observation.VerdictUnreachable && ed.ObserverNode != ed.TargetNode && ambiguous[ed.TargetNode]
	})
}

// setCutZones keeps the cut zone pairs for the target judgement (caller holds mu), and
// has every target judged again when they change.
func (e *Engine) setCutZones(cut []zones.Pair, zoneOf map[string]string, now time.Time) {
	for _, p := range cut {
		if e.zoneCutSeen == nil {
			e.zoneCutSeen = map[zonePairKey]time.Time{}
		}
		e.zoneCutSeen[zonePairKey{p.From, p.To}] = now
		e.zoneOfSeen = zoneOf
	}
	maps.DeleteFunc(e.zoneCutSeen, func(_ zonePairKey, at time.Time) bool { return now.Sub(at) > ZoneCutExplains })
	if len(e.zoneCutSeen) == 0 {
		e.zoneCutSeen, e.zoneOfSeen = nil, nil
	}
	if len(cut) == 0 {
		if e.cutZones != nil {
			e.cutZones, e.cutZoneOf, e.fullPass = nil, nil, true
		}
		return
	}
	next := make(map[zonePairKey]bool, len(cut))
	for _, p := range cut {
		next[zonePairKey{p.From, p.To}] = true
	}
	if !maps.Equal(next, e.cutZones) {
		e.fullPass = true
	}
	e.cutZones, e.cutZoneOf = next, zoneOf
}

// ZoneCutExplains: a pair's verdict change across a zone pair judged cut within this long
// is one its ZoneNetworkHealth carries (PairState.ZoneCut): the cut's own writes, and the
// heal's after the zone object's hold (min_hold, 1 minute by default).
const ZoneCutExplains = 2 * time.Minute

// acrossZoneCut reports whether a pair from an observer on node to a target in zone tz
// crosses a zone pair judged cut within ZoneCutExplains (caller holds mu).
func (e *Engine) acrossZoneCut(node, tz string) bool {
	if e.zoneCutSeen == nil || node == "" || tz == "" {
		return false
	}
	_, ok := e.zoneCutSeen[zonePairKey{e.zoneOfSeen[node], tz}]
	return ok
}

// acrossCut returns the target judgement's filter of votes for a target in zone tz: the
// distrusted nodes' and those of observers whose zone's pair to tz is cut (caller holds
// mu).
func (e *Engine) acrossCut(tz string) func(node string) bool {
	if e.cutZones == nil || tz == "" {
		return e.distrusted
	}
	return func(node string) bool {
		return e.distrusted(node) || e.cutZones[zonePairKey{e.cutZoneOf[node], tz}]
	}
}

// hasZone reports whether zs holds z.
func hasZone(zs map[string]struct{}, z string) bool {
	_, ok := zs[z]
	return ok
}

// settleTime is how long a new writer's view of the observers stays partial: until every
// live agent has delivered whole rounds and every other one reads silent, the longest
// silentAfter of the observers it knows (at least 10 s).
func (e *Engine) settleTime() time.Duration {
	d := 10 * time.Second
	for _, ob := range e.observers {
		d = max(d, ob.silentAfter(e.cfg.MaxProbeInterval))
	}
	return d
}

// ReconcileNodes judges every node from the per-target verdicts (package quorum over
// the observers' newest outcomes), updates which observers are distrusted, and decides
// the node conditions to write: on a change of status or reason, or when the heartbeat
// is due; never for a message change alone. current holds each node's condition as the
// API has it (nil: none). Nodes marked stay marked for MinHold after the last evidence.
// While marking is suppressed every node reads Unknown / Suppressed: the condition never
// claims the opposite of what the observers see.
func (e *Engine) ReconcileNodes(now time.Time, current map[string]*NodeCondition, cfg NodeConfig) NodeDecision {
	cfg = cfg.withDefaults()
	e.mu.Lock()
	defer e.mu.Unlock()
	nodes := make([]string, 0, len(current))
	for n := range current {
		nodes = append(nodes, n)
	}
	edges := e.edges(now, cfg.EdgeMaxAge)
	var zr zones.Result
	if cfg.Zones != nil {
		edges, zr = e.localiseZones(now, cfg.EdgeMaxAge, edges, *cfg.Zones)
	}
	res := quorum.Evaluate(nodes, edges, quorum.Config{Quorum: cfg.Quorum, MaxFailingShare: cfg.MaxFailingShare,
		WorkingObservers: e.workingElsewhere(now, cfg.EdgeMaxAge)})
	out := NodeDecision{Suppressed: res.Suppressed, SuppressedReason: res.SuppressedReason, Zones: zr}
	bad := map[string]bool{}
	if !res.Suppressed {
		for _, n := range res.Marked() {
			bad[n] = true
		}
		out.Marked = res.Marked()
	}
	settling := !e.termStart.IsZero() && now.Sub(e.termStart) < e.settleTime()
	e.distrust(res, bad, settling)
	warming := !e.termStart.IsZero() && now.Sub(e.termStart) < cfg.EdgeMaxAge
	hb := e.heartbeat(cfg.Heartbeat)
	for _, ns := range res.Nodes {
		cur, known := current[ns.Node]
		if !known {
			continue // a node named only by an observation: not ours to write
		}
		if w, ok := e.nodeWrite(now, ns, cur, nodeWindow{suppressed: res.Suppressed, settling: settling, warming: warming, heartbeat: hb, minHold: cfg.MinHold}); ok {
			out.Writes = append(out.Writes, w)
		}
	}
	return out
}

// distrust updates which observers' nodes are distrusted: the nodes the quorum marked
// (bad), and those the previous writer blamed until there is evidence about them (caller
// holds mu).
func (e *Engine) distrust(res quorum.Result, bad map[string]bool, settling bool) {
	for _, ns := range res.Nodes {
		switch {
		case !e.seededBad[ns.Node]:
		case ns.Reason == NodeReasonNoObservations || settling && ns.Reason != NodeReasonReachable:
			// Blamed by the previous writer; no evidence either way yet, or only a partial
			// view that does not show observers reaching it.
			bad[ns.Node] = true
		default:
			delete(e.seededBad, ns.Node)
		}
	}
	for n := range e.seededBad {
		if !slices.ContainsFunc(res.Nodes, func(ns quorum.NodeStatus) bool { return ns.Node == n }) {
			bad[n] = true
		}
	}
	if !maps.Equal(bad, e.badNodes) {
		e.badNodes = bad
		e.fullPass = true // the attribution of some verdicts changed
	}
}

// nodeWindow is what one node decision depends on beyond the node.
type nodeWindow struct {
	suppressed, settling, warming bool
	heartbeat, minHold            time.Duration
}

// nodeWrite decides the condition of one node: on a change of status or reason, or when
// the heartbeat is due; never for a message change alone (caller holds mu).
func (e *Engine) nodeWrite(now time.Time, ns quorum.NodeStatus, cur *NodeCondition, w nodeWindow) (NodeWrite, bool) {
	st := e.nodes[ns.Node]
	if st == nil {
		st = &nodeState{}
		if cur != nil && cur.Status == StatusTrue {
			st.problem, st.lastEvidence = true, cur.LastHeartbeat
		}
		e.nodes[ns.Node] = st
	}
	want := NodeCondition{Status: StatusFalse, Reason: ns.Reason}
	switch {
	case w.suppressed:
		want = NodeCondition{Status: StatusUnknown, Reason: NodeReasonSuppressed, Message: msgSuppressed}
	case ns.Problem:
		st.lastEvidence = now
		want = NodeCondition{Status: StatusTrue, Reason: NodeReasonUnreachable, Message: msgUnreachable}
	case st.problem && now.Sub(st.lastEvidence) < w.minHold:
		want = NodeCondition{Status: StatusTrue, Reason: NodeReasonUnreachable, Message: msgHolding}
	case ns.Reason == NodeReasonBelowQuorum:
		want.Message = msgBelowQuorum
	case ns.Reason == NodeReasonReachable:
		want.Message = msgReachable
	default:
		// Silence reads as silence, not as reachable.
		want = NodeCondition{Status: StatusUnknown, Reason: NodeReasonNoObservations, Message: msgNoObservations}
	}
	if w.suppressed {
		// Suppression says nothing new about the node: the hold keeps running.
	} else {
		st.problem = want.Status == StatusTrue
	}
	// What the API holds (or what was just decided, while the informer catches up).
	base := cur
	if st.decidedAt.After(now.Add(-nodeWriteInFlight)) && (cur == nil || cur.LastHeartbeat.Before(st.decidedAt.Truncate(time.Second))) {
		d := st.decided
		d.LastHeartbeat = st.decidedAt
		base = &d
	}
	if w.settling && base != nil && (want.Reason == NodeReasonSuppressed ||
		base.Status == StatusTrue && want.Status != StatusTrue && want.Reason != NodeReasonReachable) {
		// A new writer's first rounds see only the agents that reconnected so far, some
		// of them with part of a round: what the API holds stands. Suppression, and
		// clearing a marked node short of observers reaching it, wait for the full view.
		return NodeWrite{}, false
	}
	if base == nil && want.Status != StatusTrue {
		// Never marked: a node found fine (or not yet observed, or with marking
		// suppressed) is not news. Its missing condition reads "no problem found", and how
		// fresh that is, the writer's Lease says: at 65,000 nodes a False on every node
		// was 65,000 writes at a cold start, hours of the write budget.
		return NodeWrite{}, false
	}
	if want.Reason == NodeReasonNoObservations && (base.Status != StatusTrue || w.warming) {
		// Nothing observed yet (a new node, a new writer in its first EdgeMaxAge):
		// say nothing rather than overwrite what the API holds or write a state the
		// first round replaces.
		return NodeWrite{}, false
	}
	changed := base == nil || base.Status != want.Status || base.Reason != want.Reason
	if !changed && !heartbeatDue(base, now, w.heartbeat) {
		return NodeWrite{}, false
	}
	want.LastHeartbeat = now
	st.decided, st.decidedAt = want, now
	return NodeWrite{Node: ns.Node, Condition: want, Changed: changed, Replaces: clone(base)}, true
}

// heartbeatDue: an unchanged condition is rewritten only while it claims something (True,
// or Unknown), once its heartbeat is due. A cleared one (False) is written once: rewriting
// it to look fresh is a write per node and heartbeat that says nothing new.
func heartbeatDue(base *NodeCondition, now time.Time, heartbeat time.Duration) bool {
	return base.Status != StatusFalse && now.Sub(base.LastHeartbeat) >= heartbeat
}

// clone copies a condition, so that a write does not share the caller's.
func clone(c *NodeCondition) *NodeCondition {
	if c == nil {
		return nil
	}
	d := *c
	return &d
}
