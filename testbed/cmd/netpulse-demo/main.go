// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command netpulse-demo is `make demo`: the whole netpulse pipeline on one Linux host, as
// root. It starts the local control plane and a simulated 4-node cluster
// (testbed/simcluster), runs one gateway with deploy/agent-gateway/config/gateway.yaml on
// the host side of the bridge and the agents with deploy/agent-gateway/config/agent.yaml in
// the node namespaces, then plays a scripted scenario while it shows what the API says
// (the PodNetworkHealth objects, as `kubectl get pnh -A` would, and the nodes'
// netpulse.io/PodNetworkProblem condition):
//
//  1. wait until every agent pair is Reachable;
//  2. partition one node; wait until the pairs towards it are Unreachable and its node
//     condition is True;
//  3. heal it; wait until every pair is Reachable again, with the outage (start and end) in
//     the pairs' status, and the node condition False;
//  4. with DEMO_DURATION > 0, keep the cluster up for exploration with kubectl;
//  5. stop and remove everything (also on Ctrl-C / SIGTERM).
//
// Environment:
//
//	DEMO_DURATION      how long to keep the cluster up after the script (default 0: exit)
//	DEMO_NODES         simulated nodes (default 4)
//	DEMO_PARTITION     the node to partition (default node-2)
//	DEMO_REFRESH       table refresh interval (default 3s)
//	DEMO_STEP_TIMEOUT  bound of each waiting step (default 2m to converge, 90s to detect
//	                   and to recover)
//	NETPULSE_COLLECTOR the otelcol-netpulse binary (default <repo>/bin/otelcol-netpulse)
//	NETPULSE_KUBE_NO_BUILD=1 use the Kubernetes binaries in bin/ (make kube-bins) as they are
//
// It exits 0 when every step succeeded, 1 with the failing step and the cluster's log
// tails otherwise, 130 on a signal.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/realcluster"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// Step bounds. Rounds are 1s; on the default 4 nodes every agent probes every other one
// each round (k=3 in agent.yaml), with DEMO_NODES > 5 probing is sampled and each target is
// judged from the observers that probed it; either way the verdicts move within a few
// seconds, and the bounds are generous.
const (
	startTimeout    = 5 * time.Minute // control plane + network + deploy/ (first start compiles nothing)
	lockTimeout     = 5 * time.Minute // another simulated cluster (e.g. make test) on this host
	gatewayTimeout  = 90 * time.Second
	agentsTimeout   = 2 * time.Minute
	convergeTimeout = 2 * time.Minute
	detectTimeout   = 90 * time.Second
	recoverTimeout  = 90 * time.Second
	stopTimeout     = 2 * time.Minute

	probeInterval = time.Second
	probeTimeout  = 500 * time.Millisecond
	pollInterval  = 250 * time.Millisecond
)

// errSignal marks a run ended by Ctrl-C / SIGTERM.
var errSignal = errors.New("interrupted")

type config struct {
	duration  time.Duration
	nodes     int
	partition string
	refresh   time.Duration
	collector string
	repoRoot  string
	// stepTimeout overrides the bounds of the waiting steps (DEMO_STEP_TIMEOUT).
	stepTimeout time.Duration
	// real: DEMO_REAL=1, the same story on real nodes installed with the Helm chart (real.go).
	real bool
}

// timeout is def unless DEMO_STEP_TIMEOUT overrides it.
func (c config) timeout(def time.Duration) time.Duration {
	if c.stepTimeout > 0 {
		return c.stepTimeout
	}
	return def
}

func main() {
	os.Exit(run())
}

func run() int {
	cfg, err := loadConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "netpulse-demo: %v\n", err)
		return 2
	}
	out := newOutput(os.Stdout)

	// Ctrl-C / SIGTERM cancel the context: every step returns and the deferred Stop cleans
	// up. A second signal exits at once (the children die with us through Pdeathsig; the
	// next start sweeps what is left).
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)
	go func() {
		s, ok := <-sigc
		if !ok {
			return
		}
		out.println(fmt.Sprintf("\n%v: stopping the demo and cleaning up (again to exit at once)", s))
		cancel(errSignal)
		if _, ok := <-sigc; ok {
			fmt.Fprintln(os.Stderr, "netpulse-demo: second signal: exiting without cleanup (the next run sweeps leftovers)")
			os.Exit(130)
		}
	}()

	d := &demo{cfg: cfg, out: out, began: time.Now()}
	if cfg.real {
		err = d.runReal(ctx)
	} else {
		err = d.run(ctx)
	}
	out.freeze()
	code := 0
	switch {
	case err == nil:
	case errors.Is(context.Cause(ctx), errSignal):
		out.println("interrupted: " + err.Error())
		code = 130
	default:
		out.println("")
		out.println("DEMO FAILED: " + err.Error())
		if d.real != nil {
			out.println("log tails of the control plane and the nodes:")
			out.println(d.real.Logs(20))
			d.real.SetKeepDir(true)
			out.println("run directory kept for inspection (until the next run sweeps it): " + d.real.Dir)
			out.println("pods of the netpulse namespace:")
			out.println(d.real.PodReport(context.Background(), d.core, realNamespace))
		}
		if d.cl != nil {
			out.println("log tails of the control plane, the agents and the gateway:")
			out.println(d.cl.Logs(20))
			d.cl.SetKeepDir(true)
			out.println("run directory kept for inspection: " + d.cl.Dir)
		}
		code = 1
	}
	if stopErr := d.stop(); stopErr != nil {
		out.println("cleanup: " + stopErr.Error())
		if code == 0 {
			code = 1
		}
	}
	switch code {
	case 0:
		out.println(fmt.Sprintf("\ndemo finished in %s: all steps passed", round(time.Since(d.began))))
	case 1:
		if err != nil {
			out.println(fmt.Sprintf("\ndemo failed after %s: %v", round(time.Since(d.began)), err))
		}
	}
	return code
}

func loadConfig() (config, error) {
	cfg := config{nodes: 4, partition: "node-2", refresh: 3 * time.Second}
	var err error
	if v := os.Getenv("DEMO_DURATION"); v != "" && v != "0" {
		if cfg.duration, err = time.ParseDuration(v); err != nil || cfg.duration < 0 {
			return cfg, fmt.Errorf("DEMO_DURATION=%q: want a duration such as 10m or 0", v)
		}
	}
	if v := os.Getenv("DEMO_NODES"); v != "" {
		if cfg.nodes, err = strconv.Atoi(v); err != nil || cfg.nodes < 3 || cfg.nodes > simcluster.MaxNodes {
			// 3 at least: the node condition needs a quorum of 2 observers besides the node.
			return cfg, fmt.Errorf("DEMO_NODES=%q: want 3..%d", v, simcluster.MaxNodes)
		}
	}
	if v := os.Getenv("DEMO_PARTITION"); v != "" {
		cfg.partition = v
	}
	if v := os.Getenv("DEMO_REFRESH"); v != "" {
		if cfg.refresh, err = time.ParseDuration(v); err != nil || cfg.refresh < 500*time.Millisecond {
			return cfg, fmt.Errorf("DEMO_REFRESH=%q: want a duration of at least 500ms", v)
		}
	}
	if v := os.Getenv("DEMO_STEP_TIMEOUT"); v != "" {
		if cfg.stepTimeout, err = time.ParseDuration(v); err != nil || cfg.stepTimeout <= 0 {
			return cfg, fmt.Errorf("DEMO_STEP_TIMEOUT=%q: want a positive duration", v)
		}
	}
	cfg.real = os.Getenv("DEMO_REAL") == "1"
	if cfg.real && os.Getenv("DEMO_NODES") == "" {
		cfg.nodes = 3
	}
	if cfg.real && cfg.nodes > realcluster.MaxNodes {
		return cfg, fmt.Errorf("DEMO_NODES=%d: real nodes: want 3..%d", cfg.nodes, realcluster.MaxNodes)
	}
	if os.Geteuid() != 0 {
		return cfg, fmt.Errorf("needs root (network namespaces, veths, a bridge, nftables); run `sudo make demo`")
	}
	if cfg.repoRoot, err = kubetest.RepoRoot(); err != nil {
		return cfg, fmt.Errorf("run from the netpulse checkout: %w", err)
	}
	cfg.collector = os.Getenv("NETPULSE_COLLECTOR")
	if cfg.collector == "" {
		cfg.collector = filepath.Join(cfg.repoRoot, "bin", "otelcol-netpulse")
	}
	if !filepath.IsAbs(cfg.collector) {
		cfg.collector = filepath.Join(cfg.repoRoot, cfg.collector)
	}
	if _, err := os.Stat(cfg.collector); err != nil {
		return cfg, fmt.Errorf("collector binary: %v (run `make build`, or `make demo` which builds it)", err)
	}
	return cfg, nil
}

func round(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
