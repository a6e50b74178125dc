// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

var now = time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)

func build(f matrixtest.Fixture, withPods bool) *matrix.Model {
	in := matrix.Input{Objects: f.Objects, Now: now}
	for _, n := range f.Nodes {
		in.Nodes = append(in.Nodes, matrix.NodeFrom(n, ""))
	}
	if withPods {
		for _, p := range f.Pods {
			in.Pods = append(in.Pods, matrix.PodFrom(p))
		}
	}
	return matrix.Build(in)
}

func TestMeshWithPartition(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 4, Zones: 2, Stable: 3, Partitioned: "node-2", Now: now})
	m := build(f, true)

	// Zones first (zone-a: node-1, node-3; zone-b: node-2, node-4), then names.
	var names []string
	for _, n := range m.Nodes {
		names = append(names, n.Name)
	}
	require.Equal(t, []string{"node-1", "node-3", "node-2", "node-4"}, names)
	require.Len(t, m.Zones, 2)
	assert.Equal(t, matrix.Zone{Name: "zone-b", First: 2, Count: 2, ProblemNodes: 1}, m.Zones[1])

	require.Len(t, m.Pairs, 12)
	assert.Equal(t, 12, len(m.Cells)) // full mesh, no diagonal
	assert.Equal(t, matrix.Unreachable, m.Cell("node-1", "node-2").Verdict)
	assert.Equal(t, "1", lossText(m.Cell("node-1", "node-2")))
	assert.Equal(t, matrix.Unknown, m.Cell("node-2", "node-1").Verdict)
	c := m.Cell("node-1", "node-3")
	require.NotNil(t, c)
	assert.Equal(t, matrix.Reachable, c.Verdict)
	assert.NotEmpty(t, c.P50)
	assert.Nil(t, m.Cell("node-1", "node-1"))
	assert.Equal(t, matrix.Counts{matrix.Reachable: 6, matrix.Unreachable: 3, matrix.Unknown: 3}, matrix.Counts(m.Counts))

	s := m.Summary()
	assert.Equal(t, 4, s.Nodes)
	require.Len(t, s.Problems, 1)
	assert.Equal(t, "node-2", s.Problems[0].Name)
	assert.Equal(t, "True", s.Problems[0].Condition.Status)
	worst := map[string]matrix.Verdict{}
	for _, zc := range s.Cells {
		worst[zc.From+">"+zc.To] = zc.Verdict
	}
	assert.Equal(t, map[string]matrix.Verdict{
		"zone-a>zone-a": matrix.Reachable, "zone-a>zone-b": matrix.Unreachable,
		"zone-b>zone-a": matrix.Unknown, "zone-b>zone-b": matrix.Unreachable,
	}, worst)

	details := m.PairsBetween("node-1", "node-2")
	require.Len(t, details, 1)
	assert.Equal(t, "netpulse-agent-1-to-netpulse-agent-2", details[0].Name)
	assert.Len(t, details[0].Status.Outages, 2)
	assert.Equal(t, now.Add(-2*time.Minute), details[0].OutageSince)
	assert.Empty(t, m.PairsBetween("node-1", "node-1"))
}

func lossText(c *matrix.Cell) string {
	if !c.HasLoss {
		return ""
	}
	return string(v1alpha1.RatioFromFloat(c.Loss))
}

func TestSparseCellsAreNotHealthy(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 6, Stable: 1, Now: now})
	m := build(f, false) // pod targets placed from their own objects' observedFromNode
	require.Len(t, m.Cells, 6)
	assert.Equal(t, 0, m.Unplaced)
	assert.Equal(t, matrix.Reachable, m.Cell("node-1", "node-2").Verdict)
	assert.Nil(t, m.Cell("node-1", "node-3"), "no object: no cell, never healthy")
	mx, err := m.Matrix(nil, 0)
	require.NoError(t, err)
	assert.Len(t, mx.Nodes, 6)
	assert.Len(t, mx.Cells, 6)
}

// TestStalePairReadsUnknown: a status past its freshUntil says nothing current, whatever
// its verdict; one within it keeps its verdict however old lastObservedTime is.
func TestStalePairReadsUnknown(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 3, Stable: 1, Now: now})
	old := metav1.NewTime(now.Add(-time.Hour))
	past := metav1.NewTime(now.Add(-time.Minute))
	future := metav1.NewTime(now.Add(time.Minute))
	var stale, current string
	for i, o := range f.Objects {
		o.Status.LastObservedTime = &old
		if i == 0 {
			o.Status.FreshUntil, stale = &past, o.Name
		} else {
			o.Status.FreshUntil, current = &future, o.Name
		}
	}
	m := build(f, true)
	for _, p := range m.Pairs {
		switch p.Name {
		case stale:
			assert.Equal(t, matrix.Unknown, p.Verdict)
			assert.Equal(t, matrix.ReasonStatusStale, p.Reason)
			assert.Contains(t, p.Message, "status not rewritten since")
		case current:
			assert.Equal(t, matrix.Reachable, p.Verdict, "an hour-old status within its freshUntil is current")
			assert.False(t, p.VerdictSince.IsZero())
		}
	}
}

func TestUnplacedExternalNodeTargetsAndDegraded(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 3, Stable: 2, Now: now})
	ext := f.Objects[0].DeepCopy()
	ext.Name = "to-dns"
	ext.Spec.TargetKind, ext.Spec.TargetPodRef = v1alpha1.TargetKindExternal, nil
	ext.Spec.TargetEndpoint = &v1alpha1.EndpointReference{Address: "192.0.2.53"}
	node := f.Objects[0].DeepCopy()
	node.Name = "to-node-3"
	node.Spec.TargetKind, node.Spec.TargetPodRef = v1alpha1.TargetKindNode, nil
	node.Spec.TargetNodeRef = &v1alpha1.NodeReference{Name: "node-3"}
	stranger := f.Objects[0].DeepCopy()
	stranger.Name = "to-stranger"
	stranger.Spec.TargetPodRef = &v1alpha1.PodReference{Namespace: "apps", Name: "web-0"}
	degraded := f.Objects[1].DeepCopy()
	degraded.Name = "degraded"
	degraded.Status.Conditions = append(degraded.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: "True",
		Reason: v1alpha1.ReasonAddressFamilyUnreachable, Message: "ipv6 fails"})
	f.Objects = append(f.Objects, ext, node, stranger, degraded)
	m := build(f, true)
	assert.Equal(t, 1, m.External)
	assert.Equal(t, 1, m.Unplaced)
	assert.Equal(t, 1, m.Counts[matrix.Degraded])
	c := m.Cell("node-1", "node-3")
	require.NotNil(t, c)
	assert.Len(t, c.Pairs, 3, "the pod target, the node target and the degraded copy")
	assert.Equal(t, matrix.Degraded, c.Verdict)
	e, ok := m.WhyNode("node-3")
	require.True(t, ok)
	assert.Equal(t, matrix.Degraded, e.Verdict)
}

func TestWhyNodePartitioned(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 8, Zones: 2, Stable: 1, Partitioned: "node-5", Now: now})
	m := build(f, true)
	e, ok := m.WhyNode("node-5")
	require.True(t, ok)
	assert.Equal(t, matrix.Unreachable, e.Verdict)
	assert.Equal(t, now.Add(-2*time.Minute), e.Since)
	// Its stable observer (node-4) and two rotating observers whose pairs failed.
	assert.Equal(t, []string{"node-2", "node-3", "node-4"}, e.Failing)
	assert.Empty(t, e.Reaching)
	assert.Equal(t, matrix.Counts{matrix.Unknown: 1}, e.AsObserver)
	require.Len(t, e.FailingProbes, 2)
	assert.Equal(t, matrix.ProbeFailures{Type: "icmp", Sent: 360, Lost: 360, Reason: "Timeout",
		Message: "no echo reply from netpulse-agent-5 within 500ms", Time: now}, e.FailingProbes[0])
	text := strings.Join(e.Lines, "\n")
	t.Log("\n" + text)
	for _, want := range []string{
		"node node-5 (zone zone-a): Unreachable (every observer that judged it fails) since 2026-03-14T15:07:26Z (2m0s ago)",
		"node condition netpulse.io/PodNetworkProblem=True (UnreachableFromPeers) since 2026-03-14T15:07:31Z (1m55s ago): pods on this node are unreachable",
		"observer nodes: 3 fail to reach it (node-2, node-3, node-4), 0 reach it, 0 unknown",
		"pairs towards it: 3 Unreachable",
		"failing probes: icmp 360/360 lost, last Timeout at 2026-03-14T15:09:26Z (0s ago)",
		"as an observer (1 pairs observed from it): 1 Unknown (its own failures are attributed to it, not to its targets)",
	} {
		assert.Contains(t, text, want)
	}

	h, ok := m.WhyNode("node-1")
	require.True(t, ok)
	assert.Equal(t, matrix.Reachable, h.Verdict)
	assert.Contains(t, strings.Join(h.Lines, "\n"), "node condition netpulse.io/PodNetworkProblem=False (ReachableFromPeers)")

	_, ok = m.WhyNode("node-99")
	assert.False(t, ok)
}

func TestWhyPod(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 4, Stable: 3, Partitioned: "node-3", Now: now})
	m := build(f, true)
	assert.Equal(t, []string{"netpulse/netpulse-agent-3"}, m.PodTargets("", "netpulse-agent-3"))
	assert.Empty(t, m.PodTargets("other", "netpulse-agent-3"))
	e, ok := m.WhyPod("netpulse", "netpulse-agent-3")
	require.True(t, ok)
	assert.Equal(t, "node-3", e.Node)
	assert.Equal(t, matrix.Unreachable, e.Verdict)
	assert.Equal(t, []string{"node-1", "node-2", "node-4"}, e.Failing)
	assert.Contains(t, e.Lines[0], "pod netpulse/netpulse-agent-3 on node node-3")
	e, ok = m.WhyPod("netpulse", "netpulse-agent-1")
	require.True(t, ok)
	assert.Equal(t, matrix.Reachable, e.Verdict)
	assert.Contains(t, strings.Join(e.Lines, "\n"), "observer nodes: 0 fail to reach it, 2 reach it (node-2, node-4), 1 unknown (node-3)")
	_, ok = m.WhyPod("netpulse", "nobody")
	assert.False(t, ok)
}

func TestTop(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 10, Stable: 2, Partitioned: "node-4", Now: now})
	m := build(f, true)
	top := m.Top(0)
	require.Len(t, top, len(m.Pairs))
	// Loss first: the Unreachable and the observer-unhealthy pairs (loss 1), then the lossy ones.
	for i := 1; i < len(top); i++ {
		a, b := top[i-1], top[i]
		require.True(t, a.Loss > b.Loss || a.Loss == b.Loss && a.RTT() >= b.RTT(), "%s before %s", a.Name, b.Name)
	}
	assert.Equal(t, 1.0, top[0].Loss)
	assert.Len(t, m.Top(3), 3)
	assert.True(t, slices.ContainsFunc(m.Top(5), func(p matrix.Pair) bool { return p.Verdict == matrix.Unreachable }))
}

func TestMatrixZonesAndLimit(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 9, Zones: 3, Stable: 2, Now: now})
	m := build(f, true)
	mx, err := m.Matrix([]string{"zone-b"}, 0)
	require.NoError(t, err)
	require.Len(t, mx.Nodes, 3)
	for _, n := range mx.Nodes {
		assert.Equal(t, "zone-b", n.Zone)
	}
	for _, c := range mx.Cells {
		assert.Less(t, c.O, 3)
		assert.Less(t, c.T, 3)
	}
	mx, err = m.Matrix([]string{"zone-a", "zone-c"}, 6)
	require.NoError(t, err)
	assert.Len(t, mx.Nodes, 6)
	assert.Len(t, mx.Zones, 2)
	cross, err := m.CrossMatrix([]string{"zone-a"}, []string{"zone-b", "zone-c"}, 6)
	require.NoError(t, err)
	assert.Len(t, cross.Nodes, 3)
	assert.Len(t, cross.Targets, 6)
	assert.Len(t, cross.TargetZones, 2)
	require.NotEmpty(t, cross.Cells)
	for _, c := range cross.Cells {
		assert.Equal(t, "zone-a", cross.Nodes[c.O].Zone)
		assert.NotEqual(t, "zone-a", cross.Targets[c.T].Zone)
	}
	_, err = m.CrossMatrix([]string{"zone-a"}, []string{"zone-b", "zone-c"}, 5)
	require.Error(t, err)
	_, err = m.Matrix(nil, 8)
	var tooLarge matrix.ErrTooLarge
	require.ErrorAs(t, err, &tooLarge)
	assert.Equal(t, matrix.ErrTooLarge{Nodes: 9, Max: 8}, tooLarge)
}

func TestNaturalNodeOrder(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 12, Now: now})
	m := build(f, true)
	assert.Equal(t, "node-2", m.Nodes[1].Name)
	assert.Equal(t, "node-10", m.Nodes[9].Name)
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second: "5s", 190 * time.Second: "3m10s", 20 * time.Minute: "20m",
		125 * time.Minute: "2h5m", 76 * time.Hour: "3d4h",
	} {
		assert.Equal(t, want, matrix.Age(d))
	}
}

// The zone view is what a browser polls at any size: it must stay small at 1,000 nodes.
func TestSummarySizeAt1000Nodes(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 1000, Zones: 10, Stable: 1, Partitioned: "node-500", Now: now})
	m := build(f, true)
	b, err := json.Marshal(m.Summary())
	require.NoError(t, err)
	t.Logf("zone view at 1,000 nodes, 10 zones: %d bytes (%d pairs)", len(b), len(m.Pairs))
	assert.Less(t, len(b), 32<<10)
	mx, err := m.Matrix([]string{"zone-a"}, 200)
	require.NoError(t, err)
	b, err = json.Marshal(mx)
	require.NoError(t, err)
	t.Logf("one zone's node matrix (100 nodes): %d bytes", len(b))
	_, err = m.Matrix(nil, 200)
	require.Error(t, err, "the whole 1,000-node matrix is refused")
}
