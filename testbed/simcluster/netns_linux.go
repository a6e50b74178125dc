// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package simcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetns runs fn with the calling goroutine locked to its OS thread and that thread in the
// named network namespace (/run/netns/<name>); the thread then returns to the original
// namespace and is unlocked. Sockets opened in fn stay in the namespace.
//
// The thread must survive: child processes get Pdeathsig, which fires when the *thread*
// that forked them exits, and any thread may have forked one (kubetest's etcd and
// kube-apiserver included). Only when the original namespace cannot be restored is the
// thread left locked, so that the runtime discards it rather than reuse it in the wrong
// namespace. Child processes of this package are forked from a dedicated thread (spawn).
func inNetns(name string, fn func() error) (err error) {
	target, err := os.Open(filepath.Join("/run/netns", name))
	if err != nil {
		return fmt.Errorf("simcluster: open netns %s: %w", name, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("simcluster: open own netns: %w", err)
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("simcluster: setns %s: %w", name, err)
	}
	defer func() {
		if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
			// Stay locked: the goroutine's exit destroys the thread.
			err = fmt.Errorf("simcluster: cannot leave netns %s: %w", name, rerr)
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}
