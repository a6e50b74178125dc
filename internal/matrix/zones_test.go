// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix_test

import (
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

func zoneCut(from, to string, since time.Time) *v1alpha1.ZoneNetworkHealth {
	return &v1alpha1.ZoneNetworkHealth{
		ObjectMeta: metav1.ObjectMeta{Name: from + "." + to},
		Spec:       v1alpha1.ZoneNetworkHealthSpec{SourceZone: from, TargetZone: to},
		Status: v1alpha1.ZoneNetworkHealthStatus{Reachability: v1alpha1.Unreachable, NodePairs: 9, FailingNodePairs: 9,
			FailingObserverNodes: []string{"node-1", "node-3"}, FailingObserverNodeCount: 2,
			FailingTargetNodes: []string{"node-2", "node-4"}, FailingTargetNodeCount: 2,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonZonePairUnreachable,
				Message: "zone " + from + " cannot reach zone " + to, LastTransitionTime: metav1.NewTime(since)}}},
	}
}

// The zone x zone summary carries the exporter's zone pair verdict in its cell (worse of
// it and the objects'), and `why zone/<z>` explains a zone by its zone pairs.
func TestZonePairsInSummaryAndWhy(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 6, Zones: 2, Stable: 1, Now: now})
	m := build(f, true)
	in := matrix.Input{Objects: f.Objects, Nodes: m.Nodes, Now: now,
		ZonePairs: []*v1alpha1.ZoneNetworkHealth{zoneCut("zone-a", "zone-b", now.Add(-3*time.Minute)), zoneCut("zone-b", "zone-a", now.Add(-3*time.Minute))}}
	m = matrix.Build(in)
	s := m.Summary()
	var ab *matrix.ZoneCell
	for i := range s.Cells {
		if s.Cells[i].From == "zone-a" && s.Cells[i].To == "zone-b" {
			ab = &s.Cells[i]
		}
	}
	require.NotNil(t, ab)
	require.NotNil(t, ab.ZonePair)
	assert.Equal(t, matrix.Unreachable, ab.Verdict, "the zone pair verdict is worse than the healthy objects'")
	assert.Zero(t, ab.Counts[matrix.Unreachable], "no object is Unreachable: the verdict is the zone pair's")

	e, ok := m.WhyZone("zone-a")
	require.True(t, ok)
	assert.Equal(t, matrix.Unreachable, e.Verdict)
	require.Len(t, e.ZonePairs, 2)
	text := strings.Join(e.Lines, "\n")
	assert.Contains(t, text, "zone zone-a: 3 nodes")
	assert.Contains(t, text, "zone-a → zone-b: Unreachable since 2026-03-14T15:06:26Z (3m0s ago) (ZonePairUnreachable): 9 of 9 node pairs fail, from 2 observer nodes (node-1, node-3) towards 2 target nodes (node-2, node-4)")

	e, ok = m.WhyZone("zone-c")
	assert.False(t, ok, "no node and no zone pair names it")
	m2 := build(f, true)
	e, ok = m2.WhyZone("zone-b")
	require.True(t, ok)
	assert.Equal(t, matrix.Reachable, e.Verdict)
	assert.Contains(t, strings.Join(e.Lines, "\n"), "no zone pair in or out of it was found cut")
}

// why names a path-MTU black hole on the pairs towards a target.
func TestWhyNamesAnMTUBlackHole(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 4, Zones: 1, Stable: 3, Now: now})
	for _, o := range f.Objects {
		if o.Spec.TargetPodRef != nil && o.Spec.TargetPodRef.Name == matrixtest.AgentName(2) {
			o.Status.Conditions = append(o.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue,
				Reason: v1alpha1.ReasonMTUBlackHole, Message: "1500-byte packets vanish; 1280 pass", LastTransitionTime: metav1.NewTime(now)})
		}
	}
	m := build(f, true)
	e, ok := m.WhyNode("node-2")
	require.True(t, ok)
	assert.Equal(t, matrix.Degraded, e.Verdict)
	text := strings.Join(e.Lines, "\n")
	assert.Contains(t, text, "degraded pairs by reason: MTUBlackHole 3")
	assert.Contains(t, text, "path-MTU black hole on 3 pairs")
}
