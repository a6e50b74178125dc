// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"context"
	"testing"
)

// StartForTest starts a control plane for t and stops it in t.Cleanup, printing the
// components' log tails when the test failed. A missing prerequisite fails the test with
// the reason: a test that needs a real API server never passes by skipping.
func StartForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	cp, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start local control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", cp.Logs(30))
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stop local control plane: %v", err)
		}
	})
	return cp
}
