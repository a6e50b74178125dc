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

// The exporter's gray messages (exporter/podnetworkhealthexporter/internal/plan GrayMessage).
const (
	lossTarget = "packet loss at the target's node node-5: %s %% (95 %% CI 3.1-8.0 %%) of 1440 echoes over 2m0s, lost from 5 observer nodes"
	lossOwn    = "packet loss at the observer's own node %s: %s %% (95 %% CI 4.0-8.5 %%) of 900 echoes over 2m0s, towards 4 of its target nodes"
	lossPath   = "packet loss on this path alone: 14.3 % (95 % CI 9.6-20.2 %) of 210 echoes over 5m0s"
	slowOwn    = "high latency at the observer's own node node-5: %d %% of its recent rounds are slow against their targets' baselines"
	slowTarget = "high latency at the target's node node-6: RTT p50 20.2ms against a learnt baseline of 200µs; 4 of 5 observer nodes see it slow"
)

// grayCluster: six nodes, full mesh, zone-a (node-1, -3, -5) and zone-b (node-2, -4, -6).
// node-5 loses packets as a target (all five observers) and as an observer (towards node-1
// and node-2) and is slow as an observer (towards node-4, node-6); node-3 loses packets as an
// observer; the path node-2 -> node-6 alone loses; node-6 is slow as a target (seen from
// node-1, whose cell also has an MTU black hole).
func grayCluster(t *testing.T) (matrixtest.Fixture, *matrix.Model) {
	t.Helper()
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 6, Zones: 2, Stable: 5, Now: now})
	since := now.Add(-3 * time.Minute)
	deg := func(i, j int, reason, msg string) *v1alpha1.PodNetworkHealth {
		o := f.Find(i, j)
		require.NotNil(t, o, "%d -> %d", i, j)
		matrixtest.Degrade(o, reason, msg, since)
		return o
	}
	for i, loss := range map[int]string{1: "4.1", 2: "5.2", 3: "3.9", 4: "5.2", 6: "4.4"} {
		o := deg(i, 5, v1alpha1.ReasonPacketLoss, fmt.Sprintf(lossTarget, loss))
		if i == 4 {
			// The same figure written earlier: the most recent one is quoted.
			older := metav1.NewTime(now.Add(-30 * time.Second))
			o.Status.LastObservedTime = &older
		}
	}
	deg(5, 1, v1alpha1.ReasonPacketLoss, fmt.Sprintf(lossOwn, "node-5", "6.0"))
	deg(5, 2, v1alpha1.ReasonPacketLoss, fmt.Sprintf(lossOwn, "node-5", "6.5")).Status.Conditions[1].LastTransitionTime = metav1.NewTime(now.Add(-5 * time.Minute))
	deg(5, 4, v1alpha1.ReasonHighLatency, fmt.Sprintf(slowOwn, 85))
	deg(5, 6, v1alpha1.ReasonHighLatency, fmt.Sprintf(slowOwn, 70))
	for _, j := range []int{1, 2, 4, 6} {
		deg(3, j, v1alpha1.ReasonPacketLoss, fmt.Sprintf(lossOwn, "node-3", "12.0"))
	}
	deg(2, 6, v1alpha1.ReasonPacketLoss, lossPath)
	deg(1, 6, v1alpha1.ReasonMTUBlackHole, "full-size packets (1450 bytes) vanish; 1280 bytes pass")
	slow := f.Find(1, 6).DeepCopy()
	slow.Name = "to-node-6-slow"
	matrixtest.Degrade(slow, v1alpha1.ReasonHighLatency, slowTarget, since)
	f.Objects = append(f.Objects, slow)
	return f, build(f, true)
}

func TestParseGray(t *testing.T) {
	for _, tc := range []struct {
		reason, msg string
		want        *matrix.Gray
	}{
		{v1alpha1.ReasonPacketLoss, fmt.Sprintf(lossTarget, "5.2"), &matrix.Gray{Reason: "PacketLoss", Side: "target", Node: "node-5",
			Figures: "5.2 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, lost from 5 observer nodes"}},
		{v1alpha1.ReasonPacketLoss, fmt.Sprintf(lossOwn, "node-3", "12.0"), &matrix.Gray{Reason: "PacketLoss", Side: "observer", Node: "node-3",
			Figures: "12.0 % (95 % CI 4.0-8.5 %) of 900 echoes over 2m0s, towards 4 of its target nodes"}},
		{v1alpha1.ReasonPacketLoss, lossPath, &matrix.Gray{Reason: "PacketLoss", Side: "path",
			Figures: "14.3 % (95 % CI 9.6-20.2 %) of 210 echoes over 5m0s"}},
		{v1alpha1.ReasonHighLatency, slowTarget, &matrix.Gray{Reason: "HighLatency", Side: "target", Node: "node-6",
			Figures: "RTT p50 20.2ms against a learnt baseline of 200µs; 4 of 5 observer nodes see it slow"}},
		{v1alpha1.ReasonHighLatency, fmt.Sprintf(slowOwn, 85), &matrix.Gray{Reason: "HighLatency", Side: "observer", Node: "node-5",
			Figures: "85 % of its recent rounds are slow against their targets' baselines"}},
		// Another writer's words: no side, the whole message as figures.
		{v1alpha1.ReasonHighLatency, "slow", &matrix.Gray{Reason: "HighLatency", Figures: "slow"}},
		{v1alpha1.ReasonMTUBlackHole, "full-size packets vanish", nil},
	} {
		got := matrix.ParseGray(tc.reason, tc.msg)
		if tc.want == nil {
			assert.Nil(t, got, tc.msg)
			continue
		}
		require.NotNil(t, got, tc.msg)
		assert.Equal(t, []string{tc.want.Reason, tc.want.Side, tc.want.Node, tc.want.Figures},
			[]string{got.Reason, got.Side, got.Node, got.Figures}, tc.msg)
	}
}

func TestGrayCellsNameTheReason(t *testing.T) {
	_, m := grayCluster(t)
	c := m.Cell("node-1", "node-5")
	require.NotNil(t, c)
	assert.Equal(t, matrix.Degraded, c.Verdict)
	assert.Equal(t, []string{v1alpha1.ReasonPacketLoss}, c.Degraded)
	assert.Equal(t, []string{v1alpha1.ReasonMTUBlackHole, v1alpha1.ReasonHighLatency}, m.Cell("node-1", "node-6").Degraded, "hard failures first")
	assert.Empty(t, m.Cell("node-1", "node-2").Degraded)

	mx, err := m.Matrix(nil, 0)
	require.NoError(t, err)
	b, err := json.Marshal(mx)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"dr":["PacketLoss"],"n":1`)

	zc := map[string][]string{}
	for _, c := range m.Summary().Cells {
		zc[c.From+">"+c.To] = c.Degraded
	}
	assert.Equal(t, map[string][]string{
		"zone-a>zone-a": {"PacketLoss"}, "zone-a>zone-b": {"MTUBlackHole", "PacketLoss", "HighLatency"},
		"zone-b>zone-a": {"PacketLoss"}, "zone-b>zone-b": {"PacketLoss"},
	}, zc)

	details := m.PairsBetween("node-2", "node-5")
	require.Len(t, details, 1)
	require.NotNil(t, details[0].Gray)
	assert.Equal(t, "target", details[0].Gray.Side)
	assert.Equal(t, "node-5", details[0].Gray.Node)
	assert.Equal(t, now.Add(-3*time.Minute), details[0].DegradedSince)
}

func TestWhyNodeGrayBothSides(t *testing.T) {
	_, m := grayCluster(t)
	e, ok := m.WhyNode("node-5")
	require.True(t, ok)
	assert.Equal(t, matrix.Degraded, e.Verdict)
	require.Len(t, e.Gray, 3)

	loss := e.Gray[0]
	assert.Equal(t, []string{"PacketLoss", "target", "towards"}, []string{loss.Reason, loss.Side, loss.Direction})
	assert.True(t, loss.Blamed)
	assert.Equal(t, 5, loss.Pairs)
	assert.Equal(t, []string{"node-1", "node-2", "node-3", "node-4", "node-6"}, loss.Peers)
	assert.Equal(t, []string{"node-5"}, loss.Nodes)
	assert.Equal(t, "netpulse/netpulse-agent-2-to-netpulse-agent-5", loss.Quoted, "the worst figure, the most recent on a tie")
	assert.Equal(t, "5.2 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, lost from 5 observer nodes", loss.Figures)

	own := e.Gray[1]
	assert.Equal(t, []string{"PacketLoss", "observer", "observes"}, []string{own.Reason, own.Side, own.Direction})
	assert.True(t, own.Blamed)
	assert.Equal(t, []string{"node-1", "node-2"}, own.Peers)
	assert.Equal(t, "netpulse/netpulse-agent-5-to-netpulse-agent-2", own.Quoted)
	assert.Equal(t, now.Add(-5*time.Minute), own.Since)

	slow := e.Gray[2]
	assert.Equal(t, []string{"HighLatency", "observer", "observes"}, []string{slow.Reason, slow.Side, slow.Direction})
	assert.True(t, slow.Blamed)
	assert.Equal(t, "netpulse/netpulse-agent-5-to-netpulse-agent-4", slow.Quoted)
	assert.Len(t, e.ObservedGray, 4)

	text := strings.Join(e.Lines, "\n")
	t.Log("\n" + text)
	for _, want := range []string{
		"node node-5 (zone zone-a): Degraded (reachable, but some observers, an address family or full-size packets fail, or packet loss or high latency is judged)",
		"degraded pairs by reason: PacketLoss 5",
		"gray verdict: it is blamed for PacketLoss (packet loss) on both sides: as a target (most of its observers see it) and as an observer (it sees it towards most of its targets); HighLatency (high latency) on its own observer side: it sees it towards most of its targets",
		"packet loss blamed on it as a target: 5 pairs from node-1, node-2, node-3, node-4, node-6, since 2026-03-14T15:06:26Z (3m0s ago); worst (netpulse/netpulse-agent-2-to-netpulse-agent-5): packet loss at the target's node node-5: 5.2 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, lost from 5 observer nodes",
		"packet loss blamed on it as an observer: 2 pairs it observes, towards node-1, node-2, since 2026-03-14T15:04:26Z (5m0s ago); worst (netpulse/netpulse-agent-5-to-netpulse-agent-2): packet loss at the observer's own node node-5: 6.5 %",
		"high latency blamed on it as an observer: 2 pairs it observes, towards node-4, node-6, since 2026-03-14T15:06:26Z (3m0s ago); worst (netpulse/netpulse-agent-5-to-netpulse-agent-4): high latency at the observer's own node node-5: 85 % of its recent rounds are slow",
	} {
		assert.Contains(t, text, want)
	}
}

// An innocent node: the gray pairs towards it are blamed on their observers or on a path,
// and the one pair of node-3 towards node-5 on node-5, never on node-3 as a target.
func TestWhyNodeGrayNotBlamed(t *testing.T) {
	_, m := grayCluster(t)
	e, ok := m.WhyNode("node-3")
	require.True(t, ok)
	text := strings.Join(e.Lines, "\n")
	t.Log("\n" + text)
	for _, want := range []string{
		"gray verdict: it is blamed for PacketLoss (packet loss) on its own observer side: it sees it towards most of its targets",
		"packet loss blamed on it as an observer: 4 pairs it observes, towards node-1, node-2, node-4, node-6",
		"packet loss on 1 pair it observes, blamed on their targets' nodes (node-5), not on it",
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "as a target")

	e, ok = m.WhyNode("node-6")
	require.True(t, ok)
	text = strings.Join(e.Lines, "\n")
	t.Log("\n" + text)
	for _, want := range []string{
		"gray verdict: it is blamed for HighLatency (high latency) on its targets' side: most of its observers see it",
		"high latency blamed on it as a target: 1 pair from node-1",
		"packet loss on 1 pair towards it, blamed on their observers' own nodes (node-3), not on it",
		"packet loss on single paths towards it (neither node blamed): 1 pair from node-2",
		"high latency on 1 pair towards it, blamed on their observers' own nodes (node-5), not on it",
	} {
		assert.Contains(t, text, want)
	}

	e, ok = m.WhyNode("node-4")
	require.True(t, ok)
	text = strings.Join(e.Lines, "\n")
	assert.Contains(t, text, "gray verdict: it is not blamed")
	for _, f := range e.Gray {
		assert.False(t, f.Blamed, "%+v", f)
	}

	h, ok := matrix.Build(matrix.Input{Objects: matrixtest.Cluster(matrixtest.Options{Nodes: 3, Now: now}).Objects, Now: now}).WhyNode("node-1")
	require.True(t, ok)
	assert.Empty(t, h.Gray)
	assert.NotContains(t, strings.Join(h.Lines, "\n"), "gray")
}

func TestWhyPodAndZoneGray(t *testing.T) {
	_, m := grayCluster(t)
	e, ok := m.WhyPod("netpulse", "netpulse-agent-5")
	require.True(t, ok)
	text := strings.Join(e.Lines, "\n")
	t.Log("\n" + text)
	assert.Contains(t, text, "gray verdict: its node node-5 is blamed for PacketLoss (packet loss) on both sides")
	assert.Contains(t, text, "packet loss blamed on its node node-5 as an observer: 2 pairs it observes, towards node-1, node-2")
	require.Len(t, e.Gray, 3)
	assert.True(t, e.Gray[1].Blamed)

	z, ok := m.WhyZone("zone-a")
	require.True(t, ok)
	assert.Equal(t, []matrix.GrayNode{
		{Name: "node-3", Reasons: []string{"PacketLoss observer"}, Pairs: 4},
		{Name: "node-5", Reasons: []string{"HighLatency observer", "PacketLoss observer", "PacketLoss target"}, Pairs: 9},
	}, z.GrayNodes)
	assert.Contains(t, strings.Join(z.Lines, "\n"), "gray verdicts: 2 of its nodes blamed (reason and side; kubectl netpulse why <node> gives the figures): node-3 (PacketLoss observer; 4 pairs); node-5 (")
	z, ok = m.WhyZone("zone-b")
	require.True(t, ok)
	assert.Equal(t, []matrix.GrayNode{{Name: "node-6", Reasons: []string{"HighLatency target"}, Pairs: 1}}, z.GrayNodes)
}
