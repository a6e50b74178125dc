// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package icmpengine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/netpulse/netpulse/testbed/netnstest"
)

// TestPathMTUProbes: with DontFragment, an echo larger than the path's MTU never arrives
// (black hole) or is answered by the router with packet-too-big (path-MTU discovery
// works); an echo that fits passes either way; an echo larger than the source's own
// interface fails at once.
func TestPathMTUProbes(t *testing.T) {
	targets := []string{netnstest.MTUPathTarget4, netnstest.MTUPathTarget6}
	t.Run("black hole", func(t *testing.T) {
		src := netnstest.MTUPath(t, true)
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
		src := netnstest.MTUPath(t, false)
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
