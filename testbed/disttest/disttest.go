// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package disttest gives tests the otelcol-netpulse binary: the one `make build` produced
// (named by $NETPULSE_COLLECTOR), or a fresh `go build` of ./cmd/otelcol-netpulse.
// Tests run the real distribution as a child process, as users do.
package disttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// EnvCollector names a prebuilt otelcol-netpulse binary.
const EnvCollector = "NETPULSE_COLLECTOR"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildOut  []byte
)

// Collector returns the path of an otelcol-netpulse binary, building it once per test
// binary when $NETPULSE_COLLECTOR is not set.
func Collector(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvCollector); p != "" {
		if !filepath.IsAbs(p) {
			if root, err := kubetest.RepoRoot(); err == nil {
				p = filepath.Join(root, p)
			}
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", EnvCollector, p, err)
		}
		return p
	}
	buildOnce.Do(func() {
		root, err := kubetest.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "otelcol-netpulse-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "otelcol-netpulse")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/otelcol-netpulse")
		cmd.Dir = root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build otelcol-netpulse: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}
