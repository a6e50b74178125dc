// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The gray node condition (node_conditions.degraded_type): the nodes GrayNodes blames,
// with PodNetworkProblem's hold, suppression and write discipline.
const (
	NodeReasonPacketLoss       = reasonPacketLoss
	NodeReasonHighLatency      = reasonHighLatency
	NodeReasonWithinThresholds = "WithinThresholds"

	msgGrayHolding    = "this node's gray verdict ended within the hold time; the condition clears when it stays clear for it"
	msgGrayWithin     = "packet loss and latency at this node are within thresholds"
	msgGraySuppressed = "gray node marking is suppressed: more than half of the nodes with gray evidence are blamed at once (a cluster-wide problem, not a node's)"
)

// Prefixes of the gray condition's messages while a node is blamed (grayNodeMessage).
const (
	msgGrayLossPrefix    = "packet loss at this node, "
	msgGrayLatencyPrefix = "high latency at this node, "
)

// IsGrayNodeCondition reports whether a node condition of any type carries a reason and
// message that only the gray node condition writes: how the gateway finds its earlier
// gray condition on the nodes after node_conditions.degraded_type is unset or renamed,
// when the old name is no longer known (controllers.Nodes.Lead). Every message this
// condition has been written with must stay recognised here.
func IsGrayNodeCondition(reason, message string) bool {
	switch reason {
	case NodeReasonWithinThresholds:
		return message == msgGrayWithin
	case NodeReasonSuppressed:
		return message == msgGraySuppressed
	case NodeReasonPacketLoss:
		return message == msgGrayHolding || strings.HasPrefix(message, msgGrayLossPrefix)
	case NodeReasonHighLatency:
		return message == msgGrayHolding || strings.HasPrefix(message, msgGrayLatencyPrefix)
	}
	return false
}

// GrayNodeConfig configures the gray node condition. Zero fields take NodeConfig's
// defaults.
type GrayNodeConfig struct {
	Heartbeat, MinHold time.Duration
}

// ReconcileGrayNodes decides the gray node conditions to write from GrayNodes: a blamed
// node reads True with its reason (PacketLoss first) and figures, stays True for MinHold
// after its last blame, then reads False / WithinThresholds; while the picture is
// systemic every node that carries the condition reads Unknown / Suppressed. Written on a
// change of status or reason, or when the heartbeat is due, and only for nodes in current
// (the writer's shard). A node that never carried it and is not blamed gets no write, so
// writes follow the blamed nodes, not the cluster's size. The decision is marked Gray: the
// plan stage writes it behind the outage verdicts (plan.NodeWritePriority).
func (e *Engine) ReconcileGrayNodes(now time.Time, current map[string]*NodeCondition, cfg GrayNodeConfig) NodeDecision {
	nc := NodeConfig{Heartbeat: cfg.Heartbeat, MinHold: cfg.MinHold}.withDefaults()
	blamed, systemic := e.GrayNodes()
	e.mu.Lock()
	defer e.mu.Unlock()
	byNode := make(map[string]GrayNode, len(blamed))
	for _, g := range blamed {
		byNode[g.Node] = g
	}
	out := NodeDecision{Suppressed: systemic, Gray: true}
	if systemic {
		out.SuppressedReason = fmt.Sprintf("%d nodes blamed for gray failures at once, more than half of those with gray evidence", len(blamed))
	} else {
		for _, g := range blamed {
			if _, ok := current[g.Node]; ok {
				out.Marked = append(out.Marked, g.Node)
			}
		}
	}
	settling := !e.termStart.IsZero() && now.Sub(e.termStart) < e.settleTime()
	hb := e.heartbeat(nc.Heartbeat)
	for node, cur := range current {
		g, isBlamed := byNode[node]
		if cur == nil && !isBlamed && e.grayNodes[node] == nil {
			continue // healthy and never marked: nothing to say (the common case)
		}
		if w, ok := e.grayNodeWrite(now, node, g, isBlamed, cur, nodeWindow{suppressed: systemic, settling: settling, heartbeat: hb, minHold: nc.MinHold}); ok {
			out.Writes = append(out.Writes, w)
		}
	}
	for n := range e.grayNodes {
		if _, ok := current[n]; !ok {
			delete(e.grayNodes, n) // deleted, or another shard's: its state goes with it
		}
	}
	slices.SortFunc(out.Writes, func(a, b NodeWrite) int {
		switch {
		case a.Node < b.Node:
			return -1
		case a.Node > b.Node:
			return 1
		}
		return 0
	})
	return out
}

// grayNodeWrite decides the gray condition of one node (caller holds mu).
func (e *Engine) grayNodeWrite(now time.Time, node string, g GrayNode, isBlamed bool, cur *NodeCondition, w nodeWindow) (NodeWrite, bool) {
	st := e.grayNodes[node]
	if st == nil {
		st = &nodeState{}
		if cur != nil && cur.Status == StatusTrue {
			// The previous writer's mark: held from its last write, like the outage
			// condition's.
			st.problem, st.lastEvidence, st.reason = true, cur.LastHeartbeat, cur.Reason
		}
		e.grayNodes[node] = st
	}
	var want NodeCondition
	switch {
	case w.suppressed:
		want = NodeCondition{Status: StatusUnknown, Reason: NodeReasonSuppressed, Message: msgGraySuppressed}
	case isBlamed:
		st.lastEvidence, st.reason = now, g.Reason
		want = NodeCondition{Status: StatusTrue, Reason: g.Reason, Message: grayNodeMessage(g)}
	case st.problem && now.Sub(st.lastEvidence) < w.minHold:
		want = NodeCondition{Status: StatusTrue, Reason: st.reason, Message: msgGrayHolding}
	default:
		want = NodeCondition{Status: StatusFalse, Reason: NodeReasonWithinThresholds, Message: msgGrayWithin}
	}
	if !w.suppressed {
		// Suppression says nothing new about the node: the hold keeps running.
		st.problem = want.Status == StatusTrue
	}
	base := cur
	if st.decidedAt.After(now.Add(-nodeWriteInFlight)) && (cur == nil || cur.LastHeartbeat.Before(st.decidedAt.Truncate(time.Second))) {
		d := st.decided
		d.LastHeartbeat = st.decidedAt
		base = &d
	}
	if base == nil && want.Status != StatusTrue {
		return NodeWrite{}, false // never marked: neither fine nor suppressed is news
	}
	if w.settling && base != nil && base.Status == StatusTrue && want.Status != StatusTrue {
		// A new writer's first rounds see part of the evidence: a mark stands until
		// the full view.
		return NodeWrite{}, false
	}
	changed := base == nil || base.Status != want.Status || base.Reason != want.Reason
	if !changed && !heartbeatDue(base, now, w.heartbeat) {
		return NodeWrite{}, false
	}
	want.LastHeartbeat = now
	st.decided, st.decidedAt = want, now
	return NodeWrite{Node: node, Condition: want, Changed: changed, Replaces: clone(base)}, true
}

// grayNodeMessage names the side and the figures of a node's gray verdict.
func grayNodeMessage(g GrayNode) string {
	where := map[string]string{
		SideTarget:   "seen by its observers on other nodes",
		SideObserver: "seen by its own agent towards its targets",
		SideBoth:     "seen both by its observers and by its own agent",
	}[g.Side]
	if g.Reason == NodeReasonPacketLoss {
		return fmt.Sprintf(msgGrayLossPrefix+"%s: %s", where, g.Status.LossText())
	}
	if g.Status.Baseline > 0 {
		return fmt.Sprintf(msgGrayLatencyPrefix+"%s: median RTT %v against a baseline of %v", where,
			g.Status.Median.Round(100*time.Microsecond), g.Status.Baseline.Round(100*time.Microsecond))
	}
	return msgGrayLatencyPrefix + where
}
