// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// grayRing is a ring of n one-agent nodes, each probing every other node a round (10 s,
// 3 echoes); lossy[i] is how many of the echoes towards node i are lost.
type grayRing struct {
	e     *Engine
	n     int
	t0    time.Time
	round int
}

func newGrayRing(n int) *grayRing {
	return &grayRing{e: New(Config{}), n: n, t0: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)}
}

func (g *grayRing) now() time.Time { return g.t0.Add(time.Duration(g.round) * 10 * time.Second) }

func (g *grayRing) run(rounds int, lossy map[int]uint64) {
	for range rounds {
		at := g.now()
		var obs []observation.Observation
		for i := range g.n {
			src := observation.Source{Namespace: "netpulse", Name: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-%d", i), Node: fmt.Sprintf("node-%d", i)}
			for d := range g.n {
				if d == i {
					continue
				}
				tgt := observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: fmt.Sprintf("agent-%d", d), UID: fmt.Sprintf("uid-%d", d),
					Node: fmt.Sprintf("node-%d", d), Address: fmt.Sprintf("10.0.0.%d", d+1)}
				o := observation.Observation{Source: src, Target: tgt, ProbeType: "icmp", Timestamp: at, Success: true, Sent: 3, Lost: lossy[d]}
				o.RTT = observation.NewHistogram(8)
				o.RTT.Record(0.0002)
				obs = append(obs, o)
			}
		}
		g.e.Observe(obs, at)
		g.e.Judge(at.Add(time.Second))
		g.round++
	}
}

// nodes is every node of the ring as current, without the condition.
func (g *grayRing) nodes() map[string]*NodeCondition {
	out := map[string]*NodeCondition{}
	for i := range g.n {
		out[fmt.Sprintf("node-%d", i)] = nil
	}
	return out
}

func TestGrayNodeConditionMarksTheBlamedNodeOnly(t *testing.T) {
	g := newGrayRing(8)
	g.run(12, nil)
	d := g.e.ReconcileGrayNodes(g.now(), g.nodes(), GrayNodeConfig{})
	require.Empty(t, d.Writes, "healthy nodes without the condition get no write")

	for range 30 {
		g.run(1, map[int]uint64{0: 1})
		if nodes, _ := g.e.GrayNodes(); len(nodes) > 0 {
			break
		}
	}
	now := g.now()
	cur := g.nodes()
	d = g.e.ReconcileGrayNodes(now, cur, GrayNodeConfig{})
	require.False(t, d.Suppressed)
	require.Equal(t, []string{"node-0"}, d.Marked)
	require.Len(t, d.Writes, 1, "only the blamed node is written: %+v", d.Writes)
	w := d.Writes[0]
	require.Equal(t, "node-0", w.Node)
	require.Equal(t, StatusTrue, w.Condition.Status)
	require.Equal(t, NodeReasonPacketLoss, w.Condition.Reason)
	require.True(t, w.Changed)
	require.True(t, d.Gray, "the plan stage writes it behind the outage verdicts")
	require.Nil(t, w.Replaces, "the node carried no condition")
	require.True(t, strings.HasPrefix(w.Condition.Message, "packet loss at this node, seen by its observers on other nodes: "), w.Condition.Message)
	require.Contains(t, w.Condition.Message, "echoes over")

	// Written: nothing new until the heartbeat is due.
	cur["node-0"] = &NodeCondition{Status: StatusTrue, Reason: NodeReasonPacketLoss, Message: "older figures", LastHeartbeat: now}
	require.Empty(t, g.e.ReconcileGrayNodes(now.Add(time.Minute), cur, GrayNodeConfig{}).Writes, "a message change alone is no write")
	d = g.e.ReconcileGrayNodes(now.Add(11*time.Minute), cur, GrayNodeConfig{})
	require.Len(t, d.Writes, 1)
	require.False(t, d.Writes[0].Changed)
	require.Equal(t, cur["node-0"], d.Writes[0].Replaces, "a heartbeat of what the API holds")
	require.Equal(t, StatusTrue, d.Writes[0].Condition.Status)
}

func TestGrayNodeConditionHoldsThenClears(t *testing.T) {
	e := New(Config{})
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	// The previous writer's mark, 30 s old: held for min_hold (1m) after it.
	cur := map[string]*NodeCondition{
		"node-0": {Status: StatusTrue, Reason: NodeReasonHighLatency, LastHeartbeat: t0},
		"node-1": nil,
	}
	require.Empty(t, e.ReconcileGrayNodes(t0.Add(30*time.Second), cur, GrayNodeConfig{}).Writes, "held: still True")
	d := e.ReconcileGrayNodes(t0.Add(61*time.Second), cur, GrayNodeConfig{})
	require.Len(t, d.Writes, 1)
	w := d.Writes[0]
	require.Equal(t, "node-0", w.Node)
	require.Equal(t, StatusFalse, w.Condition.Status)
	require.Equal(t, NodeReasonWithinThresholds, w.Condition.Reason)
	require.True(t, w.Changed)
	require.Equal(t, StatusTrue, w.Replaces.Status)

	// A longer hold keeps it.
	e = New(Config{})
	require.Empty(t, e.ReconcileGrayNodes(t0.Add(61*time.Second), cur, GrayNodeConfig{MinHold: 5 * time.Minute}).Writes)

	// A cleared condition is written once: never heartbeated, never marked again without
	// a blame.
	e = New(Config{})
	cur = map[string]*NodeCondition{"node-0": {Status: StatusFalse, Reason: NodeReasonWithinThresholds, LastHeartbeat: t0}}
	require.Empty(t, e.ReconcileGrayNodes(t0.Add(time.Minute), cur, GrayNodeConfig{}).Writes)
	require.Empty(t, e.ReconcileGrayNodes(t0.Add(11*time.Minute), cur, GrayNodeConfig{}).Writes, "no heartbeat of a cleared condition")
	require.Empty(t, e.ReconcileGrayNodes(t0.Add(24*time.Hour), cur, GrayNodeConfig{}).Writes)
}

func TestGrayNodeConditionSuppressedWhenSystemic(t *testing.T) {
	g := newGrayRing(8)
	g.run(12, nil)
	lossy := map[int]uint64{0: 1, 1: 1, 2: 1, 3: 1, 4: 1}
	systemic := false
	for range 40 {
		g.run(1, lossy)
		if _, systemic = g.e.GrayNodes(); systemic {
			break
		}
	}
	require.True(t, systemic)
	cur := g.nodes()
	cur["node-0"] = &NodeCondition{Status: StatusTrue, Reason: NodeReasonPacketLoss, LastHeartbeat: g.now()}
	cur["node-7"] = &NodeCondition{Status: StatusFalse, Reason: NodeReasonWithinThresholds, LastHeartbeat: g.now()}
	d := g.e.ReconcileGrayNodes(g.now(), cur, GrayNodeConfig{})
	require.True(t, d.Suppressed)
	require.Empty(t, d.Marked)
	var got []string
	for _, w := range d.Writes {
		require.Equal(t, StatusUnknown, w.Condition.Status)
		require.Equal(t, NodeReasonSuppressed, w.Condition.Reason)
		require.True(t, w.Changed)
		got = append(got, w.Node)
	}
	require.Equal(t, []string{"node-0", "node-7"}, got, "only the nodes that carry the condition; the other blamed nodes get no write")
}

func TestGrayNodeConditionOwnNodesOnly(t *testing.T) {
	g := newGrayRing(8)
	g.run(12, nil)
	for range 30 {
		g.run(1, map[int]uint64{0: 1})
		if nodes, _ := g.e.GrayNodes(); len(nodes) > 0 {
			break
		}
	}
	cur := g.nodes()
	delete(cur, "node-0") // another shard's
	d := g.e.ReconcileGrayNodes(g.now(), cur, GrayNodeConfig{})
	require.Empty(t, d.Writes)
	require.Empty(t, d.Marked)
}

// Every condition the gray node condition is written with is recognised as its own
// (the stale-gray cleanup finds it under any type); the outage condition's and others'
// are not.
func TestIsGrayNodeConditionKnowsEveryMessage(t *testing.T) {
	var written []NodeCondition
	for _, reason := range []string{NodeReasonPacketLoss, NodeReasonHighLatency} {
		for _, side := range []string{SideTarget, SideObserver, SideBoth} {
			for _, st := range []GrayStatus{{}, {Baseline: time.Millisecond, Median: 21 * time.Millisecond}} {
				written = append(written, NodeCondition{Reason: reason, Message: grayNodeMessage(GrayNode{Reason: reason, Side: side, Status: st})},
					NodeCondition{Reason: reason, Message: msgGrayHolding})
			}
		}
	}
	written = append(written, NodeCondition{Reason: NodeReasonWithinThresholds, Message: msgGrayWithin},
		NodeCondition{Reason: NodeReasonSuppressed, Message: msgGraySuppressed})
	for _, c := range written {
		require.True(t, IsGrayNodeCondition(c.Reason, c.Message), "%s: %s", c.Reason, c.Message)
	}
	for _, c := range []NodeCondition{
		{Reason: NodeReasonSuppressed, Message: msgSuppressed}, // the outage condition's
		{Reason: NodeReasonReachable, Message: msgReachable},
		{Reason: NodeReasonPacketLoss, Message: "eth0 drops"}, // another controller's
		{Reason: "KernelDeadlock", Message: msgGrayWithin},    // our message under a reason we never write with it
		{Reason: NodeReasonWithinThresholds, Message: ""},
	} {
		require.False(t, IsGrayNodeCondition(c.Reason, c.Message), "%s: %s", c.Reason, c.Message)
	}
}
