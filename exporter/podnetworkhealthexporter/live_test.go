// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/probetest"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/livematrix"
)

// The live matrix gets every observation the engine accepted, rotating ones included, in
// the row of the node bound to the authenticated caller, and nothing else.
func TestLiveMatrixFromAcceptedObservations(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.RequireAuthenticatedObservers = true
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	e.live = &livematrix.Hub{}

	// No view attached: nothing is recorded (and nothing is spent).
	require.NoError(t, e.consume(viaAuth(agentA), round("netpulse", "agent-a", "uid-a", "node-a", true)))
	store, detach := e.live.Attach(livematrix.Config{})
	defer detach()
	assert.Equal(t, 0, store.Stats().Cells)

	now := time.Now()
	targets := append([]probetest.Target{}, peers...)
	targets = append(targets, probetest.Target{NS: "netpulse", Pod: "agent-d", UID: "uid-d", Node: "node-d", IP: "10.0.0.4", Rotating: true})
	md := probetest.NewAgent("netpulse", "agent-a", "uid-a", "node-a", "10.0.0.1").Round(now, targets,
		[]probetest.Outcome{{OK: true, RTT: 2 * time.Millisecond}, {OK: true, RTT: time.Millisecond}, {OK: false}})
	require.NoError(t, e.consume(viaAuth(agentA), md))
	row := store.Row("node-a", now)
	require.Len(t, row, 3, "%+v", row)
	assert.Equal(t, "node-b", row[0].Target)
	assert.True(t, row[0].Reachable)
	assert.True(t, row[0].Stable)
	assert.NotEmpty(t, row[0].P50, "the round's p50")
	assert.Equal(t, "node-d", row[2].Target)
	assert.False(t, row[2].Reachable)
	assert.False(t, row[2].Stable, "a rotating probe")

	// agent-a's credentials naming another node: the binding drops it, no row for it.
	require.NoError(t, e.consume(viaAuth(agentA), round("netpulse", "agent-a", "uid-a", "node-evil", false)))
	assert.Empty(t, store.Row("node-evil", now))
	assert.Equal(t, 1, store.Stats().Rows)

	// What the engine refuses (dated beyond the future skew, or no valid pair) is not
	// recorded either.
	bad := []observation.Observation{
		{Source: observation.Source{Namespace: "netpulse", Name: "agent-x", UID: "uid-x", Node: "node-x"},
			Target:    observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: "agent-b", UID: "uid-b", Node: "node-b"},
			Timestamp: now.Add(time.Hour), ProbeType: "icmp", Success: true},
		{Source: observation.Source{Node: "node-y"},
			Target:    observation.Target{Kind: observation.TargetPod, Node: "node-b"},
			Timestamp: now, ProbeType: "icmp", Success: true},
	}
	assert.Equal(t, 2, e.engine.Observe(bad, now), "the engine ignores both")
	e.recordLive(bad, now)
	assert.Equal(t, 1, store.Stats().Rows)
}

// A standby (leader election on, never the leader) marks the hub as produced-for but not
// leading: its view says it has no live data.
func TestLiveMatrixStandby(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.AuthType = kubeclient.AuthKubeConfig
	cfg.Kubeconfig = "testdata/unreachable.kubeconfig"
	cfg.LeaderElection.LeaseNamespace = "netpulse"
	cfg.LeaderElection.Identity = "standby"
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	h := &livematrix.Hub{}
	e.live = h
	assert.Equal(t, livematrix.StateNoExporter, h.Status(nil).State)
	require.NoError(t, e.start(context.Background(), componenttest.NewNopHost()))
	assert.Equal(t, livematrix.StateStandby, h.Status(nil).State)
	require.NoError(t, e.shutdown(context.Background()))
	assert.Equal(t, livematrix.StateNoExporter, h.Status(nil).State)
}

// Without leader election the one replica writes, so its view's live cells are the
// cluster's; it stops saying so when it shuts down.
func TestLiveMatrixLeader(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.AuthType = kubeclient.AuthKubeConfig
	cfg.Kubeconfig = "testdata/unreachable.kubeconfig"
	cfg.LeaderElection.Enabled = false
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	h := &livematrix.Hub{}
	e.live = h
	require.NoError(t, e.start(context.Background(), componenttest.NewNopHost()))
	assert.Eventually(t, func() bool { return h.Status(nil).State == livematrix.StateLive }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, e.shutdown(context.Background()))
	assert.Equal(t, livematrix.StateNoExporter, h.Status(nil).State)
}
