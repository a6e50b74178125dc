// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

// TestHealthyMesh lives in its own file so that it runs first (go test runs files in name
// order): it asserts a zero loss ratio, which the faults of later scenarios would leave in
// the 5-minute window. The takeover scenarios (mesh_takeover_test.go) run next, on a
// cluster no pod roll or API restart has disturbed yet, then scenarios_test.go.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netpulse/netpulse/testbed/simcluster"
)

// TestHealthyMesh: for every ordered pair of agents the gateway wrote a PodNetworkHealth
// object in namespace netpulse, named by ObjectName, owned by the source pod, Reachable,
// with a sub-millisecond RTT p50 and lossRatio "0"; `kubectl get pnh` lists them.
func TestHealthyMesh(t *testing.T) {
	e := requireMesh(t)
	exp := e.healthy("healthy-mesh", e.agentsStarted, pathExpect{maxP50: healthyRTT, zeroLoss: true})
	// Detection here is the full mesh of objects, counted from the start of the agents. The
	// test runs after the scenarios of files named before it (TestFlappingLink among them),
	// and the loss a scenario left in a pair's window is rewritten as 0 only when the
	// write-on-change policy next writes that pair's loss (at most once a minute, after a
	// gateway restart's takeover grace): 3 minutes, not the first convergence's 1 (a
	// clean-clone run saw node-3's pairs still at the flap's 0.39 after 60 s).
	e.await(t, "detect", exp, 3*time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	objs, err := e.api.objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(exp.agents) * (len(exp.agents) - 1); len(objs) != want {
		t.Errorf("%d PodNetworkHealth objects, want %d (one per ordered pair)", len(objs), want)
	}
	for _, o := range objs {
		if o.Status.Latency != nil {
			t.Logf("%s: %s, p50 %s p90 %s p99 %s max %s, loss %s, observed from %s", o.Name, o.Status.Reachability,
				o.Status.Latency.P50, o.Status.Latency.P90, o.Status.Latency.P99, o.Status.Latency.Max, o.Status.LossRatio, o.Status.ObservedFromNode)
		}
		break
	}

	kubectl := filepath.Join("..", "..", "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Logf("kubectl not built (%v): skipping `kubectl get pnh`", err)
		return
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", e.cl.AdminKubeconfig, "get", "pnh", "-n", simcluster.Namespace).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get pnh: %v\n%s", err, out)
	}
	t.Logf("kubectl get pnh -n %s:\n%s", simcluster.Namespace, out)
	if lines := strings.Count(strings.TrimSpace(string(out)), "\n"); lines != len(objs) {
		t.Errorf("kubectl get pnh listed %d objects, want %d", lines, len(objs))
	}
}
