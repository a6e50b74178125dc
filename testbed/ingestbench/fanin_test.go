// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/testbed/disttest"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// TestIngestFanIn: one gateway, or S relaying gateway shards, at fan-in (issue #39 item 5). Where TestIngestBench compares
// the gateway with otlp -> nop at a rate, this holds N agents' connections on the one
// gateway at the shipped agent's 10 s rounds, with gateway.yaml untouched (its keepalive
// and 60 s max_connection_age, so every connection is re-made, TLS and all, once a minute
// during the window), and reads what an operator sizes a replica by: the process's
// resident set (VmRSS, and its peak VmHWM) rather than the Go heap, its CPU time over the
// whole window, the GC's share of that CPU (from GODEBUG=gctrace=1 lines in the gateway's
// log), the requests accepted and refused, the agents' export latency (client side,
// accepted requests) and how long until every agent has had a round accepted. Each agent
// already dials from a loopback address of its own (agentIP), so N is not bounded by one
// source address's ephemeral ports; it is bounded by the file descriptor limit of this
// process and the gateway (one descriptor per connection on each side).
//
// NETPULSE_INGEST_AGENTS (default 2000), NETPULSE_INGEST_INTERVAL (default 10s),
// NETPULSE_INGEST_WINDOW (default 5m), NETPULSE_INGEST_ADMIT_TIMEOUT (default 10m) and
// NETPULSE_INGEST_GOMEMLIMIT (default the Deployment's 400MiB) tune it.
// NETPULSE_INGEST_RESTART_DOWN=D (e.g. 30s) adds issue #39 item 6's question, a gateway
// restart at fan-in: the agents send through a model of the shipped exporter (its queue,
// consumers and retries, read from agent.yaml: exporterModel), and after the window the
// gateway is stopped (SIGTERM, as the kubelet does), left down for D and started again on
// the same address; reported are how long until every agent has a request accepted again,
// the most attempts the agents made in one second (those failing in the agent while gRPC
// waits to reconnect included) against the steady N/interval, the most accepted in one second,
// the rounds lost, the new gateway's CPU and RSS while the fleet comes back, and its token
// verifications and TokenReviews (verification is local: none is expected).
// NETPULSE_INGEST_AGENT_CONSUMERS and NETPULSE_INGEST_AGENT_MAX_DELAY override the model's
// consumers and reconnection backoff cap (agent.yaml's otherwise; 0s: gRPC's default), and
// NETPULSE_INGEST_MAX_IN_FLIGHT the gateway's grpc_admission bound (gateway.yaml's otherwise).
// The run stops (fails) when the machine's MemAvailable falls below
// NETPULSE_INGEST_MIN_AVAILABLE_MB (default 6144), so that a too-large N does not swap or
// OOM a shared machine.
//
// NETPULSE_INGEST_RELAY_SHARDS=S (S >= 2; unset or 1: the one unsharded gateway above) is
// issue #39 item 5's question for relaying shards (docs/sharding.md, One connection per
// agent), which no run had measured at real fan-in: S otelcol-netpulse processes, each
// with the gateway configuration the Helm chart renders for gateway.shards=S,
// gateway.relay=true (netpulse.relayGatewayConfig, rendered with bin/helm as the sharded
// end-to-end pass does: testbed/helmtest), each on a loopback address of its own (so its
// OTLP, :8888 telemetry, prometheus exporter and health ports do not collide), with its own
// serving certificate from one gateway CA, NETPULSE_SHARD_INDEX, the other shards' addresses
// as relay endpoints, and for the relay a token of its own Pod (the gateway's service
// account, the gateway audience) that the other shards' k8s_token_auth accepts as a
// relay_service_accounts identity; each holds its own shard's Lease. Each of the
// NETPULSE_INGEST_AGENTS agents (the total) connects to ONE shard only, the one that owns
// its own node (internal/shard.Of, the mapping pod_probe and the gateway use), and sends
// it its whole round, every point stamped with its target's shard (netpulse.shard, as
// pod_probe's shards: S does), plus its heartbeat; that shard judges its own targets and
// relays the rest to their owners. Reported per shard (and as BENCH lines): its agents, RSS
// (VmRSS, max, VmHWM), CPU over the window (per agent request, and per request with the
// relayed ones), the GC's share, its agents' requests accepted and failed and their export
// latency p50/p99, its relay's points forwarded to each owner and dropped
// (otelcol_pod_network_health_relay_datapoints), and the other shards' forwarded requests
// and points it accepted (its k8s_token_auth accepted requests and receiver accepted points
// beyond its own agents': the relay has no request counter of its own, and with S = 2 this
// is the other shard's forwarded request rate); overall the rounds accepted/offered and the
// latency. The run fails when a shard's agents lose more than 10% of their rounds, a shard
// refuses points, forwards nothing to another or drops any in the window, or when an owner
// shows nothing it could have had only through the relay: PodNetworkHealth objects it
// wrote whose observer is connected to another shard, and such observers' series in its
// prometheus exporter (and none of another shard's targets there).
// NETPULSE_INGEST_RESTART_DOWN is not supported with it (the test says so and fails).
func TestIngestFanIn(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") != "1" {
		t.Skip("a benchmark: NETPULSE_BENCH=1 runs it")
	}
	n := envInt(t, "NETPULSE_INGEST_AGENTS", 2000)
	interval := envDuration(t, "NETPULSE_INGEST_INTERVAL", 10*time.Second)
	window := envDuration(t, "NETPULSE_INGEST_WINDOW", 5*time.Minute)
	admitTimeout := envDuration(t, "NETPULSE_INGEST_ADMIT_TIMEOUT", 10*time.Minute)
	minAvailable := float64(envInt(t, "NETPULSE_INGEST_MIN_AVAILABLE_MB", 6144)) * (1 << 20)
	restartDown := envDuration(t, "NETPULSE_INGEST_RESTART_DOWN", 0)
	relayShards := relayShardCount(t)
	if relayShards > 1 && restartDown > 0 {
		t.Fatalf("%s=%d and NETPULSE_INGEST_RESTART_DOWN=%v: a restart is measured with the one unsharded gateway only; unset one of them", relayShardsEnv, relayShards, restartDown)
	}
	ctx := context.Background()
	bin := disttest.Collector(t)
	// The Deployment's GOMEMLIMIT (400MiB, under its 512Mi limit) unless
	// NETPULSE_INGEST_GOMEMLIMIT says otherwise: what a larger memory limit would buy.
	memLimit := "400MiB"
	if v := os.Getenv("NETPULSE_INGEST_GOMEMLIMIT"); v != "" {
		memLimit = v
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GOMEMLIMIT=" + memLimit, "GODEBUG=gctrace=1"}
	if relayShards > 1 {
		fanInRelay(ctx, t, relayRun{shards: relayShards, n: n, interval: interval, window: window, admitTimeout: admitTimeout,
			minAvailable: minAvailable, memLimit: memLimit, bin: bin, env: env})
		return
	}
	pid := os.Getpid()
	gwIP := net.IPv4(127, 77, byte(pid>>8), byte(pid)|1).String()
	cl := setupCluster(ctx, t, n, gwIP)
	gw := startGateway(ctx, t, cl, bin, gwIP, env, 1, "", "")
	gwPid := gw.proc.Pid()
	t.Logf("gateway idle: RSS %.1f MB", procStatus(gwPid, "VmRSS")/1e6)
	before := gw.telemetry(t)

	var f *fleet
	var err error
	if restartDown > 0 {
		exp := shippedExporter(t)
		exp.consumers = envInt(t, "NETPULSE_INGEST_AGENT_CONSUMERS", exp.consumers)
		exp.maxDelay = envDuration(t, "NETPULSE_INGEST_AGENT_MAX_DELAY", exp.maxDelay)
		t.Logf("the agents send through the exporter model: queue %d, %d consumers, reconnection backoff capped at %v (0: gRPC's 120 s)", exp.queueSize, exp.consumers, exp.maxDelay)
		f, err = startFleetExporting(net.JoinHostPort(gwIP, "4317"), cl.tls.CAPool, cl.agents, interval, exp)
	} else {
		f, err = startFleet(net.JoinHostPort(gwIP, "4317"), cl.tls.CAPool, cl.agents, interval, 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	began := time.Now()
	guard := func(what string) {
		t.Helper()
		if gw.proc.Exited() {
			t.Fatalf("the gateway exited %s: %v\n%s", what, gw.proc.Err(), gw.proc.LogTail(40))
		}
		if avail := memAvailable(); avail < minAvailable {
			t.Fatalf("stopped %s: the machine has %.0f MB available (floor %.0f MB); gateway RSS %.0f MB, %d of %d agents accepted, %d requests failed: %v\n%s",
				what, avail/1e6, minAvailable/1e6, procStatus(gwPid, "VmRSS")/1e6, f.firstOK.Load(), n, f.failed.Load(), f.errors(), gw.proc.LogTail(10))
		}
	}
	lastLog := time.Now()
	for f.firstOK.Load() < int64(n) {
		guard("while the agents were admitted")
		if time.Since(began) > admitTimeout {
			t.Fatalf("only %d of %d agents accepted after %v; %d requests failed: %v\n%s",
				f.firstOK.Load(), n, admitTimeout, f.failed.Load(), f.errors(), gw.proc.LogTail(20))
		}
		if time.Since(lastLog) >= 30*time.Second {
			lastLog = time.Now()
			t.Logf("admission: %d of %d agents accepted after %v, %d requests failed (%v), gateway RSS %.0f MB, %d fds",
				f.firstOK.Load(), n, time.Since(began).Round(time.Second), f.failed.Load(), f.errors(), procStatus(gwPid, "VmRSS")/1e6, fdCount(gwPid))
		}
		time.Sleep(250 * time.Millisecond)
	}
	admitted := time.Since(began)
	failedAdmitting := f.failed.Load()
	t.Logf("all %d agents accepted after %v (%d requests failed meanwhile: %v)", n, admitted.Round(time.Second), failedAdmitting, f.errors())
	time.Sleep(2 * interval) // every agent past its first round

	logOffset := fileSize(gw.proc.LogPath)
	cpu0, err := cpuSeconds(gwPid)
	if err != nil {
		t.Fatal(err)
	}
	self0, req0, pts0, fail0, t0 := selfCPU(), f.okRequests.Load(), f.okPoints.Load(), f.failed.Load(), time.Now()
	f.recordLatency.Store(true)
	var rssMax float64
	for time.Since(t0) < window {
		time.Sleep(min(interval, window-time.Since(t0)))
		guard("in the measured window")
		rssMax = max(rssMax, procStatus(gwPid, "VmRSS"))
	}
	f.recordLatency.Store(false)
	cpu1, err := cpuSeconds(gwPid)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(t0)
	cpu, clientCPU := cpu1-cpu0, selfCPU()-self0
	requests, points, failed := f.okRequests.Load()-req0, f.okPoints.Load()-pts0, f.failed.Load()-fail0
	rss, hwm, fds := procStatus(gwPid, "VmRSS"), procStatus(gwPid, "VmHWM"), fdCount(gwPid)
	gcCPU, gcs := gcTraceCPU(t, gw.proc.LogPath, logOffset)
	f.latMu.Lock()
	lat := slices.Clone(f.latencies)
	f.latMu.Unlock()
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	t.Logf("fan-in: GOMEMLIMIT %s, %d agents (%d gateway fds), %v rounds, %v window: %d requests accepted (%.0f/s of %.0f/s offered), %d failed %v; "+
		"%d data points; gateway CPU %.1f s (%.2f cores), %.0f µs a request; GC %.1f s CPU in %d cycles (%.1f%% of the gateway's CPU); "+
		"RSS %.0f MB at the end, %.0f MB max in the window, VmHWM %.0f MB; export latency p50 %v p99 %v max %v (%d samples); "+
		"client CPU %.2f cores; all agents accepted after %v",
		memLimit, n, fds, interval, elapsed.Round(time.Second), requests, float64(requests)/elapsed.Seconds(), float64(n)/interval.Seconds(), failed, f.errors(),
		points, cpu, cpu/elapsed.Seconds(), cpu/float64(requests)*1e6, gcCPU, gcs, 100*gcCPU/cpu,
		rss/1e6, rssMax/1e6, hwm/1e6, pct(0.5).Round(100*time.Microsecond), pct(0.99).Round(100*time.Microsecond), pct(1).Round(time.Millisecond), len(lat),
		clientCPU/elapsed.Seconds(), admitted.Round(time.Second))
	fmt.Printf("BENCH ingest_fanin_n%d rss=%.0fMB rss_max=%.0fMB vmhwm=%.0fMB cpu_cores=%.3f cpu_per_request=%.0fus gc_share=%.3f "+
		"p50=%.1fms p99=%.1fms accepted=%d failed=%d admitted_after=%.0fs\n",
		n, rss/1e6, rssMax/1e6, hwm/1e6, cpu/elapsed.Seconds(), cpu/float64(requests)*1e6, gcCPU/cpu,
		float64(pct(0.5))/1e6, float64(pct(0.99))/1e6, requests, failed, admitted.Seconds())
	// The figures are out; the gateway's own counters are a check on them (a scrape of a
	// gateway this busy can fail, which is then reported, not fatal).
	after, err := gw.tryScrape("8888")
	if err != nil {
		t.Errorf("the gateway's telemetry after the window: %v", err)
		return
	}
	delta := func(name string) float64 { return sum(after, name) - sum(before, name) }
	for _, l := range matching(after, "admission_refused", "receiver_refused", "exporter_send_failed") {
		t.Logf("gateway telemetry (since start): %s", l)
	}
	if r := delta("otelcol_k8s_net_attributes_admission_refused"); r > 0 {
		t.Errorf("the admission refused %v data points of the agents", r)
	}
	if r := delta("otelcol_receiver_refused_metric_points"); r > 0 {
		t.Errorf("the OTLP receiver refused %v data points", r)
	}
	// As TestIngestBench: a gateway that loses more than 10% of the rounds does not hold N.
	if failed*10 > requests+failed {
		t.Errorf("%d of %d requests failed in the measured window", failed, requests+failed)
	}
	if restartDown > 0 {
		restartAtFanIn(ctx, t, restartRun{cl: cl, bin: bin, gwIP: gwIP, env: env, gw: gw, f: f, n: n, interval: interval,
			down: restartDown, timeout: admitTimeout, minAvailable: minAvailable})
	}
}

type restartRun struct {
	cl             *benchCluster
	bin, gwIP      string
	env            []string
	gw             *collector
	f              *fleet
	n              int
	interval, down time.Duration
	timeout        time.Duration
	minAvailable   float64
}

// restartAtFanIn stops the gateway, leaves it down, starts it again and measures the fleet
// coming back (TestIngestFanIn's NETPULSE_INGEST_RESTART_DOWN).
func restartAtFanIn(ctx context.Context, t *testing.T, r restartRun) {
	f := r.f
	steady := float64(r.n) / r.interval.Seconds()
	failed0, dropped0, ok0 := f.failed.Load(), f.dropped.Load(), f.okRequests.Load()
	stopAt := time.Now()
	if err := r.gw.proc.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart: the gateway stopped %v after SIGTERM; down for %v", time.Since(stopAt).Round(100*time.Millisecond), r.down)
	time.Sleep(r.down)
	startAt := time.Now()
	gw := startGateway(ctx, t, r.cl, r.bin, r.gwIP, r.env, 1, "", "")
	pid := gw.proc.Pid()
	readyAt := time.Now()
	cpu0, err := cpuSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	var rssMax float64
	lastLog := time.Now()
	for f.acceptedSince(startAt) < r.n {
		if gw.proc.Exited() {
			t.Fatalf("the restarted gateway exited: %v\n%s", gw.proc.Err(), gw.proc.LogTail(40))
		}
		if avail := memAvailable(); avail < r.minAvailable {
			t.Fatalf("stopped during the restart: the machine has %.0f MB available; %d of %d agents back", avail/1e6, f.acceptedSince(startAt), r.n)
		}
		if time.Since(startAt) > r.timeout {
			t.Fatalf("only %d of %d agents had a request accepted %v after the restart: %v\n%s", f.acceptedSince(startAt), r.n, r.timeout, f.errors(), gw.proc.LogTail(20))
		}
		rssMax = max(rssMax, procStatus(pid, "VmRSS"))
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			t.Logf("restart: %d of %d agents back after %v, gateway RSS %.0f MB", f.acceptedSince(startAt), r.n, time.Since(startAt).Round(time.Second), procStatus(pid, "VmRSS")/1e6)
		}
		time.Sleep(100 * time.Millisecond)
	}
	backAt := time.Now()
	// Then one more round: the backlog's tail, and the steady state again.
	for time.Since(backAt) < 2*r.interval {
		time.Sleep(time.Second)
		rssMax = max(rssMax, procStatus(pid, "VmRSS"))
	}
	cpu1, err := cpuSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	endAt := time.Now()
	peakSent, peakSentAt := f.peak(&f.attempts, startAt, endAt)
	peakOK, peakOKAt := f.peak(&f.okBySec, startAt, endAt)
	var firstOK time.Time
	for s := int(startAt.Sub(f.born) / time.Second); s < perSecond; s++ {
		if f.okBySec[s].Load() > 0 {
			firstOK = f.born.Add(time.Duration(s) * time.Second)
			break
		}
	}
	failed, dropped, ok := f.failed.Load()-failed0, f.dropped.Load()-dropped0, f.okRequests.Load()-ok0
	tel, err := gw.tryScrape("8888")
	if err != nil {
		t.Errorf("the restarted gateway's telemetry: %v", err)
	}
	reviews, local := sum(tel, "otelcol_k8s_token_auth_token_reviews"), sum(tel, "otelcol_k8s_token_auth_local_verifications")
	t.Logf("restart at fan-in: %d agents, down %v (stop took %v); the new gateway ready (Lease held) %v after its start, the first request accepted in the second %v after it; "+
		"every agent back %v after its start; the agents' attempts in one second (failed in the agent included): peak %d (%.1f× the steady %.0f/s) at +%v, accepted: peak %d at +%v; "+
		"from the stop to one round after all were back: %d accepted, %d failed attempts %v, %d rounds lost (queue full, retries exhausted); "+
		"the new gateway's CPU %.1f s over %v (%.2f cores), RSS max %.0f MB; token verifications: %v local, %v TokenReviews",
		r.n, r.down, startAt.Sub(stopAt).Round(100*time.Millisecond)-r.down, readyAt.Sub(startAt).Round(100*time.Millisecond), firstOK.Sub(startAt).Round(time.Second),
		backAt.Sub(startAt).Round(100*time.Millisecond), peakSent, float64(peakSent)/steady, steady, peakSentAt.Sub(startAt).Round(time.Second), peakOK, peakOKAt.Sub(startAt).Round(time.Second),
		ok, failed, f.errors(), dropped, cpu1-cpu0, endAt.Sub(readyAt).Round(time.Second), (cpu1-cpu0)/endAt.Sub(readyAt).Seconds(), rssMax/1e6, local, reviews)
	fmt.Printf("BENCH ingest_restart_n%d down=%.0fs consumers=%d max_delay=%.0fs back_after=%.1fs peak_sent_per_s=%d peak_ratio=%.2f peak_ok_per_s=%d failed=%d lost=%d cpu_cores=%.3f rss_max=%.0fMB token_reviews=%.0f\n",
		r.n, r.down.Seconds(), f.exp.consumers, f.exp.maxDelay.Seconds(), backAt.Sub(startAt).Seconds(), peakSent, float64(peakSent)/steady, peakOK, failed, dropped, (cpu1-cpu0)/endAt.Sub(readyAt).Seconds(), rssMax/1e6, reviews)
	if reviews > 0 {
		t.Errorf("the restarted gateway made %v TokenReviews: verification is local", reviews)
	}
}

// shippedExporter reads the agent's exporter queue from deploy/agent-gateway/config/agent.yaml
// (exporterhelper's defaults where it says nothing: 1,000 requests, 10 consumers).
func shippedExporter(t *testing.T) exporterModel {
	t.Helper()
	data, err := os.ReadFile(kubetest.DeployPath("agent-gateway", "config", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Extensions struct {
			Backoff *struct {
				MaxDelay string `json:"max_delay"`
			} `json:"grpc_backoff"`
		} `json:"extensions"`
		Exporters struct {
			OTLP struct {
				Queue struct {
					Size      *int `json:"queue_size"`
					Consumers *int `json:"num_consumers"`
				} `json:"sending_queue"`
				Middlewares []struct {
					ID string `json:"id"`
				} `json:"middlewares"`
			} `json:"otlp_grpc"`
		} `json:"exporters"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("agent.yaml: %v", err)
	}
	exp := exporterModel{queueSize: 1000, consumers: 10}
	if q := cfg.Exporters.OTLP.Queue; q.Size != nil {
		exp.queueSize = *q.Size
	}
	if q := cfg.Exporters.OTLP.Queue; q.Consumers != nil {
		exp.consumers = *q.Consumers
	}
	// The grpc_backoff middleware (only max_delay differs from gRPC's defaults there).
	for _, m := range cfg.Exporters.OTLP.Middlewares {
		if m.ID != "grpc_backoff" || cfg.Extensions.Backoff == nil {
			continue
		}
		exp.maxDelay = 10 * time.Second // the extension's default
		if v := cfg.Extensions.Backoff.MaxDelay; v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("agent.yaml: grpc_backoff max_delay: %v", err)
			}
			exp.maxDelay = d
		}
	}
	return exp
}

// procStatus is a kB field of /proc/<pid>/status (VmRSS, VmHWM) in bytes, 0 if unreadable.
func procStatus(pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}

// memAvailable is the machine's MemAvailable (/proc/meminfo) in bytes; +Inf if unreadable.
func memAvailable() float64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				return kb * 1024
			}
		}
	}
	return 1e300
}

// fdCount is the number of open descriptors of pid: about one per agent connection.
func fdCount(pid int) int {
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// gcTraceCPU sums the CPU the Go GC reports in the gctrace lines written to log after
// offset ("gc N @Ts P%: ... ms clock, A+B/C/D+E ms cpu, ...": mark-assist, background,
// idle and the two stop-the-world phases), in seconds, and counts the cycles.
func gcTraceCPU(t *testing.T, log string, offset int64) (float64, int) {
	t.Helper()
	fh, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var ms float64
	cycles := 0
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "gc ") {
			continue
		}
		_, rest, ok := strings.Cut(l, " ms clock, ")
		if !ok {
			continue
		}
		field, _, ok := strings.Cut(rest, " ms cpu")
		if !ok {
			continue
		}
		for _, v := range strings.FieldsFunc(field, func(r rune) bool { return r == '+' || r == '/' }) {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("gctrace line %q: %v", l, err)
			}
			ms += x
		}
		cycles++
	}
	return ms / 1000, cycles
}
