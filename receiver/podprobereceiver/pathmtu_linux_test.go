// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package podprobereceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
	"github.com/netpulse/netpulse/testbed/netnstest"
)

func pathMTUConfig(size int) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Peers.Enabled = false
	cfg.Interval = 400 * time.Millisecond
	cfg.Timeout = 300 * time.Millisecond
	cfg.ICMP.Count = 1
	cfg.ICMP.Mode = ICMPUnprivileged
	cfg.ICMP.PathMTU = PathMTUConfig{Enabled: true, Every: 1, SmallSize: 1280, Count: 2, Size: size}
	cfg.Source = SourceConfig{PodName: "agent-a", PodUID: "uid-a", Namespace: "netpulse", NodeName: "node-a",
		PodIPs: netnstest.MTUPathSource4 + "," + netnstest.MTUPathSource6}
	cfg.Static = []StaticConfig{{Target: netnstest.MTUPathTarget4}, {Target: netnstest.MTUPathTarget6}}
	return cfg
}

// runPathMTU starts the receiver inside ns and returns the newest netpulse.path.mtu point
// per target once both targets have one.
func runPathMTU(t *testing.T, ns *netnstest.NS, cfg *Config) map[string]point {
	t.Helper()
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.MetricsSink)
	rcv, err := NewFactory().CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	ns.Run(t, func() { require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost())) })
	defer func() { require.NoError(t, rcv.Shutdown(context.Background())) }()
	got := map[string]point{}
	// IPv6 routes through the router once duplicate address detection is done (~2 s).
	require.Eventually(t, func() bool {
		for _, p := range flatten(sink.AllMetrics()) {
			if p.metric == contract.MetricPathMTU {
				got[p.attrs[contract.DestinationAddress].(string)] = p
			}
		}
		return len(got) == 2
	}, 20*time.Second, 100*time.Millisecond)
	return got
}

// TestPathMTUBlackHole: the router's link to the target carries 1400 bytes and its
// fragmentation-needed / packet-too-big messages are dropped: the interface-MTU (1500-byte)
// don't-fragment echoes vanish while 1280-byte ones pass: black_hole, 1280 known to pass.
func TestPathMTUBlackHole(t *testing.T) {
	got := runPathMTU(t, netnstest.MTUPath(t, true), pathMTUConfig(0))
	for _, target := range []string{netnstest.MTUPathTarget4, netnstest.MTUPathTarget6} {
		p := got[target]
		require.Equal(t, "black_hole", p.attrs[contract.PathMTUStatus], target)
		require.Equal(t, 1280.0, p.value, target)
		require.Equal(t, true, p.attrs[contract.PairStable], target)
	}
}

// TestPathMTUDiscoveryWorks: the same path with the router's ICMP errors delivered is not a
// black hole (TCP adapts); probing at the path's own MTU passes.
func TestPathMTUDiscoveryWorks(t *testing.T) {
	got := runPathMTU(t, netnstest.MTUPath(t, false), pathMTUConfig(0))
	for _, target := range []string{netnstest.MTUPathTarget4, netnstest.MTUPathTarget6} {
		require.Equal(t, "fragmentation_needed", got[target].attrs[contract.PathMTUStatus], target)
	}
	got = runPathMTU(t, netnstest.MTUPath(t, true), pathMTUConfig(netnstest.MTUPathLinkMTU))
	for _, target := range []string{netnstest.MTUPathTarget4, netnstest.MTUPathTarget6} {
		require.Equal(t, "ok", got[target].attrs[contract.PathMTUStatus], target)
		require.Equal(t, float64(netnstest.MTUPathLinkMTU), got[target].value, target)
	}
}

// TestPathMTUSizeAboveInterface: a configured size the pod's own interface cannot send is
// a configuration error at start, never a false black hole.
func TestPathMTUSizeAboveInterface(t *testing.T) {
	ns := netnstest.MTUPath(t, true)
	cfg := pathMTUConfig(1600)
	require.NoError(t, cfg.Validate())
	rcv, err := NewFactory().CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, new(consumertest.MetricsSink))
	require.NoError(t, err)
	ns.Run(t, func() {
		err := rcv.Start(context.Background(), componenttest.NewNopHost())
		require.ErrorContains(t, err, "icmp::path_mtu::size: 1600 bytes exceeds the MTU 1500")
	})
	require.NoError(t, rcv.Shutdown(context.Background()))
}
