// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package icmpengine

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/netpulse/netpulse/testbed/netnstest"
)

const openPingGroupRange = "0 2147483647"

// newNS creates a network namespace (lo up) where unprivileged ICMP
// sockets are allowed, plus extra options.
func newNS(t *testing.T, opts ...netnstest.Option) *netnstest.NS {
	t.Helper()
	opts = append([]netnstest.Option{netnstest.WithSysctl("net.ipv4.ping_group_range", openPingGroupRange)}, opts...)
	return netnstest.New(t, opts...)
}

// startEngine creates and starts an engine inside ns and closes it at the
// end of the test.
func startEngine(t *testing.T, ns *netnstest.NS, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	ns.Run(t, func() {
		if err := e.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
	})
	return e
}

// run executes a command inside ns and fails t on error.
func run(t *testing.T, ns *netnstest.NS, name string, args ...string) {
	t.Helper()
	ns.Run(t, func() {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	})
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
