// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

// grayModel: four nodes, full mesh; node-3 loses 5.2 % as a target (seen from node-1,
// node-2, node-4), node-4 is slow as an observer, node-1 -> node-2 has an MTU black hole.
func grayModel(t *testing.T) *matrix.Model {
	t.Helper()
	now := time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 4, Stable: 3, Now: now})
	since := now.Add(-2 * time.Minute)
	for _, i := range []int{1, 2, 4} {
		matrixtest.Degrade(f.Find(i, 3), v1alpha1.ReasonPacketLoss,
			fmt.Sprintf("packet loss at the target's node node-3: %d.2 %% (95 %% CI 3.1-8.0 %%) of 1440 echoes over 2m0s, lost from 3 observer nodes", i), since)
	}
	for _, j := range []int{1, 2} {
		matrixtest.Degrade(f.Find(4, j), v1alpha1.ReasonHighLatency,
			"high latency at the observer's own node node-4: 85 % of its recent rounds are slow against their targets' baselines", since)
	}
	matrixtest.Degrade(f.Find(1, 2), v1alpha1.ReasonMTUBlackHole, "full-size packets (1450 bytes) vanish; 1280 bytes pass", since)
	in := matrix.Input{Now: now, Objects: f.Objects}
	for _, n := range f.Nodes {
		in.Nodes = append(in.Nodes, matrix.NodeFrom(n, ""))
	}
	return matrix.Build(in)
}

func TestMatrixNamesDegradedReasons(t *testing.T) {
	m := grayModel(t)
	mx, err := m.Matrix(nil, 0)
	require.NoError(t, err)
	var out bytes.Buffer
	writeMatrix(&out, painter{}, m, mx)
	text := out.String()
	t.Log("\n" + text)
	assert.Contains(t, text, "1  node-1  False   - ~ ~ +")
	for _, want := range []string{
		"~ Degraded (PacketLoss, HighLatency, MTUBlackHole or AddressFamilyUnreachable: why OBSERVER,TARGET names it)",
		"degraded cells (~, 6; kubectl netpulse why OBSERVER,TARGET gives the figures):\n  node-1 -> node-2: MTUBlackHole\n  node-1 -> node-3: PacketLoss\n",
		"  node-4 -> node-1: HighLatency\n",
		"gray verdicts (2 nodes blamed for packet loss or high latency; target: most of its observers see it, observer: it sees it towards most of its targets):\n  node-3: PacketLoss target (3 pairs)\n  node-4: HighLatency observer (2 pairs)\n",
	} {
		assert.Contains(t, text, want)
	}
}

func TestWhyGrayNodeAndCell(t *testing.T) {
	m := grayModel(t)
	o := &options{}
	e, err := o.resolve(m, "node-3")
	require.NoError(t, err)
	var out bytes.Buffer
	writeWhy(&out, painter{}, e)
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"gray verdict: it is blamed for PacketLoss (packet loss) on its targets' side: most of its observers see it",
		"packet loss blamed on it as a target: 3 pairs from node-1, node-2, node-4, since 2026-03-14T15:07:26Z (2m0s ago); worst (netpulse/netpulse-agent-4-to-netpulse-agent-3): packet loss at the target's node node-3: 4.2 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, lost from 3 observer nodes",
		"PacketLoss at the target's node node-3\n",
	} {
		assert.Contains(t, text, want)
	}

	e, err = o.resolve(m, "node/node-4")
	require.NoError(t, err)
	out.Reset()
	writeWhy(&out, painter{}, e)
	text = out.String()
	t.Log("\n" + text)
	assert.Contains(t, text, "gray verdict: it is blamed for HighLatency (high latency) on its own observer side: it sees it towards most of its targets")
	assert.Contains(t, text, "pairs it observes with a gray verdict:")
	assert.Contains(t, text, "HighLatency at the observer's own node node-4\n")

	out.Reset()
	require.NoError(t, writeCell(&out, painter{}, m, "node-2", "node-3"))
	text = out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"cell node-2 -> node-3: Degraded, 1 object(s) (degraded: PacketLoss)",
		"netpulse/netpulse-agent-2-to-netpulse-agent-3: netpulse-agent-2 -> pod netpulse/netpulse-agent-3",
		"verdict: Degraded; Reachable condition ProbesSucceeded: probes succeeded in the last 5m",
		"degraded: PacketLoss at the target's node node-3 since 2026-03-14T15:07:26Z (2m0s ago)\n      packet loss at the target's node node-3: 2.2 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, lost from 3 observer nodes",
		"RTT p50 ",
	} {
		assert.Contains(t, text, want)
	}
	out.Reset()
	require.NoError(t, writeCell(&out, painter{}, m, "node-1", "node-1"))
	assert.Contains(t, out.String(), "no object")
	assert.ErrorContains(t, writeCell(&out, painter{}, m, "node-1", "node-9"), `node "node-9"`)

	// The command routes OBSERVER,TARGET (and pair/OBSERVER,TARGET) to the cell.
	assert.True(t, strings.Contains(o.whyCommand().Use, "observer,target"))
}

// zoneLinkModel: four nodes, full mesh, zone-a (node-1, node-3) and zone-b (node-2,
// node-4); the link from zone-a to zone-b loses packets: the pairs across it read
// PacketLoss on the zone side.
func zoneLinkModel(t *testing.T) *matrix.Model {
	t.Helper()
	now := time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 4, Zones: 2, Stable: 3, Now: now})
	since := now.Add(-2 * time.Minute)
	for _, i := range []int{1, 3} {
		for _, j := range []int{2, 4} {
			matrixtest.Degrade(f.Find(i, j), v1alpha1.ReasonPacketLoss,
				fmt.Sprintf("packet loss between zones zone-a and zone-b: %d.0 %% (95 %% CI 3.1-8.0 %%) of 1440 echoes over 2m0s, from 2 observer nodes in zone-a towards 2 target nodes in zone-b", i+j), since)
		}
	}
	in := matrix.Input{Now: now, Objects: f.Objects}
	for _, n := range f.Nodes {
		in.Nodes = append(in.Nodes, matrix.NodeFrom(n, ""))
	}
	return matrix.Build(in)
}

func TestMatrixAndWhyNameTheLossyLink(t *testing.T) {
	m := zoneLinkModel(t)
	mx, err := m.Matrix(nil, 0)
	require.NoError(t, err)
	var out bytes.Buffer
	writeMatrix(&out, painter{}, m, mx)
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"degraded cells (~, 4; kubectl netpulse why OBSERVER,TARGET gives the figures):\n  node-1 -> node-2: PacketLoss between zones zone-a and zone-b\n",
		"gray verdicts between zones (1 zone pair: a lossy link between the zones, no node blamed; kubectl netpulse why zone/NAME gives the figures):\n  zone-a -> zone-b: PacketLoss (4 pairs, worst 7.0 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, from 2 observer nodes in zone-a towards 2 target nodes in zone-b)\n",
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "nodes blamed for packet loss", "the link blames no node")

	out.Reset()
	writeZones(&out, painter{}, m, DefaultMaxNodes)
	assert.Contains(t, out.String(), "gray verdicts between zones (1 zone pair")

	o := &options{}
	for _, arg := range []string{"zone/zone-b", "node-4"} {
		e, err := o.resolve(m, arg)
		require.NoError(t, err, arg)
		out.Reset()
		writeWhy(&out, painter{}, e)
		text = out.String()
		t.Log("\n" + text)
		assert.Contains(t, text, "packet loss between zones zone-a and zone-b", arg)
		assert.Contains(t, text, "of 1440 echoes over 2m0s", arg)
		assert.NotContains(t, text, "blamed on it", arg)
	}
	assert.Contains(t, text, "gray verdict: it is not blamed: packet loss between zones zone-a and zone-b (a lossy link between the zones: no node is blamed for it)")
	assert.Contains(t, text, "PacketLoss between zones zone-a and zone-b\n", "the pair rows' reason")

	out.Reset()
	require.NoError(t, writeCell(&out, painter{}, m, "node-3", "node-2"))
	text = out.String()
	t.Log("\n" + text)
	assert.Contains(t, text, "cell node-3 -> node-2: Degraded, 1 object(s) (degraded: PacketLoss between zones zone-a and zone-b)")
	assert.Contains(t, text, "degraded: PacketLoss between zones zone-a and zone-b since ")
}
