// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"net/netip"
	"os/exec"
	"time"
)

// What the real-node cluster (testbed/realcluster) shares with this package: the address
// plan, the host-wide lock (both use the same bridge addresses, so only one of them runs
// on a host at a time), the sweep of leftovers, and the node network namespaces. Real
// nodes put a kubelet, a container runtime and kube-proxy where simulated nodes put the
// harness's stand-ins.

// HostLock is the host-wide lock every cluster of this address plan holds while it runs.
type HostLock struct{ l *hostLock }

// LockHost waits up to timeout for the host-wide lock.
func LockHost(ctx context.Context, timeout time.Duration, logf func(string, ...any)) (*HostLock, error) {
	l, err := acquireLock(ctx, timeout, logf)
	if err != nil {
		return nil, err
	}
	return &HostLock{l: l}, nil
}

// TryLockHost takes the host-wide lock without waiting; it fails, naming the holder, while
// a cluster runs.
func TryLockHost() (*HostLock, error) {
	l, err := tryLock()
	if err != nil {
		return nil, err
	}
	return &HostLock{l: l}, nil
}

// DefaultPrefix names a simulated cluster's namespaces and links unless Options.Prefix does.
const DefaultPrefix = "np"

// Release releases the lock; safe to call more than once.
func (h *HostLock) Release() {
	if h != nil {
		h.l.release()
	}
}

// Sweep removes what crashed runs with this name prefix left behind (see SweepLeftovers);
// the caller holds the host lock.
func Sweep(ctx context.Context, prefix string, logf func(string, ...any)) error {
	return sweep(ctx, prefix, logf)
}

// ClearAddressPlan sweeps the crashed runs (any prefix) whose bridges hold the plan's
// addresses, then fails if anything else holds them; the caller holds the host lock.
func ClearAddressPlan(ctx context.Context, logf func(string, ...any)) error {
	return clearAddressPlan(ctx, logf)
}

// CreateBridge creates a bridge named br holding HostIPv4 and HostIPv6.
func CreateBridge(ctx context.Context, br string) error { return createBridge(ctx, br) }

// CreateNodeNetns creates a node's network namespace with eth0 (v4/24, v6/64) in bridge br.
func CreateNodeNetns(ctx context.Context, netns, br, hostVeth string, v4, v6 netip.Addr) error {
	return createNodeNetns(ctx, netns, br, hostVeth, v4, v6)
}

// DeleteNetns kills what runs in a namespace and deletes it.
func DeleteNetns(ctx context.Context, netns string) error { return deleteNetns(ctx, netns) }

// InNetns runs fn on a thread inside the named network namespace.
func InNetns(name string, fn func() error) error { return inNetns(name, fn) }

// NetnsName, BridgeName and HostVethName are the names a run with this prefix and run ID
// gives its node namespaces, its bridge and the host ends of the nodes' veths; Sweep
// recognises them.
func NetnsName(prefix, runID string, i int) string    { return netnsName(prefix, runID, i) }
func BridgeName(prefix, runID string) string          { return bridgeName(prefix, runID) }
func HostVethName(prefix, runID string, i int) string { return hostVethName(prefix, runID, i) }

// NodeIPv4 and NodeIPv6 are node i's addresses (1-based).
func NodeIPv4(i int) netip.Addr { return nodeIPv4(i) }
func NodeIPv6(i int) netip.Addr { return nodeIPv6(i) }

// Spawn starts cmd from the package's spawner thread, which never exits, so that the
// child's Pdeathsig fires only when the harness process dies (childproc.Options.Spawn).
func Spawn(cmd *exec.Cmd) error { return spawn(cmd) }
