// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/netpulse/netpulse/testbed/disttest"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/syntheticagent"
)

func envInt(t *testing.T, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return n
	}
	return def
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration", name, v)
		}
		return d
	}
	return def
}

// heapReadings: the steady heap is the median of this many readings, a second apart
// (steadyHeap), taken while the agents keep sending.
const heapReadings = 5

// measurement is one collector's figures over the measured window.
type measurement struct {
	window               time.Duration
	cpu                  float64 // collector CPU seconds in the window
	clientCPU            float64 // this process's CPU seconds in the window (the agents)
	requests, points     int64   // accepted in the window
	failed               int64   // refused or timed out in the window
	heapIdle, heapSteady float64 // live heap after GC: before the agents, at the end
	// heapRest: live heap after GC with the agents connected but paused and nothing in
	// flight: the state the agents make the collector keep, without the requests being
	// processed (which grow with any CPU shortage of a shared machine).
	heapRest               float64
	rssSteady              float64
	agents                 int
	pointsPerCore          float64
	roundsPerCore          float64
	heapPerAgent           float64
	restPerAgent           float64
	cores                  float64 // collector CPU / wall clock: how busy it was
	offeredRoundsPerSecond float64
}

func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// drive starts a fleet against c and measures it (measure).
func drive(t *testing.T, c *collector, endpoint string, cl *benchCluster, interval, warm, window, acceptTimeout time.Duration, heapIdle float64, shards int) measurement {
	t.Helper()
	f, err := startFleet(endpoint, cl.tls.CAPool, cl.agents, interval, shards)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	return measure(t, c, f, time.Now(), interval, warm, window, acceptTimeout, heapIdle)
}

// measure waits until every agent of f (started at began) had a request accepted (the
// gateway's token cache is warm) and warm more, then measures for window.
func measure(t *testing.T, c *collector, f *fleet, began time.Time, interval, warm, window, acceptTimeout time.Duration, heapIdle float64) measurement {
	t.Helper()
	n := len(f.agents)
	for f.firstOK.Load() < int64(n) {
		if time.Since(began) > acceptTimeout {
			t.Fatalf("%s: only %d of %d agents accepted after %v; errors: %v\n%s", c.name, f.firstOK.Load(), n, acceptTimeout, f.errors(), c.proc.LogTail(30))
		}
		if c.proc.Exited() {
			t.Fatalf("%s exited: %v\n%s", c.name, c.proc.Err(), c.proc.LogTail(40))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%s: all %d agents accepted after %v (errors meanwhile: %d kinds)", c.name, n, time.Since(began).Round(time.Second), len(f.errors()))
	time.Sleep(warm)
	_ = f.errors()

	m := measurement{window: window, heapIdle: heapIdle, agents: n, offeredRoundsPerSecond: float64(n) / interval.Seconds()}
	cpu0, err := cpuSeconds(c.proc.Pid())
	if err != nil {
		t.Fatal(err)
	}
	self0, req0, pts0, fail0, t0 := selfCPU(), f.okRequests.Load(), f.okPoints.Load(), f.failed.Load(), time.Now()
	profiled := make(chan struct{})
	if dir := os.Getenv("NETPULSE_INGEST_PROFILE_DIR"); dir != "" {
		// For finding hot spots, not for the figures: a CPU profile over the window.
		go func() {
			defer close(profiled)
			c.saveProfile(t, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(window.Seconds())), filepath.Join(dir, c.file+"-cpu.pprof"))
		}()
	} else {
		close(profiled)
	}
	time.Sleep(window)
	cpu1, err := cpuSeconds(c.proc.Pid())
	if err != nil {
		t.Fatal(err)
	}
	self1, req1, pts1, fail1, elapsed := selfCPU(), f.okRequests.Load(), f.okPoints.Load(), f.failed.Load(), time.Since(t0)
	m.cpu, m.clientCPU = cpu1-cpu0, self1-self0
	m.requests, m.points, m.failed = req1-req0, pts1-pts0, fail1-fail0
	m.heapSteady, m.rssSteady = c.steadyHeap(t, heapReadings, time.Second), rssBytes(c.proc.Pid())
	<-profiled
	if dir := os.Getenv("NETPULSE_INGEST_PROFILE_DIR"); dir != "" {
		c.saveProfile(t, "/debug/pprof/heap?gc=1", filepath.Join(dir, c.file+"-heap.pprof"))
	}
	// At rest: the agents pause (connections kept) until nothing is in flight, and 2 s more
	// for what the collector still processes or batches (the batch processor's 1 s).
	if !f.pause(10 * time.Second) {
		t.Logf("%s: requests still in flight 10 s after the agents paused", c.name)
	}
	time.Sleep(2 * time.Second)
	m.heapRest = c.steadyHeap(t, 3, time.Second)
	if dir := os.Getenv("NETPULSE_INGEST_PROFILE_DIR"); dir != "" {
		c.saveProfile(t, "/debug/pprof/heap?gc=1", filepath.Join(dir, c.file+"-heap-rest.pprof"))
	}
	f.resume()
	// A collector that loses more than 10% of the rounds is not keeping up: its figures are
	// not a capacity. (A heap over GOMEMLIMIT, 400 MiB, makes the GC run back to back.) A
	// few timeouts are what a machine shared with other work causes.
	if m.failed > 0 {
		report := t.Logf
		if m.failed*10 > m.requests+m.failed {
			report = t.Errorf
		}
		report("%s: %d of %d requests failed in the measured window (live heap %.0f MB, GOMEMLIMIT 400 MiB): %v",
			c.name, m.failed, m.requests+m.failed, m.heapSteady/1e6, f.errors())
	}
	m.pointsPerCore = float64(m.points) / m.cpu
	m.roundsPerCore = float64(m.requests) / m.cpu
	m.heapPerAgent = (m.heapSteady - m.heapIdle) / float64(n)
	m.restPerAgent = (m.heapRest - m.heapIdle) / float64(n)
	m.cores = m.cpu / elapsed.Seconds()
	t.Logf("%s: %d agent-rounds (%.0f/s of %.0f/s offered), %d data points in %v; collector CPU %.2fs (%.2f cores), client CPU %.2fs; "+
		"heap after GC %.1f MB idle, %.1f MB with the agents, %.1f MB with them paused; RSS %.1f MB",
		c.name, m.requests, float64(m.requests)/elapsed.Seconds(), m.offeredRoundsPerSecond, m.points, elapsed.Round(time.Millisecond),
		m.cpu, m.cores, m.clientCPU, m.heapIdle/1e6, m.heapSteady/1e6, m.heapRest/1e6, m.rssSteady/1e6)
	return m
}

// readBufferYAML is the read_buffer_size line at indent, or nothing without an override.
func readBufferYAML(size, indent string) string {
	return bufferYAML("read_buffer_size", size, indent)
}

// bufferYAML is the key: size line at indent, or nothing without an override.
func bufferYAML(key, size, indent string) string {
	if size == "" {
		return ""
	}
	return "\n" + indent + key + ": " + size
}

// referenceConfig is otlp -> nop with gateway.yaml's OTLP gRPC server settings (TLS,
// keepalive, read buffer: everything but the authenticator), at ip, plus the pprof
// extension and the same internal telemetry as the gateway.
func referenceConfig(t *testing.T, ip, certFile, keyFile, readBuffer, writeBuffer string) []byte {
	t.Helper()
	data, err := os.ReadFile(kubetest.DeployPath("agent-gateway", "config", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var gw struct {
		Receivers struct {
			OTLP struct {
				Protocols struct {
					GRPC map[string]any `yaml:"grpc"`
				} `yaml:"protocols"`
			} `yaml:"otlp"`
		} `yaml:"receivers"`
		Service struct {
			Telemetry map[string]any `yaml:"telemetry"`
		} `yaml:"service"`
	}
	if err := yaml.Unmarshal(data, &gw); err != nil {
		t.Fatal(err)
	}
	grpc := gw.Receivers.OTLP.Protocols.GRPC
	if grpc == nil || gw.Service.Telemetry == nil {
		t.Fatal("gateway.yaml: no receivers.otlp.protocols.grpc or service.telemetry")
	}
	delete(grpc, "auth")
	delete(grpc, "middlewares") // the admission bound: the gateway's, not the floor's
	grpc["endpoint"] = net.JoinHostPort(ip, "4317")
	tlsCfg, _ := grpc["tls"].(map[string]any)
	if tlsCfg == nil {
		t.Fatal("gateway.yaml: the OTLP receiver has no tls")
	}
	tlsCfg["cert_file"], tlsCfg["key_file"] = certFile, keyFile
	if readBuffer != "" {
		grpc["read_buffer_size"], _ = strconv.Atoi(readBuffer)
	}
	if writeBuffer != "" {
		grpc["write_buffer_size"], _ = strconv.Atoi(writeBuffer)
	}
	cfg := map[string]any{
		"extensions": map[string]any{"pprof": map[string]any{"endpoint": net.JoinHostPort(ip, "1777")}},
		"receivers":  map[string]any{"otlp": map[string]any{"protocols": map[string]any{"grpc": grpc}}},
		"exporters":  map[string]any{"nop": nil},
		"service": map[string]any{
			"extensions": []string{"pprof"},
			"telemetry":  gw.Service.Telemetry, // its ${env:POD_IP} is the reference's (POD_IP in its environment)
			"pipelines":  map[string]any{"metrics": map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"nop"}}},
		},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIngestBench: the gateway's ingest path against otlp -> nop, per core and per agent
// (package doc). NETPULSE_INGEST_AGENTS (default 1000), NETPULSE_INGEST_INTERVAL (the
// agents' round, default 1s) and NETPULSE_INGEST_WINDOW (default 30s) tune it.
func TestIngestBench(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") != "1" {
		t.Skip("a benchmark: NETPULSE_BENCH=1 (make bench) runs it")
	}
	n := envInt(t, "NETPULSE_INGEST_AGENTS", 1000)
	interval := envDuration(t, "NETPULSE_INGEST_INTERVAL", time.Second)
	window := envDuration(t, "NETPULSE_INGEST_WINDOW", 30*time.Second)
	warm := max(5*time.Second, 3*interval)
	// NETPULSE_INGEST_READ_BUFFER (bytes) overrides the OTLP gRPC receiver's read_buffer_size
	// in both collectors (otlpreceiver's default, which gateway.yaml keeps, is 512 KiB per
	// connection, i.e. per agent); unset, both run with what gateway.yaml says.
	// NETPULSE_INGEST_SHARDS=S (> 1): the gateway is shard 0 of S (pod_network_health's
	// shard) and each agent sends it what its shard-0 filter passes, plus its heartbeat:
	// one shard's load in a cluster of NETPULSE_INGEST_AGENTS nodes (docs/sharding.md).
	shards := envInt(t, "NETPULSE_INGEST_SHARDS", 1)
	readBuffer := ""
	if os.Getenv("NETPULSE_INGEST_READ_BUFFER") != "" {
		readBuffer = strconv.Itoa(envInt(t, "NETPULSE_INGEST_READ_BUFFER", 0))
	}
	// NETPULSE_INGEST_WRITE_BUFFER (bytes) likewise overrides write_buffer_size (gRPC's
	// default, 32 KiB per connection, which gateway.yaml keeps).
	writeBuffer := ""
	if os.Getenv("NETPULSE_INGEST_WRITE_BUFFER") != "" {
		writeBuffer = strconv.Itoa(envInt(t, "NETPULSE_INGEST_WRITE_BUFFER", 0))
	}
	if n < syntheticagent.ShippedK+syntheticagent.ShippedStablePeers+2 {
		t.Fatalf("NETPULSE_INGEST_AGENTS=%d: at least %d", n, syntheticagent.ShippedK+syntheticagent.ShippedStablePeers+2)
	}
	ctx := context.Background()
	bin := disttest.Collector(t)
	// Loopback addresses of their own for the two collectors (their ports are the shipped
	// config's fixed ones), varied by PID so that a concurrent run elsewhere does not collide.
	pid := os.Getpid()
	gwIP := net.IPv4(127, 77, byte(pid>>8), byte(pid)|1).String()
	refIP := net.IPv4(127, 78, byte(pid>>8), byte(pid)|1).String()
	cl := setupCluster(ctx, t, n, gwIP, refIP)
	baseEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GOMEMLIMIT=400MiB"} // the Deployment's GOMEMLIMIT

	gw := startGateway(ctx, t, cl, bin, gwIP, baseEnv, shards, readBuffer, writeBuffer)
	gwIdle := gw.heapAfterGC(t)
	before := gw.telemetry(t)
	// The agents start on the gateway now: each one's first request costs a TokenReview at
	// k8s_token_auth's qps (20/s), so its token cache takes a minute or more to warm up at
	// N = 1,000. The reference runs meanwhile (its CPU time is its own; the machine is busier).
	oursFleet, err := startFleet(net.JoinHostPort(gwIP, "4317"), cl.tls.CAPool, cl.agents, interval, shards)
	if err != nil {
		t.Fatal(err)
	}
	defer oursFleet.close()
	oursBegan := time.Now()

	// The reference: the same agents, the same TLS and keepalive, into otlp -> nop.
	refCfg := filepath.Join(cl.dir, "reference.yaml")
	if err := os.WriteFile(refCfg, referenceConfig(t, refIP, cl.tls.CertFile, cl.tls.KeyFile, readBuffer, writeBuffer), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := startCollector(t, "reference (otlp -> nop)", "reference", refIP, []string{os.Args[0]},
		append(slices.Clone(baseEnv), envReferenceConfig+"="+refCfg, "POD_IP="+refIP), filepath.Join(cl.dir, "reference.log"))
	ref.waitReady(t, "tcp://"+net.JoinHostPort(refIP, "4317"), 30*time.Second)
	refM := drive(t, ref, net.JoinHostPort(refIP, "4317"), cl, interval, warm, window, 60*time.Second, ref.heapAfterGC(t), shards)
	_ = ref.proc.Stop(10 * time.Second)

	oursM := measure(t, gw, oursFleet, oursBegan, interval, warm, window, 3*time.Minute+time.Duration(n)*time.Second/10, gwIdle)
	after := gw.telemetry(t)

	// What the gateway made of the input: nothing refused, the rounds judged.
	delta := func(name string, labels ...string) float64 {
		return sum(after, name, labels...) - sum(before, name, labels...)
	}
	for _, l := range matching(after, "datapoints_skipped", "admission_refused", "token_auth_requests", "pod_network_health_observations",
		"pod_network_health_objects", "api_writes", "receiver_refused", "receiver_accepted_metric_points", "exporter_send_failed") {
		t.Logf("gateway telemetry (since start): %s", l)
	}
	observations := delta("otelcol_pod_network_health_observations")
	if observations <= 0 {
		t.Errorf("pod_network_health judged no observations while the agents ran")
	}
	if r := delta("otelcol_k8s_net_attributes_admission_refused"); r > 0 {
		t.Errorf("the admission refused %v data points of the agents", r)
	}
	if r := delta("otelcol_receiver_refused_metric_points"); r > 0 {
		t.Errorf("the OTLP receiver refused %v data points", r)
	}

	ratio := func(o, r float64) float64 { return o / r }
	if shards == 1 {
		reportSeries(t, gw, n)
	}
	if shards > 1 {
		// Every agent still sends each shard a request a round (its heartbeat at least):
		// the rounds figures are per shard, the data points a shard's share.
		if hb := delta("otelcol_pod_network_health_datapoints_skipped", "reason", "other_shard"); hb > 0 {
			t.Errorf("shard 0 skipped %v observations of other shards' targets: the filter and the owner disagree", hb)
		}
		fmt.Printf("BENCH ingest_shard_of_%d_agent_rounds_per_core_s ours=%.0frounds/s reference=%.0frounds/s ratio=%.2f\n", shards,
			oursM.roundsPerCore, refM.roundsPerCore, ratio(oursM.roundsPerCore, refM.roundsPerCore))
		fmt.Printf("BENCH ingest_shard_of_%d_datapoints_per_round ours=%.1fdp reference=%.1fdp ratio=%.2f\n", shards,
			float64(oursM.points)/float64(oursM.requests), float64(refM.points)/float64(refM.requests), 1.0)
		fmt.Printf("BENCH ingest_shard_of_%d_heap_per_agent_n%d ours=%.0fB reference=%.0fB ratio=%.2f\n", shards, n,
			oursM.heapPerAgent, refM.heapPerAgent, ratio(oursM.heapPerAgent, refM.heapPerAgent))
		fmt.Printf("BENCH ingest_shard_of_%d_heap_at_rest_per_agent_n%d ours=%.0fB reference=%.0fB ratio=%.2f\n", shards, n,
			oursM.restPerAgent, refM.restPerAgent, ratio(oursM.restPerAgent, refM.restPerAgent))
		return
	}
	fmt.Printf("BENCH ingest_datapoints_per_core_s ours=%.0fdp/s reference=%.0fdp/s ratio=%.2f\n",
		oursM.pointsPerCore, refM.pointsPerCore, ratio(oursM.pointsPerCore, refM.pointsPerCore))
	fmt.Printf("BENCH ingest_agent_rounds_per_core_s ours=%.0frounds/s reference=%.0frounds/s ratio=%.2f\n",
		oursM.roundsPerCore, refM.roundsPerCore, ratio(oursM.roundsPerCore, refM.roundsPerCore))
	// One agent per node sends one batch a round: a core keeps up with rounds/s x interval nodes.
	for _, r := range []time.Duration{time.Second, 10 * time.Second} {
		fmt.Printf("BENCH ingest_nodes_per_core_%s_rounds ours=%.0fnodes reference=%.0fnodes ratio=%.2f\n", r,
			oursM.roundsPerCore*r.Seconds(), refM.roundsPerCore*r.Seconds(), ratio(oursM.roundsPerCore, refM.roundsPerCore))
	}
	fmt.Printf("BENCH ingest_heap_per_agent_n%d ours=%.0fB reference=%.0fB ratio=%.2f\n", n,
		oursM.heapPerAgent, refM.heapPerAgent, ratio(oursM.heapPerAgent, refM.heapPerAgent))
	fmt.Printf("BENCH ingest_heap_at_rest_per_agent_n%d ours=%.0fB reference=%.0fB ratio=%.2f\n", n,
		oursM.restPerAgent, refM.restPerAgent, ratio(oursM.restPerAgent, refM.restPerAgent))
	t.Logf("setting: %d agents, %v rounds, %d data points a round each (K=%d rotating + M=%d stable pod targets, ICMP x%d), %v window; "+
		"gateway busy %.2f cores, reference %.2f cores; the client (all agents, this process) used %.2f and %.2f cores",
		n, interval, 6*(syntheticagent.ShippedK+syntheticagent.ShippedStablePeers), syntheticagent.ShippedK, syntheticagent.ShippedStablePeers, syntheticagent.ShippedICMPCount, window,
		oursM.cores, refM.cores, oursM.clientCPU/window.Seconds(), refM.clientCPU/window.Seconds())
}

// reportSeries counts the series the gateway exports, from the exporters' own output (the
// prometheus exporter's /metrics for the per-pair families, the internal telemetry for the
// per-target gauges), against what the scale simulation computes for the same cluster:
// 27 per stable pair and 3 per target (docs/telemetry-contract.md). The simulation's
// series figures at 65,000 nodes are that arithmetic; this is where it meets an exporter.
func reportSeries(t *testing.T, gw *collector, n int) {
	t.Helper()
	const pairSeries, targetSeries = 27, 3 // scalesim.Config's defaults
	exported := gw.scrape(t, "8889")
	tel := gw.telemetry(t)
	perPair, perTarget := 0, 0
	families := map[string]int{}
	for k := range exported {
		name, _, _ := strings.Cut(k, "{")
		if strings.HasPrefix(name, "netpulse_") {
			perPair++
			families[name]++
		}
	}
	for k := range tel {
		name, _, _ := strings.Cut(k, "{")
		switch name {
		case "otelcol_pod_network_health_target_reachable", "otelcol_pod_network_health_target_failing_observers", "otelcol_pod_network_health_target_loss_ratio":
			perTarget++
		}
	}
	// Every agent has syntheticagent.ShippedStablePeers stable peers, one address family; every agent pod
	// is some agent's target within the run (K rotating of n-1 a round).
	stablePairs := n * syntheticagent.ShippedStablePeers
	computed := stablePairs*pairSeries + n*targetSeries
	counted := perPair + perTarget
	t.Logf("exported series: %d per-pair (%d stable pairs x %d computed) in families %v; %d per-target (%d targets x %d computed)",
		perPair, stablePairs, pairSeries, families, perTarget, n, targetSeries)
	fmt.Printf("BENCH ingest_series_counted_n%d ours=%dseries reference=%dseries ratio=%.3f\n", n, counted, computed, float64(counted)/float64(computed))
	if perPair == 0 || perTarget == 0 {
		t.Errorf("no series exported (per-pair %d, per-target %d)", perPair, perTarget)
	}
}

// startGateway runs otelcol-netpulse with deploy/agent-gateway/config/gateway.yaml as the
// Deployment runs it, plus the pprof extension (idle but for the heap reads), at gwIP, and
// waits until it is healthy and holds the Lease.
func startGateway(ctx context.Context, t *testing.T, cl *benchCluster, bin, gwIP string, baseEnv []string, shards int, readBuffer, writeBuffer string) *collector {
	t.Helper()
	const gwName = "netpulse-gateway-bench-0"
	cl.createGatewayPod(ctx, t, gwName)
	extra := filepath.Join(cl.dir, "pprof.yaml")
	extraYAML := "extensions:\n  pprof:\n    endpoint: ${env:POD_IP}:1777\nservice:\n  extensions: [health_check, k8s_token_auth, grpc_admission, pprof]\n"
	if shards > 1 {
		extraYAML += fmt.Sprintf("exporters:\n  pod_network_health:\n    shard:\n      count: %d\n      index: 0\n", shards)
	}
	// NETPULSE_INGEST_MAX_IN_FLIGHT overrides grpc_admission's bound (gateway.yaml's otherwise).
	if v := os.Getenv("NETPULSE_INGEST_MAX_IN_FLIGHT"); v != "" {
		extraYAML = strings.Replace(extraYAML, "extensions:\n", "extensions:\n  grpc_admission:\n    max_in_flight: "+v+"\n", 1)
	}
	if readBuffer != "" || writeBuffer != "" {
		extraYAML += "receivers:\n  otlp:\n    protocols:\n      grpc:" + readBufferYAML(readBuffer, "        ") +
			bufferYAML("write_buffer_size", writeBuffer, "        ") + "\n"
	}
	if err := os.WriteFile(extra, []byte(extraYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startCollector(t, "gateway (otelcol-netpulse, gateway.yaml)", "gateway", gwIP,
		[]string{bin, "--config", kubetest.DeployPath("agent-gateway", "config", "gateway.yaml"), "--config", extra},
		append(slices.Clone(baseEnv), "POD_NAME="+gwName, "POD_NAMESPACE="+namespace, "POD_IP="+gwIP,
			"NETPULSE_K8S_AUTH=kubeConfig", "KUBECONFIG="+cl.gwKubeconfig,
			"NETPULSE_TLS_CERT_FILE="+cl.tls.CertFile, "NETPULSE_TLS_KEY_FILE="+cl.tls.KeyFile),
		filepath.Join(cl.dir, "gateway.log"))
	gw.waitReady(t, "http://"+net.JoinHostPort(gwIP, "13133")+"/", 90*time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for sum(gw.telemetry(t), "otelcol_pod_network_health_is_leader") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not take the Lease\n%s", gw.proc.LogTail(30))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return gw
}
