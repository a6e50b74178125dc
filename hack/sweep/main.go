// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command sweep removes what crashed or interrupted test runs left on this host: real-node
// runs (cgroups and their processes, mounts, /var/lib/netpulse-realnodes, pod network
// namespaces), simulated clusters of any prefix whose bridge still holds the address plan,
// and kube-apiserver/etcd directories under /dev/shm and the temp dir that no live process
// uses. A machine restored from a snapshot keeps links, namespaces and files but not the
// processes that owned them, so every later cluster start would fail on them.
//
// It takes the host-wide cluster lock without waiting; when a cluster is running it
// sweeps nothing and says so (exit 0): a live run is not a leftover. `make sweep` runs it;
// `.ci/run` runs it before the tests. Needs root.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/realcluster"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		os.Exit(1)
	}
}

func run() error {
	logf := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	lock, err := simcluster.TryLockHost()
	if err != nil {
		logf("sweep: %v", err)
		return nil
	}
	defer lock.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	if err := realcluster.Sweep(ctx, logf); err != nil {
		errs = append(errs, err)
	}
	if err := simcluster.Sweep(ctx, simcluster.DefaultPrefix, logf); err != nil {
		errs = append(errs, err)
	}
	if err := simcluster.ClearAddressPlan(ctx, logf); err != nil {
		errs = append(errs, err)
	}
	n, err := kubetest.SweepOrphanDirs(logf)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	logf("sweep: done (%d orphaned control-plane directories removed)", n)
	return nil
}
