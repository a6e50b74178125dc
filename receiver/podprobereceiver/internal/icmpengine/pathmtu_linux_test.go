// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package icmpengine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/netpulse/netpulse/internal/netnstest"
)

// mtuPath builds source -- router -- target, the router's link to the target at MTU
// 1400 while the source's link is 1500; blackHole drops the router's fragmentation-needed
// and packet-too-big messages, as a misconfigured overlay or firewall does.
func mtuPath(t *testing.T, blackHole bool) *netnstest.NS {
	t.Helper()
	src := newNS(t)
	router := netnstest.New(t,
		netnstest.WithSysctl("net.ipv4.ip_forward", "1"),
		netnstest.WithSysctl("net.ipv6.conf.all.forwarding", "1"),
		netnstest.WithSysctl("net.ipv4.icmp_ratelimit", "0"),
		netnstest.WithSysctl("net.ipv6.icmp.ratelimit", "0"))
	dst := netnstest.New(t)
	run(t, src, "ip", "link", "add", "veth-s", "type", "veth", "peer", "name", "veth-rs", "netns", router.Path())
	run(t, router, "ip", "link", "add", "veth-rd", "mtu", "1400", "type", "veth", "peer", "name", "veth-d", "netns", dst.Path())
	run(t, dst, "ip", "link", "set", "veth-d", "mtu", "1400")
	for _, c := range [][]string{
		{"addr", "add", "10.98.1.1/24", "dev", "veth-s"}, {"-6", "addr", "add", "fd00:98:1::1/64", "dev", "veth-s", "nodad"},
		{"link", "set", "veth-s", "up"},
		{"route", "add", "default", "via", "10.98.1.2"}, {"-6", "route", "add", "default", "via", "fd00:98:1::2"},
	} {
		run(t, src, "ip", c...)
	}
	for _, c := range [][]string{
		{"addr", "add", "10.98.1.2/24", "dev", "veth-rs"}, {"-6", "addr", "add", "fd00:98:1::2/64", "dev", "veth-rs", "nodad"},
		{"addr", "add", "10.98.2.2/24", "dev", "veth-rd"}, {"-6", "addr", "add", "fd00:98:2::2/64", "dev", "veth-rd", "nodad"},
		{"link", "set", "veth-rs", "up"}, {"link", "set", "veth-rd", "up"},
	} {
		run(t, router, "ip", c...)
	}
	// Forwarding after the links exist, so that it covers them.
	if err := router.SetSysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"addr", "add", "10.98.2.1/24", "dev", "veth-d"}, {"-6", "addr", "add", "fd00:98:2::1/64", "dev", "veth-d", "nodad"},
		{"link", "set", "veth-d", "up"},
		{"route", "add", "default", "via", "10.98.2.2"}, {"-6", "route", "add", "default", "via", "fd00:98:2::2"},
	} {
		run(t, dst, "ip", c...)
	}
	if blackHole {
		run(t, router, "nft", "add table inet pmtu; add chain inet pmtu out { type filter hook output priority 0; };"+
			" add rule inet pmtu out icmp type destination-unreachable icmp code frag-needed drop;"+
			" add rule inet pmtu out icmpv6 type packet-too-big drop")
	}
	return src
}

// TestPathMTUProbes: with DontFragment, an echo larger than the path's MTU never arrives
// (black hole) or is answered by the router with packet-too-big (path-MTU discovery
// works); an echo that fits passes either way; an echo larger than the source's own
// interface fails at once.
func TestPathMTUProbes(t *testing.T) {
	targets := []string{"10.98.2.1", "fd00:98:2::1"}
	t.Run("black hole", func(t *testing.T) {
		src := mtuPath(t, true)
		for _, mode := range []Mode{ModeUnprivileged, ModePrivileged} {
			e := startEngine(t, src, Config{Mode: mode, DontFragment: true})
			waitReachable(t, e, targets)
			for _, target := range targets {
				addr := mustAddr(target)
				small, err := e.Ping(context.Background(), addr, 2, 10*time.Millisecond, time.Second)
				if err != nil || small.Received != 2 {
					t.Fatalf("%s: small echoes: %+v %v", target, small, err)
				}
				res, err := submit(e, Request{Addr: addr, Count: 2, Interval: 10 * time.Millisecond, Timeout: 500 * time.Millisecond, Size: 1400})
				if err != nil || res.Received != 2 {
					t.Fatalf("%s: 1400-byte echoes (the path's MTU): %+v %v", target, res, err)
				}
				res, err = submit(e, Request{Addr: addr, Count: 2, Interval: 10 * time.Millisecond, Timeout: 500 * time.Millisecond, Size: 1500})
				if !errors.Is(err, ErrTimeout) || res.Received != 0 {
					t.Fatalf("%s %s: 1500-byte echoes through the black hole: %+v %v, want a timeout", mode, target, res, err)
				}
			}
		}
	})
	t.Run("path-MTU discovery works", func(t *testing.T) {
		src := mtuPath(t, false)
		e := startEngine(t, src, Config{Mode: ModeUnprivileged, DontFragment: true})
		waitReachable(t, e, targets)
		for _, target := range targets {
			res, err := submit(e, Request{Addr: mustAddr(target), Count: 1, Timeout: time.Second, Size: 1500})
			var pe *ProbeError
			if !errors.As(err, &pe) || pe.Kind != KindPacketTooBig || !pe.From.IsValid() || res.Received != 0 {
				t.Fatalf("%s: 1500-byte echo: %+v %v, want packet-too-big from the router", target, res, err)
			}
		}
		big, err := submit(e, Request{Addr: mustAddr(targets[0]), Count: 1, Timeout: time.Second, Size: 1600})
		var pe *ProbeError
		if !errors.As(err, &pe) || pe.Kind != KindPacketTooBig || pe.From.IsValid() || big.Received != 0 {
			t.Fatalf("an echo above the source's interface MTU: %+v %v, want a local packet-too-big", big, err)
		}
	})
}

// waitReachable waits until small echoes pass (IPv6 routes through the router once the
// link-local addresses finished duplicate address detection, about 2 s).
func waitReachable(t *testing.T, e *Engine, targets []string) {
	t.Helper()
	for _, target := range targets {
		deadline := time.Now().Add(10 * time.Second)
		for {
			res, err := e.Ping(context.Background(), mustAddr(target), 1, 0, 200*time.Millisecond)
			if err == nil && res.Received == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never answered small echoes: %+v %v", target, res, err)
			}
		}
	}
}

// submit runs one round and waits for it.
func submit(e *Engine, req Request) (Result, error) {
	type done struct {
		res Result
		err error
	}
	ch := make(chan done, 1)
	if err := e.Submit(context.Background(), req, func(r Result, err error) { ch <- done{r, err} }); err != nil {
		return Result{}, err
	}
	d := <-ch
	return d.res, d.err
}

func TestRequestSizeValidation(t *testing.T) {
	for _, tc := range []struct {
		addr string
		size int
		ok   bool
	}{
		{"10.0.0.1", 0, true}, {"10.0.0.1", 1500, true}, {"10.0.0.1", 20 + 8 + 15, false},
		{"fd00::1", 40 + 8 + 16, true}, {"fd00::1", 40 + 8 + 15, false}, {"10.0.0.1", 70000, false},
	} {
		err := validateRequest(Request{Addr: mustAddr(tc.addr), Count: 1, Timeout: time.Second, Size: tc.size})
		if (err == nil) != tc.ok {
			t.Errorf("%s size %d: %v", tc.addr, tc.size, err)
		}
	}
}
