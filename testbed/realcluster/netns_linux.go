// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package realcluster

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// dialLocked runs on a locked thread; it unlocks it only once the thread is back in its
// own namespace (a thread left locked ends with its goroutine).
func dialLocked(path, network, address string, timeout time.Duration) (net.Conn, error) {
	target, err := os.Open(path)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("realcluster: open netns %s: %w", path, err)
	}
	defer target.Close()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("realcluster: open own netns: %w", err)
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("realcluster: setns %s: %w", path, err)
	}
	conn, err := net.DialTimeout(network, address, timeout)
	if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
		if conn != nil {
			_ = conn.Close()
		}
		return nil, fmt.Errorf("realcluster: cannot leave netns %s: %w", path, rerr)
	}
	runtime.UnlockOSThread()
	return conn, err
}
