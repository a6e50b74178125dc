// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix_test

import (
	"encoding/json"
	"fmt"
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

// The exporter's message for a zone pair's loss (exporter/podnetworkhealthexporter/
// internal/plan GrayMessage, side zone).
const lossZones = "packet loss between zones zone-a and zone-b: %s %% (95 %% CI 3.1-8.0 %%) of 1440 echoes over 2m0s, from 3 observer nodes in zone-a towards 3 target nodes in zone-b"

// zoneLinkCluster: six nodes, full mesh, zone-a (node-1, -3, -5) and zone-b (node-2, -4,
// -6). The link from zone-a to zone-b loses echoes: every pair from a zone-a observer
// towards a zone-b target is Degraded/PacketLoss on the zone side (zone-b to zone-a is
// clean). node-2 is also slow as a target, seen from node-4 (its own zone).
func zoneLinkCluster(t *testing.T) *matrix.Model {
	t.Helper()
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 6, Zones: 2, Stable: 5, Now: now})
	since := now.Add(-3 * time.Minute)
	loss := map[int]string{1: "4.1", 3: "6.3", 5: "5.0"}
	for _, i := range []int{1, 3, 5} {
		for _, j := range []int{2, 4, 6} {
			o := f.Find(i, j)
			require.NotNil(t, o, "%d -> %d", i, j)
			matrixtest.Degrade(o, v1alpha1.ReasonPacketLoss, fmt.Sprintf(lossZones, loss[i]), since)
		}
	}
	matrixtest.Degrade(f.Find(4, 2), v1alpha1.ReasonHighLatency,
		"high latency at the target's node node-2: RTT p50 20.2ms against a learnt baseline of 200µs; 4 of 5 observer nodes see it slow", since)
	return build(f, true)
}

func TestParseGrayZonePair(t *testing.T) {
	g := matrix.ParseGray(v1alpha1.ReasonPacketLoss, fmt.Sprintf(lossZones, "5.2"))
	require.NotNil(t, g)
	assert.Equal(t, []string{"PacketLoss", "zone", "", "zone-a", "zone-b",
		"5.2 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, from 3 observer nodes in zone-a towards 3 target nodes in zone-b"},
		[]string{g.Reason, g.Side, g.Node, g.FromZone, g.ToZone, g.Figures})

	// A zone pair's latency.
	lat := "high latency between zones zone-a and zone-b: 92 % of the recent rounds slow against their targets' baselines, from 3 observer nodes in zone-a towards 3 target nodes in zone-b"
	g = matrix.ParseGray(v1alpha1.ReasonHighLatency, lat)
	require.NotNil(t, g)
	assert.Equal(t, []string{"HighLatency", "zone", "", "zone-a", "zone-b"}, []string{g.Reason, g.Side, g.Node, g.FromZone, g.ToZone})

	// Not the exporter's zone message: no side, the whole message as figures.
	for _, tc := range []struct{ reason, msg string }{
		{v1alpha1.ReasonHighLatency, fmt.Sprintf(lossZones, "5.2")},
		{v1alpha1.ReasonPacketLoss, "packet loss between zones zone-a and zone-b"},
		{v1alpha1.ReasonPacketLoss, "packet loss between zones zone-a, zone-b and zone-c: 5 %"},
		{v1alpha1.ReasonPacketLoss, "packet loss between zones zone-a: 5 %"},
	} {
		g := matrix.ParseGray(tc.reason, tc.msg)
		require.NotNil(t, g, tc.msg)
		assert.Empty(t, g.Side, tc.msg)
		assert.Empty(t, g.FromZone+g.ToZone, tc.msg)
		assert.Equal(t, tc.msg, g.Figures)
	}
}

// A node of the target zone is not blamed: its pairs from the other zone lose packets on
// the link, and the explanation says so with the figures; no node is listed as blamed.
func TestWhyNodeZoneLinkBlamesNoNode(t *testing.T) {
	m := zoneLinkCluster(t)
	assert.Equal(t, []matrix.GrayNode{{Name: "node-2", Reasons: []string{"HighLatency target"}, Pairs: 1}}, m.GrayNodes(),
		"the link blames no node")

	e, ok := m.WhyNode("node-6")
	require.True(t, ok)
	require.Len(t, e.Gray, 1)
	f := e.Gray[0]
	assert.Equal(t, []string{"PacketLoss", "zone", "towards", "zone-a", "zone-b"}, []string{f.Reason, f.Side, f.Direction, f.FromZone, f.ToZone})
	assert.False(t, f.Blamed)
	assert.Empty(t, f.Nodes)
	assert.Equal(t, []string{"node-1", "node-3", "node-5"}, f.Peers)
	assert.Equal(t, 3, f.Pairs)
	assert.Equal(t, "netpulse/netpulse-agent-3-to-netpulse-agent-6", f.Quoted, "the worst loss is quoted")
	text := strings.Join(e.Lines, "\n")
	t.Log("\n" + text)
	for _, want := range []string{
		"gray verdict: it is not blamed: packet loss between zones zone-a and zone-b (a lossy link between the zones: no node is blamed for it)",
		"packet loss between zones zone-a and zone-b on 3 pairs towards it from node-1, node-3, node-5 (the link between the zones, neither node blamed), since 2026-03-14T15:06:26Z (3m0s ago); worst (netpulse/netpulse-agent-3-to-netpulse-agent-6): packet loss between zones zone-a and zone-b: 6.3 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, from 3 observer nodes in zone-a towards 3 target nodes in zone-b",
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "blamed on it")
	assert.NotContains(t, text, "names no side")

	// An observer of the source zone: the pairs it observes, not it.
	e, ok = m.WhyNode("node-1")
	require.True(t, ok)
	require.Len(t, e.Gray, 1)
	assert.Equal(t, []string{"zone", "observes"}, []string{e.Gray[0].Side, e.Gray[0].Direction})
	assert.False(t, e.Gray[0].Blamed)
	text = strings.Join(e.Lines, "\n")
	t.Log("\n" + text)
	assert.Contains(t, text, "gray verdict: it is not blamed: packet loss between zones zone-a and zone-b")
	assert.Contains(t, text, "packet loss between zones zone-a and zone-b on 3 pairs it observes, towards node-2, node-4, node-6 (the link between the zones, neither node blamed)")

	// Blamed for its own latency, and the link besides.
	e, ok = m.WhyNode("node-2")
	require.True(t, ok)
	text = strings.Join(e.Lines, "\n")
	t.Log("\n" + text)
	assert.Contains(t, text, "gray verdict: it is blamed for HighLatency (high latency) on its targets' side")
	assert.Contains(t, text, "also packet loss between zones zone-a and zone-b (a lossy link between the zones: no node is blamed for it)")
	require.Len(t, e.Gray, 2)
	assert.True(t, e.Gray[0].Blamed)
	assert.Equal(t, matrix.SideZone, e.Gray[1].Side)
}

func TestWhyZoneNamesTheLossyLink(t *testing.T) {
	m := zoneLinkCluster(t)
	for _, zone := range []string{"zone-a", "zone-b"} {
		e, ok := m.WhyZone(zone)
		require.True(t, ok)
		assert.Equal(t, matrix.Degraded, e.Verdict, zone)
		require.Len(t, e.GrayZonePairs, 1, zone)
		z := e.GrayZonePairs[0]
		assert.Equal(t, matrix.ZoneLink{From: "zone-a", To: "zone-b"}, z.ZoneLink)
		assert.Equal(t, 9, z.Pairs)
		assert.Equal(t, []string{"node-1", "node-3", "node-5"}, z.Observers)
		assert.Equal(t, []string{"node-2", "node-4", "node-6"}, z.Targets)
		assert.Equal(t, now.Add(-3*time.Minute), z.Since)
		text := strings.Join(e.Lines, "\n")
		t.Log("\n" + text)
		assert.Contains(t, text, "zone-a → zone-b: packet loss between zones zone-a and zone-b (a lossy link between the zones, no node blamed) on 9 pairs, from 3 observer nodes (node-1, node-3, node-5) towards 3 target nodes (node-2, node-4, node-6), since 2026-03-14T15:06:26Z (3m0s ago); worst (netpulse/netpulse-agent-3-to-netpulse-agent-")
	}
	e, ok := m.WhyZone("zone-a")
	require.True(t, ok)
	assert.Empty(t, e.GrayNodes, "no node of the source zone is blamed")

	// Without the link the zones read Reachable and name no zone pair.
	clean := build(matrixtest.Cluster(matrixtest.Options{Nodes: 6, Zones: 2, Stable: 5, Now: now}), true)
	e, ok = clean.WhyZone("zone-b")
	require.True(t, ok)
	assert.Equal(t, matrix.Reachable, e.Verdict)
	assert.Empty(t, e.GrayZonePairs)
	assert.Empty(t, clean.GrayZonePairs(""))
}

func TestCellsNameTheLossyLink(t *testing.T) {
	m := zoneLinkCluster(t)
	c := m.Cell("node-1", "node-4")
	require.NotNil(t, c)
	assert.Equal(t, &matrix.ZoneLink{From: "zone-a", To: "zone-b"}, c.ZoneLoss)
	assert.Equal(t, "PacketLoss between zones zone-a and zone-b", matrix.DegradedText(c.Degraded, c.ZoneLoss))
	assert.Nil(t, m.Cell("node-2", "node-1").ZoneLoss, "the other direction is clean")
	assert.Nil(t, m.Cell("node-4", "node-2").ZoneLoss)
	assert.Equal(t, "HighLatency", matrix.DegradedText(m.Cell("node-4", "node-2").Degraded, nil))
	assert.Equal(t, "MTUBlackHole, PacketLoss between zones a and b, HighLatency",
		matrix.DegradedText([]string{"MTUBlackHole", "PacketLoss", "HighLatency"}, &matrix.ZoneLink{From: "a", To: "b"}))

	mx, err := m.Matrix(nil, 0)
	require.NoError(t, err)
	b, err := json.Marshal(mx)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"dr":["PacketLoss"],"zl":{"from":"zone-a","to":"zone-b"},"n":1`)
	assert.Equal(t, 9, strings.Count(string(b), `"zl":`))

	details := m.PairsBetween("node-5", "node-2")
	require.Len(t, details, 1)
	assert.Equal(t, "PacketLoss between zones zone-a and zone-b", details[0].GrayText())
}

// A ZoneNetworkHealth the exporter wrote for a lossy link (Reachable, Degraded=True/
// PacketLoss): the zone pair reads Degraded with the message, in the summary's cell and
// in why zone/<z>.
func TestLossyZonePairObject(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 6, Zones: 2, Stable: 1, Now: now})
	m := build(f, true)
	msg := fmt.Sprintf(lossZones, "5.2")
	o := &v1alpha1.ZoneNetworkHealth{
		ObjectMeta: metav1.ObjectMeta{Name: "zone-a.zone-b"},
		Spec:       v1alpha1.ZoneNetworkHealthSpec{SourceZone: "zone-a", TargetZone: "zone-b"},
		Status: v1alpha1.ZoneNetworkHealthStatus{Reachability: v1alpha1.Reachable, NodePairs: 9,
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonZonePairReachable,
					Message: "zone zone-a reaches zone zone-b", LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Minute))},
				{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPacketLoss,
					Message: msg, LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Minute))},
			}},
	}
	z := matrix.ZonePairFrom(o)
	assert.Equal(t, matrix.Degraded, z.Verdict)
	assert.Equal(t, []string{v1alpha1.ReasonPacketLoss, msg}, []string{z.DegradedReason, z.DegradedMessage})

	m = matrix.Build(matrix.Input{Objects: f.Objects, Nodes: m.Nodes, Now: now, ZonePairs: []*v1alpha1.ZoneNetworkHealth{o}})
	for _, c := range m.Summary().Cells {
		if c.From == "zone-a" && c.To == "zone-b" {
			assert.Equal(t, matrix.Degraded, c.Verdict)
		}
	}
	e, ok := m.WhyZone("zone-b")
	require.True(t, ok)
	assert.Equal(t, matrix.Degraded, e.Verdict)
	text := strings.Join(e.Lines, "\n")
	t.Log("\n" + text)
	assert.Contains(t, text, "zone-a → zone-b: Degraded since 2026-03-14T15:06:26Z (3m0s ago) (ZonePairReachable): 0 of 9 node pairs fail, from 0 observer nodes towards 0 target nodes; Degraded PacketLoss since 2026-03-14T15:07:26Z (2m0s ago): packet loss between zones zone-a and zone-b: 5.2 %")
	assert.NotContains(t, text, "no zone pair in or out of it was found")

	// Cleared (Degraded=False): Reachable again.
	o.Status.Conditions[1].Status, o.Status.Conditions[1].Reason = metav1.ConditionFalse, v1alpha1.ReasonWithinThresholds
	z = matrix.ZonePairFrom(o)
	assert.Equal(t, matrix.Reachable, z.Verdict)
	assert.Empty(t, z.DegradedReason)
}
