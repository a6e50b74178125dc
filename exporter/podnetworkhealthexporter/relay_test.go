// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/probetest"
	"github.com/netpulse/netpulse/internal/identity"
)

// ownerShard is an OTLP server in front of one shard's exporter: what arrives is consumed
// as from the relay's authenticated identity (the receiver and k8s_token_auth do that in
// the gateway).
type ownerShard struct {
	pmetricotlp.UnimplementedGRPCServer
	e     *pnhExporter
	as    identity.Identity
	mu    sync.Mutex
	calls int
}

func (o *ownerShard) Export(ctx context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	o.mu.Lock()
	o.calls++
	o.mu.Unlock()
	return pmetricotlp.NewExportResponse(), o.e.consume(client.NewContext(ctx, client.Info{Auth: identity.NewAuthData(o.as)}), req.Metrics())
}

// One connection per agent: an agent sends its round to shard 0, which judges its own
// target and forwards the other target's points and the heartbeat to shard 1 over a real
// gRPC connection; shard 1 believes them as the agent's (the relay vouches for it), judges
// its target and hears the agent. Shard 1 forwards nothing again, and a relay's vouching
// for another pod than the Resource names is refused there.
func TestRelayForwardsToTheOwnerAsTheAgent(t *testing.T) {
	const count = 2
	newShard := func(index int, relay bool, endpoints ...string) *pnhExporter {
		cfg := createDefaultConfig().(*Config)
		cfg.LeaderElection.Enabled = false
		cfg.Shard = ShardConfig{Count: count, Index: index}
		cfg.RequireAuthenticatedObservers = true
		if relay {
			cfg.Relay.Enabled = true
			cc := configgrpc.NewDefaultClientConfig()
			cc.TLS = configtls.ClientConfig{Insecure: true}
			cfg.Relay.Client = cc
			cfg.Relay.Endpoints = endpoints
			require.NoError(t, cfg.Validate())
		}
		e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
		require.NoError(t, err)
		return e
	}
	owner := newShard(1, false)
	relayID := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-gateway", PodName: "gw-0", PodUID: "uid-gw", NodeName: "node-g", Role: identity.RoleRelay}
	srv := &ownerShard{e: owner, as: relayID}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	pmetricotlp.RegisterGRPCServer(g, srv)
	go func() { _ = g.Serve(l) }()
	defer g.Stop()
	ingress := newShard(0, true, "127.0.0.1:1", l.Addr().String()) // its own is never dialled
	require.NoError(t, ingress.relay.Start(context.Background(), componenttest.NewNopHost(), componenttest.NewNopTelemetrySettings()))
	defer func() { require.NoError(t, ingress.relay.Shutdown(context.Background())) }()

	mine := nodeOwnedBy(t, 0, count, nil)
	theirs := nodeOwnedBy(t, 1, count, nil)
	agentNode := nodeOwnedBy(t, 0, count, map[string]bool{mine: true})
	agent := probetest.NewAgent("netpulse", "agent-a", "uid-a", agentNode, "10.0.0.1")
	agentID := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-a", PodUID: "uid-a", NodeName: agentNode, Role: identity.RoleAgent}
	asAgent := client.NewContext(context.Background(), client.Info{Auth: identity.NewAuthData(agentID)})
	targets := []probetest.Target{
		{NS: "netpulse", Pod: "agent-m", UID: "uid-m", Node: mine, IP: "10.0.0.2"},
		{NS: "netpulse", Pod: "agent-t", UID: "uid-t", Node: theirs, IP: "10.0.0.3"},
	}
	ok := []probetest.Outcome{{OK: true, RTT: time.Millisecond}, {OK: true, RTT: time.Millisecond}}
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	var last time.Time
	for r := range 4 {
		last = start.Add(time.Duration(r) * 5 * time.Second)
		md := agent.Round(last, targets, ok)
		agent.Heartbeat(md, last, int64(r+1))
		require.NoError(t, ingress.consume(asAgent, md))
	}
	require.Eventually(t, func() bool {
		obs := owner.engine.Observers()
		return len(obs) == 1 && obs[0].LastSeen.Equal(last) && owner.engine.Stats().Targets == 1
	}, 10*time.Second, 20*time.Millisecond, "shard 1 judges its target from the relayed points and hears the agent")
	obs := owner.engine.Observers()
	assert.Equal(t, "agent-a", obs[0].Name)
	assert.Equal(t, agentNode, obs[0].Node, "the agent's authenticated node, not the relay's")
	assert.Equal(t, 1, ingress.engine.Stats().Targets, "shard 0 judges only its own target")

	// What shard 1 receives is a relay's: nothing is forwarded again (it has no relay here,
	// and the check is the caller's role). A relay vouching for another pod than the one
	// the Resource names is refused.
	srv.mu.Lock()
	calls := srv.calls
	srv.mu.Unlock()
	assert.LessOrEqual(t, calls, 4)
	forged := agent.Round(last.Add(5*time.Second), targets[1:], ok[:1])
	other := agentID
	other.PodName, other.PodUID = "agent-b", "uid-b"
	identity.SetRelayed(forged.ResourceMetrics().At(0).Resource().Attributes(), other)
	before := owner.engine.Observers()[0].LastSeen
	require.NoError(t, owner.consume(client.NewContext(context.Background(), client.Info{Auth: identity.NewAuthData(relayID)}), forged))
	assert.True(t, owner.engine.Observers()[0].LastSeen.Equal(before), "a mismatched relayed identity is not believed")
}

func TestRelayConfigNeedsShardsAndAuthentication(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Relay.Enabled = true
	cfg.RequireAuthenticatedObservers = false
	cfg.Relay.Endpoints = []string{"netpulse-gateway-0:4317", "netpulse-gateway-1:4317"}
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"relay::enabled: needs shard::count above 1", "relay::enabled: needs require_authenticated_observers", "relay::endpoints: 2, want one per shard (shard::count 1)"} {
		assert.Contains(t, err.Error(), want)
	}
}
