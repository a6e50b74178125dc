// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package quorum

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func nodeName(i int) string { return fmt.Sprintf("node-%02d", i) }
func agentPod(i int) string { return fmt.Sprintf("netpulse/agent-%02d", i) }

func clusterNodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = nodeName(i)
	}
	return out
}

// mesh builds the edges of one agent per node probing every other node's agent; reach
// says whether observer i reaches target j. keep (may be nil) samples the edges.
func mesh(n int, reach func(i, j int) bool, keep func(i, j int) bool) []Edge {
	var es []Edge
	for i := range n {
		for j := range n {
			if i == j || (keep != nil && !keep(i, j)) {
				continue
			}
			v := observation.VerdictReachable
			if !reach(i, j) {
				v = observation.VerdictUnreachable
			}
			es = append(es, Edge{ObserverPod: agentPod(i), ObserverNode: nodeName(i), TargetNode: nodeName(j), TargetKind: observation.TargetPod, Verdict: v})
		}
	}
	return es
}

// partitioned: nodes in p reach nobody and nobody reaches them (except each other when
// together is set: a rack cut off as a whole).
func partitioned(p map[int]bool, together bool) func(i, j int) bool {
	return func(i, j int) bool {
		if p[i] && p[j] {
			return together
		}
		return !p[i] && !p[j]
	}
}

func TestOnePartitionedNode(t *testing.T) {
	for _, n := range []int{4, 5, 10} {
		t.Run(fmt.Sprint(n, " nodes"), func(t *testing.T) {
			x := n - 1
			r := Evaluate(clusterNodes(n), mesh(n, partitioned(map[int]bool{x: true}, false), nil), Config{})
			assert.False(t, r.Suppressed, r.SuppressedReason)
			assert.Equal(t, []string{nodeName(x)}, r.Marked(), "exactly the partitioned node")
			assert.Empty(t, r.UnexplainedFailing, "the partitioned node's own failures are explained")
			ns := r.Nodes[x]
			assert.Equal(t, ReasonUnreachableFromPeers, ns.Reason)
			assert.Len(t, ns.FailingObservers, n-1)
			assert.Empty(t, ns.ReachingObservers)
			listed := strings.Count(ns.Message, "netpulse/agent-")
			assert.Equal(t, min(n-1, MaxPeersInMessage), listed, ns.Message)
			if n-1 > MaxPeersInMessage {
				assert.Contains(t, ns.Message, fmt.Sprintf("and %d more", n-1-MaxPeersInMessage))
			}
			assert.Contains(t, ns.Message, "netpulse/agent-00 (node-00), netpulse/agent-01 (node-01)", "sorted")
			for i := range n - 1 {
				assert.False(t, r.Nodes[i].Problem)
				assert.Equal(t, ReasonReachable, r.Nodes[i].Reason, "no other node blamed")
			}
		})
	}
}

func TestBrokenProberMarksNothing(t *testing.T) {
	for _, n := range []int{4, 5, 10} {
		t.Run(fmt.Sprint(n, " nodes"), func(t *testing.T) {
			broken := 1
			reach := func(i, j int) bool { return i != broken }
			r := Evaluate(clusterNodes(n), mesh(n, reach, nil), Config{})
			assert.Empty(t, r.Marked())
			assert.Empty(t, r.Candidates, "one failing observer never meets a quorum of 2")
			assert.Equal(t, []string{agentPod(broken)}, r.UnexplainedFailing)
			// 1 of 4 is more than 20 %, but one observer cannot mark a node by itself:
			// no reason to stop marking (nor is 1 of 1, a writer's first report).
			assert.False(t, r.Suppressed, r.SuppressedReason)
		})
	}
}

// Two broken probers of four (a quorum of them, 50 %) could mark a node together: marking
// is suppressed.
func TestQuorumOfBrokenProbersIsSuppressed(t *testing.T) {
	reach := func(i, j int) bool { return i != 1 && i != 2 }
	r := Evaluate(clusterNodes(4), mesh(4, reach, nil), Config{})
	assert.True(t, r.Suppressed)
	assert.Empty(t, r.Marked())
	assert.Len(t, r.UnexplainedFailing, 2)
}

// The first observer to report to a new writer fails towards one node: 1 of 1 observers,
// fewer than a quorum, so nothing is suppressed (and nothing marked).
func TestOneObserverIsNoSuppression(t *testing.T) {
	reach := func(i, j int) bool { return j != 3 }
	all := mesh(5, reach, nil)
	var first []Edge
	for _, e := range all {
		if e.ObserverNode == nodeName(0) {
			first = append(first, e)
		}
	}
	require.NotEmpty(t, first)
	r := Evaluate(clusterNodes(5), first, Config{})
	assert.Equal(t, []string{agentPod(0)}, r.UnexplainedFailing)
	assert.False(t, r.Suppressed, r.SuppressedReason)
	assert.Empty(t, r.Marked())
}

func TestEverythingFailingIsSuppressed(t *testing.T) {
	for _, n := range []int{3, 10} {
		r := Evaluate(clusterNodes(n), mesh(n, func(i, j int) bool { return false }, nil), Config{})
		assert.True(t, r.Suppressed)
		assert.Empty(t, r.Marked())
		assert.Contains(t, r.SuppressedReason, "no node is marked")
		for _, ns := range r.Nodes {
			assert.Equal(t, ReasonSuppressed, ns.Reason)
		}
	}
}

func TestTwoPartitionedNodesInTen(t *testing.T) {
	for _, together := range []bool{false, true} {
		t.Run(fmt.Sprint("reach each other=", together), func(t *testing.T) {
			r := Evaluate(clusterNodes(10), mesh(10, partitioned(map[int]bool{3: true, 7: true}, together), nil), Config{})
			assert.False(t, r.Suppressed, r.SuppressedReason)
			assert.Equal(t, []string{nodeName(3), nodeName(7)}, r.Marked())
		})
	}
	// Three in ten exceed floor(0.2 x 10) = 2: a systemic problem, suppressed.
	r := Evaluate(clusterNodes(10), mesh(10, partitioned(map[int]bool{1: true, 3: true, 7: true}, false), nil), Config{})
	assert.True(t, r.Suppressed)
	assert.Equal(t, []string{nodeName(1), nodeName(3), nodeName(7)}, r.Candidates)
	assert.Empty(t, r.Marked())
}

func TestQuorumNotMet(t *testing.T) {
	// Only one observer fails to reach node-03 (an asymmetric path problem).
	reach := func(i, j int) bool { return !(i == 0 && j == 3) }
	r := Evaluate(clusterNodes(5), mesh(5, reach, nil), Config{})
	assert.Empty(t, r.Marked())
	assert.Equal(t, ReasonBelowQuorum, r.Nodes[3].Reason)
	assert.Equal(t, []string{nodeName(0)}, r.Nodes[3].FailingObservers)
	// A partitioned node in a 3-node cluster has only 2 observers: quorum 3 is not met.
	// Nothing explains the failures then, so marking is suppressed as well.
	r = Evaluate(clusterNodes(3), mesh(3, partitioned(map[int]bool{2: true}, false), nil), Config{Quorum: 3})
	assert.Empty(t, r.Marked())
	assert.Empty(t, r.Candidates)
	assert.Len(t, r.Nodes[2].FailingObservers, 2)
	assert.True(t, r.Suppressed)
	// Failing observers must outnumber those that still reach the node: 2 fail, 7 reach.
	reach = func(i, j int) bool { return !(j == 5 && i < 2) }
	r = Evaluate(clusterNodes(10), mesh(10, reach, nil), Config{})
	assert.False(t, r.Suppressed, r.SuppressedReason)
	assert.Empty(t, r.Marked())
	assert.Equal(t, ReasonBelowQuorum, r.Nodes[5].Reason)
	assert.Equal(t, "unreachable from 2 observer nodes, reachable from 7 (quorum 2): netpulse/agent-00 (node-00), netpulse/agent-01 (node-01)", r.Nodes[5].Message)
}

func TestOneBrokenPodIsNotANodeProblem(t *testing.T) {
	es := mesh(5, func(i, j int) bool { return true }, nil)
	// node-04 also hosts a broken workload pod that every observer fails to reach.
	for i := range 4 {
		es = append(es, Edge{ObserverPod: agentPod(i), ObserverNode: nodeName(i), TargetNode: nodeName(4), TargetKind: observation.TargetPod, Verdict: observation.VerdictUnreachable})
	}
	r := Evaluate(clusterNodes(5), es, Config{})
	assert.Empty(t, r.Marked())
	assert.Empty(t, r.Nodes[4].FailingObservers)
}

func TestIgnoredEdgesAndNoObservations(t *testing.T) {
	es := []Edge{
		{ObserverPod: "a", ObserverNode: "n1", TargetNode: "", TargetKind: observation.TargetExternal, Verdict: observation.VerdictUnreachable},
		{ObserverPod: "a", ObserverNode: "n1", TargetNode: "n2", TargetKind: observation.TargetPod, Verdict: observation.VerdictUnknown},
		{ObserverPod: "a", ObserverNode: "", TargetNode: "n2", TargetKind: observation.TargetPod, Verdict: observation.VerdictUnreachable},
	}
	r := Evaluate([]string{"n1", "n2", "n3"}, es, Config{})
	assert.False(t, r.Suppressed)
	assert.Zero(t, r.Observers)
	require.Len(t, r.Nodes, 3)
	for _, ns := range r.Nodes {
		assert.Equal(t, ReasonNoObservations, ns.Reason)
	}
}

// Safety property: whatever the partition (up to the marking bound), the sampling of edges
// and a broken prober, only partitioned nodes are ever marked; with enough observers, all
// of them are.
func TestOnlyPartitionedNodesAreMarked(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for iter := range 300 {
		n := 4 + rng.IntN(27)
		maxMarked := max(1, n/5)
		p := map[int]bool{}
		for len(p) < 1+rng.IntN(maxMarked) {
			p[rng.IntN(n)] = true
		}
		together := rng.IntN(2) == 0
		broken := -1
		if rng.IntN(3) == 0 {
			broken = rng.IntN(n)
		}
		base := partitioned(p, together)
		reach := func(i, j int) bool { return i != broken && base(i, j) }
		keepP := 0.5 + rng.Float64()/2
		keepM := map[[2]int]bool{}
		keep := func(i, j int) bool {
			k := [2]int{i, j}
			if v, ok := keepM[k]; ok {
				return v
			}
			keepM[k] = rng.Float64() < keepP
			return keepM[k]
		}
		es := mesh(n, reach, keep)
		rng.Shuffle(len(es), func(a, b int) { es[a], es[b] = es[b], es[a] })
		r := Evaluate(clusterNodes(n), es, Config{})
		for _, m := range r.Marked() {
			var idx int
			_, _ = fmt.Sscanf(m, "node-%d", &idx)
			assert.True(t, p[idx], "iter %d: %s marked but not partitioned (n=%d p=%v broken=%d)", iter, m, n, p, broken)
		}
		// Deterministic whatever the edge order.
		rng.Shuffle(len(es), func(a, b int) { es[a], es[b] = es[b], es[a] })
		assert.Equal(t, r, Evaluate(clusterNodes(n), es, Config{}), "iter %d", iter)
	}
	// Full mesh, no broken prober: every partitioned node is found.
	for _, n := range []int{5, 12, 30} {
		p := map[int]bool{0: true}
		if n >= 10 {
			p[n-1] = true
		}
		r := Evaluate(clusterNodes(n), mesh(n, partitioned(p, false), nil), Config{})
		assert.Len(t, r.Marked(), len(p), "n=%d", n)
	}
}

// shardEdges keeps the edges a shard owning the target nodes in own sees (docs/sharding.md:
// a target belongs to its node's shard), and returns the observer nodes that reach a node
// it does not own: what it drops as other_shard, as WorkingObservers.
func shardEdges(n int, reach func(i, j int) bool, own map[int]bool) ([]Edge, []string) {
	var working []string
	for i := range n {
		for j := range n {
			if i != j && !own[j] && reach(i, j) {
				working = append(working, nodeName(i))
				break
			}
		}
	}
	return mesh(n, reach, func(_, j int) bool { return own[j] }), working
}

// 3 nodes, 2 shards (the real-node Shards step): whichever shard owns the cut node sees no
// observer reach a node other than the cut one and the observer's own, so without the
// successes it drops as another shard's, nobody is a healthy observer; 2 or 3 observers
// fail towards nodes that are no candidate and marking suppresses itself. With them, the
// cut node is marked by its shard, and nothing else.
func TestSmallShardMarksACutNodeFromItsDroppedSuccesses(t *testing.T) {
	const n = 3
	for _, tc := range []struct {
		name string
		own  map[int]bool
		cut  int
	}{
		{"shard of 2 nodes, one cut", map[int]bool{0: true, 1: true}, 0},
		{"shard of 2 nodes, the other cut", map[int]bool{0: true, 1: true}, 1},
		{"shard of 1 node, cut", map[int]bool{2: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []string
			for j := range tc.own {
				nodes = append(nodes, nodeName(j))
			}
			edges, working := shardEdges(n, partitioned(map[int]bool{tc.cut: true}, false), tc.own)
			assert.NotContains(t, working, nodeName(tc.cut), "the cut node reaches no other shard's node")

			without := Evaluate(nodes, edges, Config{})
			assert.True(t, without.Suppressed, "control: the edges of its own targets alone cannot show a working observer")
			assert.Empty(t, without.Marked())

			r := Evaluate(nodes, edges, Config{WorkingObservers: working})
			assert.False(t, r.Suppressed, r.SuppressedReason)
			assert.Equal(t, []string{nodeName(tc.cut)}, r.Marked())
			// Its nodes read as the unsharded gateway reads them from every edge.
			whole := Evaluate(clusterNodes(n), mesh(n, partitioned(map[int]bool{tc.cut: true}, false), nil), Config{})
			require.Equal(t, []string{nodeName(tc.cut)}, whole.Marked())
			for j := range tc.own {
				assert.Equal(t, whole.Nodes[j].Reason, r.Nodes[j].Reason, nodeName(j))
				assert.Equal(t, whole.Nodes[j].FailingObservers, r.Nodes[j].FailingObservers, nodeName(j))
			}
		})
	}
}

// A working observer is evidence of one node only: one agent claiming successes elsewhere
// (and failures towards every node its shard owns) makes its own node count as healthy and
// nothing more: below the quorum it marks no node, and the honest observers that still
// reach the nodes outnumber it. No working observer adds a node, a reach or a failure.
func TestWorkingObserversMarkNothingByThemselves(t *testing.T) {
	const n = 3
	own := map[int]bool{0: true, 1: true}
	for liar := range n {
		t.Run(nodeName(liar), func(t *testing.T) {
			reach := func(i, j int) bool { return i != liar }
			edges, _ := shardEdges(n, reach, own)
			r := Evaluate([]string{nodeName(0), nodeName(1)}, edges, Config{WorkingObservers: clusterNodes(n)})
			assert.Empty(t, r.Marked(), r.SuppressedReason)
			assert.Empty(t, r.Candidates)
			for _, ns := range r.Nodes {
				assert.LessOrEqual(t, len(ns.FailingObservers), 1, ns.Node)
			}
			assert.Len(t, r.Nodes, n, "no node beyond the edges' and the given ones")
		})
	}
	// Working observers with no edges at all: nothing is observed.
	r := Evaluate(clusterNodes(2), nil, Config{WorkingObservers: clusterNodes(5)})
	assert.Len(t, r.Nodes, 2)
	for _, ns := range r.Nodes {
		assert.Equal(t, ReasonNoObservations, ns.Reason)
	}
}
