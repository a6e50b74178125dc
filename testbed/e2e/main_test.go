// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2e is netpulse's end-to-end fault suite: the real otelcol-netpulse binary with the
// unchanged deploy/ configuration as agents on a simulated cluster (testbed/simcluster),
// faults injected into the simulated network, and assertions on what the system reports.
//
// One cluster serves the whole package (TestMain). Every scenario starts by waiting for a
// healthy mesh and heals what it injected, so scenarios run in any order and alone
// (go test -run TestPartition ./testbed/e2e).
//
// The agents report to one gateway replica running the unchanged
// deploy/agent-gateway/config/gateway.yaml in the simcluster gateway slot (host side of the
// bridge, 198.18.0.1, netpulse-gateway service-account token bound only to deploy/rbac).
// Scenarios assert through the Kubernetes API (apiChecker): PodNetworkHealth objects, the
// netpulse.io/PodNetworkProblem node condition and the Events the gateway writes. Every
// expectation is written in terms of pods and paths, not of a backend.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/testbed/helmtest"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/simcluster"
	"github.com/netpulse/netpulse/testbed/simcluster/simclustertest"
)

// keepEnv=1 keeps the run directory (logs, kubeconfigs) after a passing run too.
const keepEnv = "NETPULSE_E2E_KEEP"

// Suite parameters: short rounds keep the suite to a couple of minutes.
const (
	probeInterval = time.Second
	probeTimeout  = 500 * time.Millisecond
)

// nodesEnv sets the cluster size. The default, 4, makes k=3 (agent.yaml) a full mesh: every
// agent probes every other one each round, which the mesh scenarios (Test* other than
// TestSampled*) assert. The sampled scenarios (TestSampled*) need a cluster where a mesh is
// impossible: `make test` runs them in a second pass with NETPULSE_E2E_NODES=16.
const nodesEnv = "NETPULSE_E2E_NODES"

// nodes is the cluster size (nodesEnv, default 4); zones spread them (3 from 9 nodes on).
var nodes, zones = 4, 2

// shardsEnv runs the gateway as that many shards (the chart's gateway.shards, rendered with
// configEnv=chart; each shard a gateway in a simcluster slot of its own): `make test`'s third
// pass runs TestSharded* so (docs/sharding.md).
const shardsEnv = "NETPULSE_E2E_SHARDS"

// shards is the gateway shard count (shardsEnv, default 1).
var shards = 1

func shardCount() (int, error) {
	v := os.Getenv(shardsEnv)
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > simcluster.GatewaySlots {
		return 0, fmt.Errorf("%s=%q: want 1..%d", shardsEnv, v, simcluster.GatewaySlots)
	}
	if n > 1 && os.Getenv(configEnv) != "chart" {
		return 0, fmt.Errorf("%s=%d needs %s=chart (the chart renders the sharded configuration)", shardsEnv, n, configEnv)
	}
	return n, nil
}

func clusterSize() (int, int, error) {
	n, z := 4, 2
	if v := os.Getenv(nodesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 4 || n > simcluster.MaxNodes {
			return 0, 0, fmt.Errorf("%s=%q: want 4..%d", nodesEnv, v, simcluster.MaxNodes)
		}
	}
	if n >= 9 {
		z = 3
	}
	return n, z, nil
}

// env is the package's shared cluster.
type env struct {
	cl *simcluster.Cluster
	gw *simcluster.Gateway
	// shardGWs are the gateways of the shards, by index (shards > 1; gw is shardGWs[0]).
	shardGWs []*simcluster.Gateway
	// api reads what the gateway wrote (admin credentials).
	api *apiChecker
	// agentsStarted is when StartAgents began (for the first-convergence figure).
	agentsStarted time.Time
	checkers      []checker
	// ring is the stable pairs the sampled scenarios found (TestSampled*).
	ring ring
	// gwEnv is the gateway's environment beyond gateway.yaml's; gwGeneration numbers the
	// replicas that took over (netpulse-gateway-<n>).
	gwEnv        map[string]string
	gwGeneration int
	// gwConfig is the gateway's configuration file ("": deploy/'s gateway.yaml), rendered
	// into renderDir when configEnv=chart.
	gwConfig, renderDir string
	// gwExtra are merged over gwConfig (the view extension).
	gwExtra []string
}

// gatewayViewConfig enables the connectivity view on the gateway (docs/view.md).
const gatewayViewConfig = `extensions:
  netpulse_view:
    endpoint: ${env:POD_IP}:8089
    auth_type: ${env:NETPULSE_K8S_AUTH:-serviceAccount}
  # TestDeclaredChecks' sidecar authenticates with its workload's service account, which
  # users add here (docs/checks.md).
  k8s_token_auth:
    service_accounts: [netpulse/netpulse-agent, checks/default]
    agent_service_accounts: [netpulse/netpulse-agent]
service:
  extensions: [health_check, k8s_token_auth, grpc_admission, netpulse_view]
`

// configEnv=chart takes the agents' and gateway's configuration from the Helm chart's
// rendered output (`make test` does so for the sampled pass) instead of deploy/'s files.
const configEnv = "NETPULSE_E2E_CONFIG"

var (
	shared   *env
	setupErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if testing.Short() {
		setupErr = errShort
		return m.Run()
	}
	if msg := simclustertest.NotRootMessage(); msg != "" {
		setupErr = fmt.Errorf("%s", msg)
		return m.Run() // each test fails (or, with the opt-in, skips) with the reason
	}
	var err error
	if nodes, zones, err = clusterSize(); err != nil {
		setupErr = err
		return m.Run()
	}
	if shards, err = shardCount(); err != nil {
		setupErr = err
		return m.Run()
	}
	start := time.Now()
	e, err := startEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: setting up the simulated cluster failed: %v\n", err)
		if e != nil && e.cl != nil {
			e.cl.SetKeepDir(true)
			fmt.Fprintf(os.Stderr, "%s\n", e.cl.Logs(40))
		}
		setupErr = err
		code := m.Run()
		stopEnv(e)
		return code
	}
	shared = e
	// Ctrl-C or a kill: clean up before dying (a crash is covered by the sweep of the next
	// start, and Pdeathsig ends the children).
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)
	go func() {
		if s, ok := <-sigc; ok {
			fmt.Fprintf(os.Stderr, "e2e: %v: stopping the simulated cluster\n", s)
			_ = stopEnv(e)
			os.Exit(1)
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e: cluster with %d agents up in %.1fs; kubectl --kubeconfig %s get pods -n netpulse\n",
		nodes, time.Since(start).Seconds(), e.cl.AdminKubeconfig)
	code := m.Run()
	if os.Getenv(keepEnv) == "1" {
		e.cl.SetKeepDir(true)
	}
	if code != 0 {
		e.cl.SetKeepDir(true)
		fmt.Fprintf(os.Stderr, "e2e: failed; run directory kept: %s\n", e.cl.Dir)
	}
	if err := stopEnv(e); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stop: %v\n", err)
		code = 1
	}
	fmt.Fprintf(os.Stderr, "e2e: suite total %.1fs\n", time.Since(start).Seconds())
	return code
}

var errShort = fmt.Errorf("end-to-end tests do not run with -short")

func startEnv() (*env, error) {
	bin, err := simclustertest.Collector()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := simcluster.Start(ctx, simcluster.Options{
		Nodes:     nodes,
		Zones:     zones,
		Collector: bin,
		// The sampled pass waits for the mesh pass (and any other simulated cluster of
		// the same `go test ./...`) to release the host.
		LockTimeout: 40 * time.Minute,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
		},
	})
	if err != nil {
		return nil, err
	}
	e := &env{cl: cl}
	pnh, err := versioned.NewForConfig(rest.CopyConfig(cl.AdminConfig))
	if err != nil {
		return e, err
	}
	e.api = &apiChecker{pnh: pnh, core: cl.Client}
	e.checkers = []checker{e.api, gatewayChecker{}}
	// The gateway: deploy/agent-gateway/config/gateway.yaml unchanged, POD_IP=198.18.0.1,
	// POD_NAME=netpulse-gateway-0, POD_NAMESPACE=netpulse, the netpulse-gateway kubeconfig.
	// The only additions are NETPULSE_TARGET_TTL (see targetTTL), NETPULSE_NODE_MIN_HOLD
	// (see nodeMinHold) and NETPULSE_FLAP_WINDOW=0s: the scenarios re-fault the same pairs
	// within seconds of a heal, which flap folding (on by default) would fold into one
	// outage; TestFlappingLink turns it back on.
	e.gwEnv = map[string]string{"NETPULSE_TARGET_TTL": targetTTL.String(), "NETPULSE_NODE_MIN_HOLD": nodeMinHold.String(), "NETPULSE_FLAP_WINDOW": "0s"}
	// OpenShift's PodNetworkConnectivityCheck CRD (written from its published schema) and
	// the opt-in RBAC, and the gateway and agents serving it (TestDeclaredChecks).
	if err := cl.ApplyFiles(ctx, filepath.Join(filepath.Dir(kubetest.DeployPath()), "testdata", "crds", "controlplane.operator.openshift.io_podnetworkconnectivitychecks.yaml"),
		kubetest.DeployPath("rbac", "openshift-checks.yaml")); err != nil {
		return e, err
	}
	e.gwEnv["NETPULSE_OPENSHIFT_CHECKS"] = "true"
	var agentConfig string
	if os.Getenv(configEnv) == "chart" {
		// The Helm chart's rendered configuration (default values) instead of deploy/'s
		// files: the chart is proven to make a working pipeline, not just valid YAML.
		dir, err := os.MkdirTemp("", "netpulse-e2e-chart-")
		if err != nil {
			return e, err
		}
		helmBin, err := helmtest.Binary()
		if err != nil {
			return e, err
		}
		chartDir, err := helmtest.ChartDir()
		if err != nil {
			return e, err
		}
		e.renderDir = dir
		var values map[string]any
		if shards > 1 {
			values = map[string]any{"gateway": map[string]any{"shards": shards}}
		}
		if agentConfig, e.gwConfig, err = helmtest.RenderCollectorConfigs(helmBin, chartDir, values, dir); err != nil {
			return e, fmt.Errorf("rendering the chart's collector configuration: %w", err)
		}
		fmt.Fprintf(os.Stderr, "e2e: agent and gateway configuration rendered by the Helm chart (%s)\n", dir)
	}
	// The connectivity view (netpulse_view, off in deploy/) on the gateway, merged over its
	// configuration: TestPartition opens it in headless Chromium.
	e.gwExtra = []string{filepath.Join(cl.Dir, "gateway-view.yaml")}
	viewConfig := gatewayViewConfig
	if shards > 1 {
		// The chart's relaying shards (gateway.relay): their own account is a relay's and
		// their relay token extension runs; the lists above replace the rendered ones.
		viewConfig = strings.NewReplacer(
			"service_accounts: [netpulse/netpulse-agent, checks/default]", "service_accounts: [netpulse/netpulse-agent, checks/default, netpulse/netpulse-gateway]",
			"extensions: [health_check, k8s_token_auth, grpc_admission, netpulse_view]", "extensions: [health_check, k8s_token_auth, grpc_admission, netpulse_view, bearertokenauth/relay, grpc_backoff]",
		).Replace(viewConfig)
	}
	if err := os.WriteFile(e.gwExtra[0], []byte(viewConfig), 0o644); err != nil {
		return e, err
	}
	agentEnv := map[string]string{"NETPULSE_OPENSHIFT_CHECKS": "true", "NETPULSE_PATH_MTU": "true"}
	var spread []string
	if shards > 1 {
		// A gateway per shard, each in its own slot (address), each told its index as the
		// chart's Deployments tell theirs; the agents reach shard i at its slot. The chart
		// relays (gateway.relay): each agent connects to one shard (its node's, as the
		// relay Service would spread them), which forwards to the others at their slots.
		for i := range shards {
			e.gwEnv[fmt.Sprintf("NETPULSE_RELAY_ENDPOINT_%d", i)] = net.JoinHostPort(simcluster.GatewayIPv4(i).String(), strconv.Itoa(simcluster.GatewayOTLPPort))
		}
		for i := range shards {
			gw, err := cl.StartGateway(ctx, e.shardGateway(i, "a"))
			if err != nil {
				return e, err
			}
			e.shardGWs = append(e.shardGWs, gw)
			agentEnv[fmt.Sprintf("NETPULSE_GATEWAY_ENDPOINT_%d", i)] = gw.Endpoint
			spread = append(spread, gw.Endpoint)
		}
		e.gw = e.shardGWs[0]
	} else if e.gw, err = cl.StartGateway(ctx, simcluster.GatewayOptions{Env: e.gwEnv, Config: e.gwConfig, ExtraConfigs: e.gwExtra}); err != nil {
		return e, err
	}
	e.agentsStarted = time.Now()
	err = cl.StartAgents(ctx, simcluster.AgentOptions{
		Config:           agentConfig,
		GatewayEndpoint:  e.gw.Endpoint,
		GatewayEndpoints: spread,
		ProbeInterval:    probeInterval,
		ProbeTimeout:     probeTimeout,
		PeerGrace:        0,
		// Path-MTU probes on: TestPathMTUBlackHole needs them, and every other scenario
		// then runs with them too (no false MTUBlackHole on a healthy cluster).
		Env: agentEnv,
	})
	return e, err
}

// shardGateway is the gateway of shard i (generation gen names the replica): slot i,
// NETPULSE_SHARD_INDEX=i, the rendered configuration.
func (e *env) shardGateway(i int, gen string) simcluster.GatewayOptions {
	env := map[string]string{"NETPULSE_SHARD_INDEX": strconv.Itoa(i)}
	for k, v := range e.gwEnv {
		env[k] = v
	}
	return simcluster.GatewayOptions{Name: fmt.Sprintf("netpulse-gateway-%d-%s", i, gen), Slot: i, Env: env, Config: e.gwConfig, ExtraConfigs: e.gwExtra,
		RelayAudience: "netpulse-gateway"}
}

func stopEnv(e *env) error {
	if e == nil {
		return nil
	}
	var err error
	if e.cl != nil {
		err = e.cl.Stop() // stops the gateway too
	}
	if e.renderDir != "" {
		_ = os.RemoveAll(e.renderDir)
	}
	return err
}

// requireEnv returns the shared cluster or ends the test with the reason it is missing.
func requireEnv(t *testing.T) *env {
	t.Helper()
	if setupErr == errShort {
		t.Skip(errShort.Error())
	}
	simclustertest.RequireRoot(t)
	if setupErr != nil {
		t.Fatalf("simulated cluster unavailable: %v", setupErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", shared.cl.Logs(25))
		}
	})
	return shared
}

// grayEnv runs the longer gray scenarios (TestHalfLoss, TestCongestedNode, TestSmallLoss,
// TestSlowNode): make test-gray sets it, on a mesh of their own. In make test's mesh they
// would follow TestLossyObserver, whose node's target-side verdict, set at a diluted level
// (~2 %), took 114 s and more than 3 minutes to clear after its heal (its clearing bound,
// level/3, needs ~1,000 clean echoes): a scenario that starts from a clean picture waits
// on it (#37).
const grayEnv = "NETPULSE_E2E_GRAY"

// requireGrayMesh is requireMesh for the scenarios make test-gray runs.
func requireGrayMesh(t *testing.T) *env {
	t.Helper()
	if os.Getenv(grayEnv) != "1" {
		t.Skipf("a gray scenario of make test-gray (%s=1)", grayEnv)
	}
	return requireMesh(t)
}

// requireMesh is requireEnv for the scenarios that expect every agent to probe every other
// one each round (k=3 + 1 stable peer cover N-1 peers only up to 5 nodes).
func requireMesh(t *testing.T) *env {
	t.Helper()
	e := requireEnv(t)
	if nodes > 5 {
		t.Skipf("a full-mesh scenario; this run has %d nodes (%s), where probing is sampled: see TestSampled*", nodes, nodesEnv)
	}
	return e
}
