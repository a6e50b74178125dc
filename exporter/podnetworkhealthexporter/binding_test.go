// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/probetest"
	"github.com/netpulse/netpulse/internal/identity"
)

// pointsPerTarget is what probetest renders per target and round: status, loss, sent,
// lost, duration.
const pointsPerTarget = 5

var agentA = identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-a", PodUID: "uid-a", NodeName: "node-a", Role: identity.RoleAgent}

var peers = []probetest.Target{
	{NS: "netpulse", Pod: "agent-b", UID: "uid-b", Node: "node-b", IP: "10.0.0.2"},
	{NS: "netpulse", Pod: "agent-c", UID: "uid-c", Node: "node-c", IP: "10.0.0.3"},
}

func round(ns, pod, uid, node string, ok bool) pmetric.Metrics {
	out := []probetest.Outcome{{OK: ok, RTT: time.Millisecond}, {OK: ok, RTT: time.Millisecond}}
	return probetest.NewAgent(ns, pod, uid, node, "10.0.0.1").Round(time.Now(), peers, out)
}

func viaAuth(id identity.Identity) context.Context {
	return client.NewContext(context.Background(), client.Info{Auth: identity.NewAuthData(id)})
}

// What a batch processor with the identity keys in metadata_keys passes on: the metadata
// alone, no Auth.
func viaMetadata(id identity.Identity) context.Context {
	return client.NewContext(context.Background(), client.Info{Metadata: identity.WithIdentity(client.Metadata{}, id)})
}

func TestBindKeepsTheCallersOwnObservations(t *testing.T) {
	b := newBinder(zap.NewNop())
	for name, ctx := range map[string]context.Context{"auth": viaAuth(agentA), "metadata": viaMetadata(agentA)} {
		md := round("netpulse", "agent-a", "uid-a", "node-a", true)
		out, rejected := b.bind(ctx, md)
		assert.Empty(t, rejected, name)
		assert.Equal(t, md, out, "%s: passed through as is, not copied", name)
	}
}

func TestBindRejectsAnotherIdentity(t *testing.T) {
	for name, md := range map[string]pmetric.Metrics{
		"another pod":                  round("netpulse", "agent-b", "uid-b", "node-b", false),
		"another pod on the same node": round("netpulse", "victim", "uid-v", "node-a", false),
		"own name, another UID":        round("netpulse", "agent-a", "uid-old", "node-a", false),
		"own pod, another node":        round("netpulse", "agent-a", "uid-a", "node-b", false),
		"own pod, no node":             round("netpulse", "agent-a", "uid-a", "", false),
		"another namespace":            round("kube-system", "agent-a", "uid-a", "node-a", false),
	} {
		b := newBinder(zap.NewNop())
		before := pmetric.NewMetrics()
		md.CopyTo(before)
		out, rejected := b.bind(viaAuth(agentA), md)
		assert.Equal(t, map[string]int{skipSourceMismatch: len(peers) * pointsPerTarget}, rejected, name)
		assert.Equal(t, 0, out.ResourceMetrics().Len(), name)
		assert.Equal(t, before, md, "%s: the input is shared with other pipelines and never modified", name)
	}
}

// A request mixing the caller's own Resource with another's keeps the caller's only.
func TestBindMixed(t *testing.T) {
	md := round("netpulse", "agent-a", "uid-a", "node-a", true)
	round("netpulse", "agent-b", "uid-b", "node-b", false).ResourceMetrics().At(0).CopyTo(md.ResourceMetrics().AppendEmpty())
	// A Resource without a source is left for the decoder (counted as missing_source).
	orphan := md.ResourceMetrics().AppendEmpty()
	md.ResourceMetrics().At(0).ScopeMetrics().CopyTo(orphan.ScopeMetrics())

	out, rejected := newBinder(zap.NewNop()).bind(viaMetadata(agentA), md)
	assert.Equal(t, map[string]int{skipSourceMismatch: len(peers) * pointsPerTarget}, rejected)
	require.Equal(t, 2, out.ResourceMetrics().Len())
	pod, _ := out.ResourceMetrics().At(0).Resource().Attributes().Get("k8s.pod.name")
	assert.Equal(t, "agent-a", pod.Str())
	assert.Equal(t, 0, out.ResourceMetrics().At(1).Resource().Attributes().Len())
	assert.Equal(t, 3, md.ResourceMetrics().Len(), "input untouched")
}

func TestBindWithoutIdentity(t *testing.T) {
	forged := client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{
		// Two values for a key is not an identity (the extension writes exactly one).
		identity.MetadataNamespace: {"netpulse"}, identity.MetadataServiceAccount: {"netpulse-agent"},
		identity.MetadataPodName: {"agent-a"}, identity.MetadataPodUID: {"uid-a", "uid-b"}, identity.MetadataNodeName: {"node-a"},
	})})
	for name, ctx := range map[string]context.Context{
		"no client info": context.Background(),
		"plain metadata": client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{"x-agent": {"agent-a"}})}),
		"ambiguous":      forged,
		"incomplete":     viaAuth(identity.Identity{Namespace: "netpulse", PodName: "agent-a", PodUID: "uid-a"}),
	} {
		out, rejected := newBinder(zap.NewNop()).bind(ctx, round("netpulse", "agent-a", "uid-a", "node-a", true))
		assert.Equal(t, map[string]int{skipUnauthenticatedSource: len(peers) * pointsPerTarget}, rejected, name)
		assert.Equal(t, 0, out.ResourceMetrics().Len(), name)
	}
	// Nothing of pod_probe's in it: nothing to count.
	md := pmetric.NewMetrics()
	md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("other")
	_, rejected := newBinder(zap.NewNop()).bind(context.Background(), md)
	assert.Empty(t, rejected)
}

// A compromised or misconfigured agent sends every round: the log is rate-limited and
// says how much it left out.
func TestBindLogIsRateLimited(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	b := newBinder(zap.New(core))
	for range 100 {
		b.bind(viaAuth(agentA), round("netpulse", "agent-b", "uid-b", "node-b", false))
	}
	require.Equal(t, 2, logs.Len(), "burst of 2, then one per %v", bindLogEvery)
	e := logs.All()[0]
	assert.Equal(t, zap.WarnLevel, e.Level)
	assert.Equal(t, "netpulse/agent-a(uid-a)@node-a", e.ContextMap()["authenticated"])
	assert.Equal(t, "netpulse/agent-b(uid-b)@node-b", e.ContextMap()["claimed"])
	// When the next line is due, it says how many were left out.
	b.log.SetEvery(0)
	b.bind(viaAuth(agentA), round("netpulse", "agent-b", "uid-b", "node-b", false))
	require.Equal(t, 3, logs.Len())
	assert.EqualValues(t, 98, logs.All()[2].ContextMap()["suppressed_since_last"])
}

// Through consume: rejected points are counted under their reason and reach neither the
// summaries nor the engine; the caller's own reach them. Without binding nothing changes.
func TestConsumeBindsObservations(t *testing.T) {
	for _, bind := range []bool{true, false} {
		cfg := createDefaultConfig().(*Config)
		cfg.RequireAuthenticatedObservers = bind
		tt := componenttest.NewTelemetry()
		set := exportertest.NewNopSettings(metadata.Type)
		set.TelemetrySettings = tt.NewTelemetrySettings()
		e, err := newExporter(cfg, set)
		require.NoError(t, err)
		ctx := viaAuth(agentA)
		require.NoError(t, e.consume(ctx, round("netpulse", "victim", "uid-v", "node-v", false)))
		require.NoError(t, e.consume(context.Background(), round("netpulse", "agent-a", "uid-a", "node-a", false)))
		require.NoError(t, e.consume(ctx, round("netpulse", "agent-a", "uid-a", "node-a", true)))

		skipped := map[string]int64{}
		if m, err := tt.GetMetric("otelcol_pod_network_health_datapoints_skipped"); err == nil {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value(attribute.Key("reason"))
				skipped[v.AsString()] += dp.Value
			}
		}
		obs := e.engine.Observers()
		if bind {
			assert.Equal(t, map[string]int64{skipSourceMismatch: 10, skipUnauthenticatedSource: 10}, skipped)
			require.Len(t, obs, 1, "only the authenticated agent observed")
			assert.Equal(t, "agent-a", obs[0].Name)
			assert.Equal(t, "node-a", obs[0].Node)
			assert.Equal(t, 2, e.engine.Stats().Pairs)
		} else {
			assert.Empty(t, skipped)
			assert.Len(t, obs, 2)
			assert.Equal(t, 4, e.engine.Stats().Pairs)
		}
		require.NoError(t, e.shutdown(context.Background()))
		require.NoError(t, tt.Shutdown(context.Background()))
	}
}
