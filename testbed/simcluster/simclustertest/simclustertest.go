// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package simclustertest adapts simcluster to Go tests: a per-test cluster with cleanup and
// failure logs, the privilege check, and the collector binary for TestMain.
package simclustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/netpulse/netpulse/testbed/disttest"
	"github.com/netpulse/netpulse/testbed/netnstest"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// AllowSkipEnv is NETPULSE_ALLOW_SKIP_PRIVILEGED: set to 1, tests that need root skip
// instead of failing.
const AllowSkipEnv = netnstest.AllowSkipEnv

// RequireRoot fails t (or skips it with NETPULSE_ALLOW_SKIP_PRIVILEGED=1) unless root.
func RequireRoot(t testing.TB) {
	t.Helper()
	msg := NotRootMessage()
	if msg == "" {
		return
	}
	if os.Getenv(AllowSkipEnv) == "1" {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

// NotRootMessage explains why a privileged suite cannot run, for TestMain; "" when root.
func NotRootMessage() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return fmt.Sprintf("the simulated cluster needs root (network namespaces, veths, a bridge, nftables); euid is %d. "+
		"Run as root, or set %s=1 to skip", os.Geteuid(), AllowSkipEnv)
}

// Start starts a cluster for t (Logf = t.Logf while the test runs) and stops it in
// t.Cleanup; when t failed it prints the components' log tails and keeps the run
// directory.
func Start(t testing.TB, opts simcluster.Options) *simcluster.Cluster {
	t.Helper()
	RequireRoot(t)
	if opts.Collector == "" {
		opts.Collector = disttest.Collector(t)
	}
	if opts.Logf == nil {
		opts.Logf = SafeLogf(t)
	}
	c, err := simcluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start simulated cluster: %v", err)
	}
	t.Cleanup(func() { StopAndReport(t, c) })
	return c
}

// StopAndReport stops c; when t failed it first logs the component log tails and keeps
// the run directory for inspection.
func StopAndReport(t testing.TB, c *simcluster.Cluster) {
	t.Helper()
	if t.Failed() {
		c.SetKeepDir(true)
		t.Logf("simulated cluster logs (run dir %s):\n%s", c.Dir, c.Logs(40))
	}
	if err := c.Stop(); err != nil {
		t.Errorf("stop simulated cluster: %v", err)
	}
}

// SafeLogf returns a Logf that writes to t while t runs and to stderr after (t.Logf
// panics once the test has finished, and cluster goroutines may log late).
func SafeLogf(t testing.TB) func(string, ...any) {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
			return
		}
		t.Logf(format, args...)
	}
}

// Collector returns the otelcol-netpulse binary (testbed/disttest: $NETPULSE_COLLECTOR or a
// fresh build) outside of a test, e.g. in TestMain.
func Collector() (path string, err error) {
	tb := &mainTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		path = disttest.Collector(tb)
	}()
	<-done
	if tb.failed {
		return "", errors.New(tb.msg)
	}
	return path, nil
}

// mainTB is the sliver of testing.TB that disttest.Collector uses, for TestMain. Fatal
// ends the calling goroutine (as in a test); other methods of the embedded nil TB panic.
type mainTB struct {
	testing.TB
	failed bool
	msg    string
}

func (m *mainTB) Helper()                      {}
func (m *mainTB) Logf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
func (m *mainTB) Errorf(format string, a ...any) {
	m.failed, m.msg = true, fmt.Sprintf(format, a...)
}
func (m *mainTB) Fatalf(format string, a ...any) {
	m.Errorf(format, a...)
	runtime.Goexit()
}
func (m *mainTB) Fatal(a ...any) {
	m.failed, m.msg = true, fmt.Sprint(a...)
	runtime.Goexit()
}
func (m *mainTB) Failed() bool { return m.failed }
