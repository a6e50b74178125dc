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
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/readiness"
	"github.com/netpulse/netpulse/internal/identity"
)

// Roles (#28 item 3): a sidecar, or any workload service account allowed beside the
// agents', is authenticated and bound to its own pod, but it is not an agent.

// sidecarOn is a sidecar's identity: the pod web-0 of namespace shop on node, whose
// workload service account the gateway allows (role sidecar).
func sidecarOn(node string) identity.Identity {
	return identity.Identity{Namespace: "shop", ServiceAccount: "web", PodName: "web-0", PodUID: "uid-w", NodeName: node, Role: identity.RoleSidecar}
}

func roleSkips(t *testing.T, tt *componenttest.Telemetry) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if m, err := tt.GetMetric("otelcol_pod_network_health_datapoints_skipped"); err == nil {
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			v, _ := dp.Attributes.Value(attribute.Key("reason"))
			out[v.AsString()] += dp.Value
		}
	}
	return out
}

// Its own pod's observations are refused as source_not_agent, whichever way the identity
// travels.
func TestBindRefusesNonAgents(t *testing.T) {
	sc := sidecarOn("node-c")
	for name, ctx := range map[string]context.Context{"auth": viaAuth(sc), "metadata": viaMetadata(sc)} {
		md := round("shop", "web-0", "uid-w", "node-c", true)
		out, rejected := newBinder(zap.NewNop()).bind(ctx, md)
		assert.Equal(t, map[string]int{skipSourceNotAgent: len(peers) * pointsPerTarget}, rejected, name)
		assert.Equal(t, 0, out.ResourceMetrics().Len(), name)
	}
}

// Through consume: a sidecar's observations reach neither the engine (no observer, so no
// node quorum and no pair object) nor the readiness gate. With two reaching nodes
// required, the agent's reach plus a sidecar's on another node do not make a pod ready.
func TestSidecarCountsTowardNoQuorumAndGetsNoPairs(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.RequireAuthenticatedObservers = true
	cfg.ReadinessGate.Enabled = true
	cfg.ReadinessGate.MinReachingNodes = 2
	tt := componenttest.NewTelemetry()
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	e, err := newExporter(cfg, set)
	require.NoError(t, err)
	created := time.Now().Add(-time.Minute)

	require.NoError(t, e.consume(viaAuth(agentA), round("netpulse", "agent-a", "uid-a", "node-a", true)))
	require.NoError(t, e.consume(viaAuth(sidecarOn("node-c")), round("shop", "web-0", "uid-w", "node-c", true)))

	assert.Equal(t, map[string]int64{skipSourceNotAgent: int64(len(peers) * pointsPerTarget)}, roleSkips(t, tt))
	obs := e.engine.Observers()
	require.Len(t, obs, 1, "only the agent observes")
	assert.Equal(t, "agent-a", obs[0].Name)
	assert.Equal(t, len(peers), e.engine.Stats().Pairs, "pairs (and their objects) of the agent only")
	target := readiness.PodInfo{Namespace: peers[0].NS, Name: peers[0].Pod, UID: peers[0].UID, Node: peers[0].Node, Created: created, HasGate: true}
	e.mu.Lock()
	flips := e.readiness.Decide([]readiness.PodInfo{target}, time.Now())
	e.mu.Unlock()
	assert.Empty(t, flips, "one agent's reach is not two reaching nodes: the sidecar's does not count")

	// The control: a second agent on node-c does count.
	agentC := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-x", PodUID: "uid-x", NodeName: "node-c", Role: identity.RoleAgent}
	require.NoError(t, e.consume(viaAuth(agentC), round("netpulse", "agent-x", "uid-x", "node-c", true)))
	assert.Len(t, e.engine.Observers(), 2)
	e.mu.Lock()
	flips = e.readiness.Decide([]readiness.PodInfo{target}, time.Now())
	e.mu.Unlock()
	assert.Len(t, flips, 1)
	require.NoError(t, e.shutdown(context.Background()))
	require.NoError(t, tt.Shutdown(context.Background()))
}
