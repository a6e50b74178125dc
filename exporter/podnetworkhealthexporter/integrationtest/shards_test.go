// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	pnhexporter "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/probetest"
	"github.com/netpulse/netpulse/internal/shard"
)

// shardedMesh is a full mesh of agents whose rounds are routed as the agents' filters route
// them (docs/sharding.md): each shard gets the points of its targets' nodes, and every shard
// every agent's heartbeat.
type shardedMesh struct {
	*mesh
	mu     sync.Mutex
	shards []exporter.Metrics // nil: that shard is down (its agents' exports fail)
	// unsharded: agents that run the unsharded configuration (not rolled yet when the
	// cluster goes from 1 gateway to S shards): every point to shard 0, no heartbeat.
	unsharded map[int]bool
}

func (m *shardedMesh) setUnsharded(i int, on bool) {
	m.mu.Lock()
	if m.unsharded == nil {
		m.unsharded = map[int]bool{}
	}
	m.unsharded[i] = on
	m.mu.Unlock()
}

func (m *shardedMesh) setShard(i int, exp exporter.Metrics) {
	m.mu.Lock()
	m.shards[i] = exp
	m.mu.Unlock()
}

func (m *shardedMesh) run() {
	go func() {
		defer close(m.done)
		var rounds int64
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			rounds++
			now := time.Now()
			m.mu.Lock()
			shards := append([]exporter.Metrics(nil), m.shards...)
			unsharded := maps.Clone(m.unsharded)
			m.mu.Unlock()
			for i, a := range m.agents {
				perShard := make([][]probetest.Target, len(shards))
				results := make([][]probetest.Outcome, len(shards))
				m.mesh.mu.Lock()
				for j, tg := range m.targets {
					if i == j {
						continue
					}
					s := shard.Of(tg.Node, len(shards))
					if unsharded[i] {
						s = 0
					}
					perShard[s] = append(perShard[s], tg)
					results[s] = append(results[s], probetest.Outcome{OK: !m.down[i] && !m.down[j], RTT: 300 * time.Microsecond})
				}
				m.mesh.mu.Unlock()
				for s, exp := range shards {
					if exp == nil {
						continue
					}
					if unsharded[i] && s != 0 {
						continue
					}
					md := a.Round(now, perShard[s], results[s])
					if !unsharded[i] {
						a.Heartbeat(md, now, rounds)
					}
					_ = exp.ConsumeMetrics(context.Background(), md)
				}
			}
		}
	}()
}

// Two gateway shards judge one cluster of 6 nodes, each leading its own Lease: every pair's
// object is written by its target node's shard alone and labelled so; a shard is killed and
// replaced by a new replica, which resumes its objects without rewriting any; a partition of
// a node of that shard reads Unreachable with the node's condition, and no other node's.
func TestShardsSplitTheCluster(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const ns, count, n = "shards", 2, 6
	const typ = "netpulse.io/PodNetworkProblem"
	m := &shardedMesh{mesh: newMesh(t, ns, n), shards: make([]exporter.Metrics, count)}
	// The package's tests share one API server: the nodes (and the condition this test sets
	// on one of them) go with the test, or the next test's node_problem gauge counts them.
	t.Cleanup(func() {
		for _, tg := range m.targets {
			_ = admin.CoreV1().Nodes().Delete(context.Background(), tg.Node, metav1.DeleteOptions{})
		}
		// Its objects too: a later test's shard of the same count resumes every object
		// labelled with its index, in every namespace.
		_ = pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	owned := make([]int, count)
	for _, tg := range m.targets {
		owned[shard.Of(tg.Node, count)]++
	}
	require.Positive(t, owned[0], "both shards own nodes")
	require.Positive(t, owned[1], "both shards own nodes")
	start := func(index int, identity string) exporter.Metrics {
		cfg := testConfig("pnh-shards")
		cfg.Shard = pnhexporter.ShardConfig{Count: count, Index: index}
		cfg.NodeConditions.Enabled = true
		cfg.NodeConditions.Heartbeat = time.Minute
		exp := startExporter(t, cfg, identity, nil)
		m.setShard(index, exp)
		return exp
	}
	shard0 := start(0, "gw-shard-0-a")
	shard1 := start(1, "gw-shard-1-a")
	defer func() { require.NoError(t, shard0.Shutdown(ctx)) }()
	m.run()
	defer m.close()

	list := func() []v1alpha1.PodNetworkHealth {
		l, err := pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil
		}
		return l.Items
	}
	targetNode := func(o v1alpha1.PodNetworkHealth) string {
		for _, tg := range m.targets {
			if o.Spec.TargetPodRef != nil && tg.UID == string(o.Spec.TargetPodRef.UID) {
				return tg.Node
			}
		}
		return ""
	}
	healthy := func() bool {
		objs := list()
		if len(objs) != n*(n-1) {
			return false
		}
		for _, o := range objs {
			if o.Status.Reachability != v1alpha1.Reachable {
				return false
			}
		}
		return true
	}
	require.Eventually(t, healthy, 60*time.Second, 200*time.Millisecond, "every pair's object Reachable")
	for _, o := range list() {
		node := targetNode(o)
		require.NotEmpty(t, node, o.Name)
		assert.Equal(t, fmt.Sprintf("%d-of-%d", shard.Of(node, count), count), o.Labels[v1alpha1.LabelShard], "%s towards %s: written by its node's shard", o.Name, node)
	}
	for i, holder := range []string{"gw-shard-0-a", "gw-shard-1-a"} {
		l, err := admin.CoordinationV1().Leases("netpulse").Get(ctx, fmt.Sprintf("pnh-shards-%d", i), metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, holder, *l.Spec.HolderIdentity, "each shard leads its own Lease")
	}

	// Shard 1 dies (its agents' exports fail) and a new replica with a new identity takes
	// its Lease and resumes from the API: no object of either shard is rewritten.
	versions := map[string]string{}
	for _, o := range list() {
		versions[o.Name] = o.ResourceVersion
	}
	m.setShard(1, nil)
	require.NoError(t, shard1.Shutdown(ctx))
	killed := time.Now()
	shard1 = start(1, "gw-shard-1-b")
	defer func() { require.NoError(t, shard1.Shutdown(ctx)) }()
	require.Eventually(t, func() bool {
		l, err := admin.CoordinationV1().Leases("netpulse").Get(ctx, "pnh-shards-1", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "gw-shard-1-b"
	}, 30*time.Second, 100*time.Millisecond, "the new replica never led shard 1")
	t.Logf("FIGURE the replacement leads shard 1 %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	time.Sleep(15 * time.Second)
	rewritten := 0
	for _, o := range list() {
		if versions[o.Name] != o.ResourceVersion {
			rewritten++
			t.Logf("rewritten: %s (%s)", o.Name, o.Status.Reachability)
		}
	}
	require.Zero(t, rewritten, "objects rewritten across the replacement (of %d)", len(versions))
	require.True(t, healthy())

	// A node of shard 1 is partitioned: the replacement marks it, its pairs read Unreachable,
	// and no other node gets the condition.
	bad := -1
	for i, tg := range m.targets {
		if shard.Of(tg.Node, count) == 1 {
			bad = i
			break
		}
	}
	m.set(bad, true)
	partitioned := time.Now()
	badNode := m.targets[bad].Node
	require.Eventually(t, func() bool {
		c := nodeCondition(t, badNode, typ)
		if c == nil || c.Status != corev1.ConditionTrue {
			return false
		}
		for _, o := range list() {
			if targetNode(o) == badNode && o.Status.Reachability != v1alpha1.Unreachable {
				return false
			}
		}
		return true
	}, 40*time.Second, 200*time.Millisecond, "the partitioned node of shard 1 never marked")
	t.Logf("FIGURE partition of a shard-1 node after the replacement: condition and objects in %v", time.Since(partitioned).Round(100*time.Millisecond))
	for i, tg := range m.targets {
		if i == bad {
			continue
		}
		c := nodeCondition(t, tg.Node, typ)
		require.True(t, c == nil || c.Status == corev1.ConditionFalse, "node %s (shard %d) blamed: %+v", tg.Node, shard.Of(tg.Node, count), c)
	}
	for _, o := range list() {
		assert.Equal(t, fmt.Sprintf("%d-of-%d", shard.Of(targetNode(o), count), count), o.Labels[v1alpha1.LabelShard], o.Name)
	}
}

// 3 nodes, 2 shards (issue #40, the real-node Shards step): shard 0 owns two nodes and one
// of them, a, is cut off. Shard 0 judges a from its observers' edges towards its own two
// nodes, where neither other observer shows that it works (it reaches nothing but a and,
// for one of them, its own node).
//
// While the agents route by the shard count, shard 0 receives nothing else and suppresses
// marking: a gets no condition (the limitation that stays, docs/sharding.md; a node never
// marked is never written one).
// When the other agents send shard 0 every point (they run the unsharded configuration, as
// before they roll from 1 gateway to 2 shards), shard 0 drops their points towards the
// other shard's node as other_shard, and their successes show that their nodes work: a's
// condition goes True, written by shard 0, and no other node's.
func TestSmallShardMarksACutNode(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const ns, count, n = "tinyshards", 2, 3
	const typ = "netpulse.io/PodNetworkProblem"
	m := &shardedMesh{mesh: newMesh(t, ns, n), shards: make([]exporter.Metrics, count)}
	t.Cleanup(func() {
		for _, tg := range m.targets {
			_ = admin.CoreV1().Nodes().Delete(context.Background(), tg.Node, metav1.DeleteOptions{})
		}
		_ = pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	// A shard resumes every object labelled with its index and count, in every namespace,
	// with their observers: objects other tests left under this count (the preconditions'
	// writers label theirs 0-of-2 and 1-of-2) would read as more agents of this cluster
	// than its 3, which the targets' quorum counts.
	left, err := pnhClient.NetpulseV1alpha1().PodNetworkHealths("").List(ctx, metav1.ListOptions{
		LabelSelector: fmt.Sprintf("%s in (0-of-%d,1-of-%d)", v1alpha1.LabelShard, count, count)})
	require.NoError(t, err)
	for _, o := range left.Items {
		require.NoError(t, pnhClient.NetpulseV1alpha1().PodNetworkHealths(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{}))
	}
	var own0 []int
	for i, tg := range m.targets {
		if shard.Of(tg.Node, count) == 0 {
			own0 = append(own0, i)
		}
	}
	require.Len(t, own0, 2, "shard 0 owns two of the three nodes")
	cut := own0[0]
	for i := range m.targets {
		m.setUnsharded(i, false)
	}
	for i := range count {
		cfg := testConfig("pnh-tinyshards")
		cfg.Shard = pnhexporter.ShardConfig{Count: count, Index: i}
		cfg.NodeConditions.Enabled = true
		cfg.NodeConditions.Heartbeat = time.Minute
		cfg.NodeConditions.MinHold = time.Second
		exp := startExporter(t, cfg, fmt.Sprintf("gw-tinyshards-%d", i), nil)
		m.setShard(i, exp)
		defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	}
	m.run()
	defer m.close()
	cutNode := m.targets[cut].Node
	condition := func(node string) string {
		if c := nodeCondition(t, node, typ); c != nil {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
		return "none"
	}
	status := func(want corev1.ConditionStatus, reason string) func() bool {
		return func() bool {
			c := nodeCondition(t, cutNode, typ)
			return c != nil && c.Status == want && c.Reason == reason
		}
	}
	// A node found fine gets no condition (no problem is no news).
	require.Never(t, func() bool { return nodeCondition(t, cutNode, typ) != nil }, 5*time.Second, 200*time.Millisecond,
		"a condition on a healthy node: %s", condition(cutNode))

	// Every agent routes by the shard count: shard 0 cannot show a working observer, so it
	// suppresses marking (the stated limitation), and a node without a condition gets none.
	m.set(cut, true)
	require.Never(t, func() bool { return nodeCondition(t, cutNode, typ) != nil }, 10*time.Second, 200*time.Millisecond,
		"with the agents routing by the count, the cut node's shard cannot mark it (the stated limitation): %s", condition(cutNode))
	m.set(cut, false)

	// The other agents send shard 0 every point: their successes towards the other shard's
	// node, dropped there, show that they work.
	for i := range m.targets {
		m.setUnsharded(i, i != cut)
	}
	m.set(cut, true)
	marked := time.Now()
	require.Eventually(t, status(corev1.ConditionTrue, "UnreachableFromPeers"), 60*time.Second, 200*time.Millisecond,
		"the cut node of the shard of two nodes never marked")
	t.Logf("FIGURE a cut node of a 3-node, 2-shard cluster marked by its shard in %v", time.Since(marked).Round(100*time.Millisecond))
	for i, tg := range m.targets {
		if i == cut {
			continue
		}
		c := nodeCondition(t, tg.Node, typ)
		require.True(t, c == nil || c.Status != corev1.ConditionTrue, "node %s (shard %d) blamed: %+v", tg.Node, shard.Of(tg.Node, count), c)
	}
}
