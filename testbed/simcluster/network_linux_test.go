// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package simcluster

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/testbed/netnstest"
)

// TestNetworkFaults builds the network of a 3-node cluster (no control plane) and checks
// the faults with iputils ping from inside the namespaces: reachability over IPv4 and
// IPv6, Delay (the userspace echo responder, also from a later pod generation's address),
// DelayFrom (from one peer only),
// Partition, Loss and Heal.
func TestNetworkFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("creates network namespaces")
	}
	netnstest.RequireRoot(t)
	// The lock first, on its own clock: `go test ./...` runs this package beside the e2e
	// package, whose cluster holds the lock for its whole pass (over 10 minutes).
	lockCtx, cancelLock := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancelLock()
	lock, err := acquireLock(lockCtx, 40*time.Minute, t.Logf)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := &Cluster{opts: Options{Nodes: 3, Zones: 2, Prefix: "np"}, logf: t.Logf, lock: lock, byName: map[string]*nodeState{}, RunID: "0000aa"}
	t.Cleanup(func() { require.NoError(t, c.Stop()) })
	require.NoError(t, sweep(ctx, "np", t.Logf))
	require.NoError(t, clearAddressPlan(ctx, t.Logf))
	require.NoError(t, c.setupNetwork(ctx))
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]

	reach := func(from *nodeState, to netip.Addr) (time.Duration, bool) {
		return ping(t, from.Netns, to)
	}
	fast := func(from *nodeState, to netip.Addr) {
		t.Helper()
		rtt, ok := reach(from, to)
		require.True(t, ok, "%s -> %s unreachable", from.Name, to)
		require.Less(t, rtt, 10*time.Millisecond, "%s -> %s", from.Name, to)
	}
	unreachable := func(from *nodeState, to netip.Addr) {
		t.Helper()
		_, ok := reach(from, to)
		require.False(t, ok, "%s -> %s reachable", from.Name, to)
	}
	for _, to := range []netip.Addr{n2.IPv4, n2.IPv6, HostIPv4, HostIPv6} {
		fast(n1, to)
	}

	// Delay: both families, and answered from the address that was asked.
	require.NoError(t, c.Delay(n2.Name, 30*time.Millisecond))
	v4, v6 := podIPv4(n2.Index, 1), podIPv6(n2.Index, 1)
	require.NoError(t, addPodAddrs(ctx, n2.Netns, v4, v6))
	for _, to := range []netip.Addr{n2.IPv4, n2.IPv6, v4, v6} {
		rtt, ok := reach(n1, to)
		require.True(t, ok, "delayed %s unreachable", to)
		require.GreaterOrEqual(t, rtt, 30*time.Millisecond, "RTT to delayed %s", to)
	}
	fast(n1, n3.IPv4)
	fast(n2, n3.IPv6) // the delayed node's own probes are not delayed
	require.NoError(t, c.Heal(n2.Name))
	fast(n1, n2.IPv4)
	fast(n1, v6)
	require.NoError(t, delPodAddrs(ctx, n2.Netns, v4, v6))

	// DelayFrom: only n1's requests wait (a slow link between two nodes); n3's are answered
	// at once by the same responder.
	require.NoError(t, c.DelayFrom(n2.Name, 30*time.Millisecond, []netip.Addr{n1.IPv4, n1.IPv6}))
	for _, to := range []netip.Addr{n2.IPv4, n2.IPv6} {
		rtt, ok := reach(n1, to)
		require.True(t, ok, "delayed %s unreachable", to)
		require.GreaterOrEqual(t, rtt, 30*time.Millisecond, "RTT from n1 to %s", to)
		fast(n3, to)
	}
	require.NoError(t, c.Heal(n2.Name))
	fast(n1, n2.IPv4)

	// DelayInput: everything n2 receives from the nodes waits in the kernel's queue, ICMP and
	// TCP alike, the answers to its own connections too; the host side does not wait. (The
	// answers to its own echoes wait as well, but ping's RTT, like the agent's, is taken
	// from the kernel's receive timestamp, which is set before netfilter sees the packet.)
	require.NoError(t, c.DelayInput(n2.Name, 30*time.Millisecond))
	for _, to := range []netip.Addr{n2.IPv4, n2.IPv6} {
		rtt, ok := reach(n1, to)
		require.True(t, ok, "input-delayed %s unreachable", to)
		require.GreaterOrEqual(t, rtt, 30*time.Millisecond, "RTT to input-delayed %s", to)
	}
	fast(n2, HostIPv4)
	fast(n1, n3.IPv4)
	require.GreaterOrEqual(t, tcpConnect(t, n1, n2, n2.IPv4), 30*time.Millisecond, "a TCP connect to the delayed node")
	require.GreaterOrEqual(t, tcpConnect(t, n2, n3, n3.IPv6), 30*time.Millisecond, "the delayed node's own TCP connect (its SYN-ACK waits)")
	f, err := c.Faults(n2.Name)
	require.NoError(t, err)
	require.Equal(t, 30*time.Millisecond, f.InputDelay)
	require.NoError(t, c.DelayInput(n2.Name, 0))
	fast(n1, n2.IPv4)
	require.Less(t, tcpConnect(t, n1, n2, n2.IPv4), 30*time.Millisecond, "healed")
	// DelayAnswers: n2 answers late; its own connections are not slowed.
	require.NoError(t, c.DelayAnswers(n2.Name, 30*time.Millisecond))
	rtt, ok := reach(n1, n2.IPv6)
	require.True(t, ok)
	require.GreaterOrEqual(t, rtt, 30*time.Millisecond, "RTT to the late-answering node")
	require.GreaterOrEqual(t, tcpConnect(t, n3, n2, n2.IPv6), 30*time.Millisecond, "a TCP connect to the late-answering node")
	require.Less(t, tcpConnect(t, n2, n3, n3.IPv4), 30*time.Millisecond, "the late-answering node's own TCP connect")
	fast(n2, n3.IPv6)
	require.NoError(t, c.Heal(n2.Name))
	fast(n1, n2.IPv6)

	// Partition: n2 is cut off from the other nodes, not from the host side.
	require.NoError(t, c.Partition(n2.Name))
	unreachable(n1, n2.IPv4)
	unreachable(n1, n2.IPv6)
	unreachable(n2, n3.IPv4)
	fast(n2, HostIPv4)
	fast(n2, HostIPv6)
	fast(n1, n3.IPv6)
	require.NoError(t, c.Heal(n2.Name))
	fast(n1, n2.IPv6)

	// Loss: 100% of what n2 receives from the nodes.
	require.NoError(t, c.Loss(n2.Name, 100))
	unreachable(n1, n2.IPv4)
	fast(n2, HostIPv4)
	require.NoError(t, c.Loss(n2.Name, 0))
	fast(n1, n2.IPv4)
	f, err = c.Faults(n2.Name)
	require.NoError(t, err)
	require.Equal(t, Faults{}, f)
}

// tcpConnect connects from from's namespace to a listener at addr in to's namespace and
// returns how long the connect took.
func tcpConnect(t *testing.T, from, to *nodeState, addr netip.Addr) time.Duration {
	t.Helper()
	var ln net.Listener
	require.NoError(t, inNetns(to.Netns, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	}))
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	var took time.Duration
	require.NoError(t, inNetns(from.Netns, func() error {
		start := time.Now()
		conn, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		took = time.Since(start)
		if err == nil {
			_ = conn.Close()
		}
		return err
	}))
	return took
}

var rttRE = regexp.MustCompile(`= [0-9.]+/([0-9.]+)/`)

// ping sends 2 echoes from inside netns to addr and returns the average RTT.
func ping(t *testing.T, netns string, addr netip.Addr) (time.Duration, bool) {
	t.Helper()
	family := "-4"
	if addr.Is6() {
		family = "-6"
	}
	out, err := exec.Command("ip", "netns", "exec", netns, "ping", family, "-n", "-q", "-c", "2", "-i", "0.2", "-W", "1", addr.String()).CombinedOutput()
	if err != nil {
		return 0, false
	}
	m := rttRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("cannot parse ping output:\n%s", out)
	}
	ms, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err, string(out))
	return time.Duration(ms * float64(time.Millisecond)), true
}

// TestClearAddressPlanSweepsOtherPrefixes: a crashed run of another prefix (here "npq",
// as the real-node cluster's "npr" once was on a CI machine restored from a snapshot)
// still holds the plan's addresses; a start sweeps it instead of failing, and leaves alone
// an interface that is not a run's.
func TestClearAddressPlanSweepsOtherPrefixes(t *testing.T) {
	if testing.Short() {
		t.Skip("creates network namespaces")
	}
	netnstest.RequireRoot(t)
	lockCtx, cancelLock := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancelLock()
	lock, err := acquireLock(lockCtx, 40*time.Minute, t.Logf)
	require.NoError(t, err)
	defer lock.release()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, clearAddressPlan(ctx, t.Logf))

	br, netns, veth := bridgeName("npq", "0000bb"), netnsName("npq", "0000bb", 1), hostVethName("npq", "0000bb", 1)
	t.Cleanup(func() { _ = sweep(context.Background(), "npq", t.Logf) })
	require.NoError(t, createBridge(ctx, br))
	require.NoError(t, createNodeNetns(ctx, netns, br, veth, nodeIPv4(1), nodeIPv6(1)))
	require.Error(t, checkAddressesFree(), "the leftover bridge holds the plan")

	require.NoError(t, clearAddressPlan(ctx, t.Logf))
	require.True(t, linkGone(br), "bridge %s swept", br)
	require.True(t, linkGone(veth), "veth %s swept", veth)
	_, err = os.Stat(filepath.Join("/run/netns", netns))
	require.True(t, os.IsNotExist(err), "netns %s swept", netns)

	// Not a run's name: reported, never deleted.
	other := "npplan-other"
	require.NoError(t, exec.Command("ip", "link", "add", other, "type", "bridge").Run())
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", other).Run() })
	require.NoError(t, exec.Command("ip", "addr", "add", HostIPv4.String()+"/24", "dev", other).Run())
	err = clearAddressPlan(ctx, t.Logf)
	require.ErrorContains(t, err, other)
	require.False(t, linkGone(other))
}
