// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/probetest"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/internal/shard"
)

// nodeOwnedBy returns a node name, not in skip, that shard index owns of count.
func nodeOwnedBy(t *testing.T, index, count int, skip map[string]bool) string {
	t.Helper()
	for i := range 10000 {
		n := fmt.Sprintf("node-%d", i)
		if !skip[n] && shard.Of(n, count) == index {
			return n
		}
	}
	t.Fatalf("no node of shard %d of %d", index, count)
	return ""
}

// Going from 1 gateway to 3 shards: an agent not rolled yet runs the unsharded
// configuration, so it sends every point to netpulse-gateway (shard 0's leader) and no
// heartbeat. Shard 0 drops the points of other shards' targets (other_shard) but still
// hears the agent in those rounds: it does not read the agent silent (ObserverSilent on
// its objects) in rounds in which none of its targets was shard 0's. Without the dropped
// points counted as the agent's sign of life, LastSeen stays at the first round.
func TestOtherShardPointsKeepTheirSourceReporting(t *testing.T) {
	const count = 3
	cfg := createDefaultConfig().(*Config)
	cfg.LeaderElection.Enabled = false
	cfg.RequireAuthenticatedObservers = false
	cfg.Shard = ShardConfig{Count: count, Index: 0}
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)

	mine := nodeOwnedBy(t, 0, count, nil)
	other1 := nodeOwnedBy(t, 1, count, nil)
	other2 := nodeOwnedBy(t, 2, count, nil)
	agent := probetest.NewAgent("netpulse", "agent-a", "uid-a", nodeOwnedBy(t, 0, count, map[string]bool{mine: true}), "10.0.0.1")
	ok := []probetest.Outcome{{OK: true, RTT: time.Millisecond}, {OK: true, RTT: time.Millisecond}}
	ownTarget := []probetest.Target{{NS: "netpulse", Pod: "agent-m", UID: "uid-m", Node: mine, IP: "10.0.0.2"}}
	otherTargets := []probetest.Target{
		{NS: "netpulse", Pod: "agent-x", UID: "uid-x", Node: other1, IP: "10.0.0.3"},
		{NS: "netpulse", Pod: "agent-y", UID: "uid-y", Node: other2, IP: "10.0.0.4"},
	}

	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	require.NoError(t, e.consume(context.Background(), agent.Round(start, ownTarget, ok[:1])))
	var last time.Time
	for r := 1; r <= 5; r++ {
		last = start.Add(time.Duration(r) * 5 * time.Second)
		// No heartbeat: an unsharded agent sends none.
		require.NoError(t, e.consume(context.Background(), agent.Round(last, otherTargets, ok)))
	}
	obs := e.engine.Observers()
	require.Len(t, obs, 1)
	require.Equal(t, "agent-a", obs[0].Name)
	require.True(t, obs[0].LastSeen.Equal(last), "heard in its last round (%v), not only its first (%v): got %v", last, start, obs[0].LastSeen)
	require.Equal(t, 1, e.engine.Stats().Targets, "only its own target is judged here")
}

// The overlap during a change of gateway.shards from 2 to 3, as it is (docs/sharding.md,
// changing the shard count): the gateways run 3 shards while the agents roll, so some
// agents still route by 2. A node that moved (its owner of 3 is not its owner of 2) is
// judged by its owner of 3 from the rolled agents' observations alone; the old owner
// drops the others' (other_shard; TestOtherShardPointsKeepTheirSourceReporting: it still
// hears those agents). Once every agent has
// rolled, the owner judges it from every observer. Nodes that did not move are judged
// from every observer throughout.
func TestShardCountChangeOverlap(t *testing.T) {
	const oldCount, newCount, agents = 2, 3, 12
	var moved, stayed string
	nodes := make([]string, agents)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%d", i)
		if shard.Of(nodes[i], oldCount) != shard.Of(nodes[i], newCount) {
			moved = nodes[i]
		} else {
			stayed = nodes[i]
		}
	}
	require.NotEmpty(t, moved)
	require.NotEmpty(t, stayed)
	targets := make([]probetest.Target, agents)
	for i, n := range nodes {
		targets[i] = probetest.Target{NS: "netpulse", Pod: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-%d", i), Node: n, IP: fmt.Sprintf("10.0.0.%d", i+1)}
	}

	// One round of every agent, the first `rolled` routing by newCount, the rest by
	// oldCount, into fresh gateways of newCount; it returns each shard's exporter.
	roll := func(rolled int) []*pnhExporter {
		gws := make([]*pnhExporter, newCount)
		for i := range gws {
			cfg := createDefaultConfig().(*Config)
			cfg.LeaderElection.Enabled = false
			cfg.RequireAuthenticatedObservers = false
			cfg.Shard = ShardConfig{Count: newCount, Index: i}
			e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
			require.NoError(t, err)
			gws[i] = e
		}
		now := time.Now().Truncate(time.Second)
		for i := range agents {
			count := oldCount
			if i < rolled {
				count = newCount
			}
			agent := probetest.NewAgent("netpulse", targets[i].Pod, targets[i].UID, nodes[i], targets[i].IP)
			// The agent's per-shard filters: each target's points go to its owner of the
			// agent's count.
			byShard := map[int][]probetest.Target{}
			for j, tg := range targets {
				if j != i {
					s := shard.Of(tg.Node, count)
					byShard[s] = append(byShard[s], tg)
				}
			}
			for s, tgs := range byShard {
				out := make([]probetest.Outcome, len(tgs))
				for k := range out {
					out[k] = probetest.Outcome{OK: true, RTT: time.Millisecond}
				}
				require.NoError(t, gws[s].consume(context.Background(), agent.Round(now, tgs, out)))
			}
		}
		for _, g := range gws {
			g.engine.Judge(now.Add(time.Second))
		}
		return gws
	}
	// reaching: the observer nodes the owner of node (of newCount) judges it from.
	reaching := func(gws []*pnhExporter, node string) int {
		owner := gws[shard.Of(node, newCount)]
		for _, ts := range owner.engine.Targets() {
			if ts.Target.Node == node {
				return ts.Reaching
			}
		}
		return 0
	}
	half := agents / 2
	gws := roll(half)
	rolledObservers := 0
	for i := range half {
		if nodes[i] != moved {
			rolledObservers++
		}
	}
	require.Equal(t, rolledObservers, reaching(gws, moved), "mid-roll: the moved node from the rolled agents only")
	require.Equal(t, agents-1, reaching(gws, stayed), "a node that stayed: every observer")
	for _, ts := range gws[shard.Of(moved, oldCount)].engine.Targets() {
		require.NotEqual(t, moved, ts.Target.Node, "the old owner judges nothing of the moved node")
	}

	gws = roll(agents)
	require.Equal(t, agents-1, reaching(gws, moved), "after the roll: every observer")
	require.Equal(t, agents-1, reaching(gws, stayed))
}

// 3 nodes, 2 shards (the real-node Shards step, issue #40): shard 0 owns two nodes, a and
// b, and a is cut off. Shard 0 sees b's observations of a and of its own node only, so
// from its own targets no observer reaches a node other than itself and a: nobody is a
// healthy observer and marking suppresses itself. b's successes towards c, which shard 0
// drops as another shard's (agents not rolled yet send it every point), show that b works:
// with them a's condition goes True, from b and c as the unsharded gateway sees it.
// Agents that route by the shard count (filter/shard-<i>) send shard 0 none of them: the
// control, which stays suppressed.
func TestDroppedSuccessesShowASmallShardItsObserversWork(t *testing.T) {
	const count = 2
	a := nodeOwnedBy(t, 0, count, nil)
	b := nodeOwnedBy(t, 0, count, map[string]bool{a: true})
	c := nodeOwnedBy(t, 1, count, nil)
	nodes := []string{a, b, c}
	targets := make([]probetest.Target, len(nodes))
	agents := make([]*probetest.Agent, len(nodes))
	for i, n := range nodes {
		targets[i] = probetest.Target{NS: "netpulse", Pod: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-%d", i), Node: n, IP: fmt.Sprintf("10.0.0.%d", i+1)}
		agents[i] = probetest.NewAgent("netpulse", targets[i].Pod, targets[i].UID, n, targets[i].IP)
	}
	run := func(routed bool) verdict.NodeDecision {
		cfg := createDefaultConfig().(*Config)
		cfg.LeaderElection.Enabled = false
		cfg.RequireAuthenticatedObservers = false
		cfg.Shard = ShardConfig{Count: count, Index: 0}
		e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
		require.NoError(t, err)
		cur := map[string]*verdict.NodeCondition{a: nil, b: nil} // shard 0's nodes
		start := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
		var d verdict.NodeDecision
		for r := range 20 {
			at := start.Add(time.Duration(r) * 5 * time.Second)
			for i, ag := range agents {
				var tgs []probetest.Target
				var outs []probetest.Outcome
				for j, tg := range targets {
					if i == j || routed && shard.Of(tg.Node, count) != 0 {
						continue
					}
					cut := r >= 5 && (i == 0 || j == 0)
					tgs = append(tgs, tg)
					outs = append(outs, probetest.Outcome{OK: !cut, RTT: time.Millisecond})
				}
				md := ag.Round(at, tgs, outs)
				ag.Heartbeat(md, at, int64(r+1))
				require.NoError(t, e.consume(context.Background(), md))
			}
			e.engine.Reconcile(at.Add(time.Second))
			d = e.engine.ReconcileNodes(at.Add(time.Second), cur, verdict.NodeConfig{})
			for _, w := range d.Writes {
				cond := w.Condition
				cur[w.Node] = &cond
			}
		}
		require.Equal(t, 2, e.engine.Stats().Targets, "only shard 0's targets are judged")
		return d
	}

	d := run(false)
	assert.False(t, d.Suppressed, d.SuppressedReason)
	assert.Equal(t, []string{a}, d.Marked, "the cut node, from the observers the shard drops the successes of")

	ctl := run(true)
	assert.True(t, ctl.Suppressed, "control: the shard's own targets alone show no working observer")
	assert.Empty(t, ctl.Marked)
}
