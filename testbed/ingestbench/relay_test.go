// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/extension/k8stokenauthextension/k8stokenauthtest"
	"github.com/netpulse/netpulse/internal/shard"
	"github.com/netpulse/netpulse/testbed/helmtest"
	"github.com/netpulse/netpulse/testbed/testpki"
)

// relayShardsEnv runs TestIngestFanIn against that many relaying gateway shards (>= 2; unset
// or 1: the one unsharded gateway).
const relayShardsEnv = "NETPULSE_INGEST_RELAY_SHARDS"

// relayShardCount is relayShardsEnv's value (1 when unset).
func relayShardCount(t *testing.T) int {
	t.Helper()
	s := envInt(t, relayShardsEnv, 1)
	if s > shard.MaxCount {
		t.Fatalf("%s=%d: at most %d shards", relayShardsEnv, s, shard.MaxCount)
	}
	return s
}

// relayRun is what TestIngestFanIn hands its relaying-shards mode.
type relayRun struct {
	shards, n                  int
	interval, window, admitted time.Duration
	admitTimeout               time.Duration
	minAvailable               float64
	memLimit, bin              string
	env                        []string
}

// relayShard is one relaying shard's process and what is read of it over the window.
type relayShard struct {
	index     int
	ip, pod   string
	gw        *collector
	agents    int
	logOffset int64
	cpu0      float64
	rssMax    float64
	before    map[string]float64
	// The fleet's counters for this shard's agents at the window's start.
	ok0, pts0, fail0 int64
}

// shardIP is shard i's loopback address: its OTLP, telemetry, prometheus and health ports
// are the rendered configuration's fixed ones at ${env:POD_IP}, so each shard has its own
// address (varied by PID, as the unsharded gateway's, so that a concurrent run elsewhere
// does not collide).
func shardIP(i int) string {
	pid := os.Getpid()
	return net.IPv4(127, byte(80+i), byte(pid>>8), byte(pid)|1).String()
}

// shardServing is the gateway CA and a serving certificate per shard, valid for that shard's
// address and the names the chart's certificate carries for it.
type shardServing struct {
	caFile        string
	pool          *x509.CertPool
	certFs, keyFs []string
}

func writeShardTLS(t *testing.T, dir string, shards int) *shardServing {
	t.Helper()
	ca, err := testpki.NewCA("netpulse-gateway-ca")
	if err != nil {
		t.Fatal(err)
	}
	s := &shardServing{caFile: filepath.Join(dir, "ca.crt"), pool: ca.Pool()}
	if err := os.WriteFile(s.caFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range shards {
		hosts := []string{shardIP(i), fmt.Sprintf("netpulse-gateway-%d.%s.svc", i, namespace), "netpulse-gateway-relay." + namespace + ".svc"}
		certPEM, keyPEM, err := ca.Issue(cert.Config{CommonName: fmt.Sprintf("netpulse-gateway-%d", i), AltNames: testpki.AltNames(hosts...),
			Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if err != nil {
			t.Fatal(err)
		}
		c, k := filepath.Join(dir, fmt.Sprintf("shard-%d.crt", i)), filepath.Join(dir, fmt.Sprintf("shard-%d.key", i))
		for path, data := range map[string][]byte{c: certPEM, k: keyPEM} {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s.certFs, s.keyFs = append(s.certFs, c), append(s.keyFs, k)
	}
	return s
}

// renderRelayGateway renders the chart's gateway configuration for gateway.shards=shards,
// gateway.relay=true (its netpulse.relayGatewayConfig: shard index, relay endpoints, relay
// token and CA, relay_service_accounts, keep_relayed_identity, filter/own_shard) with the
// pinned bin/helm, as the sharded end-to-end pass does; the ${env:...} placeholders stay.
func renderRelayGateway(t *testing.T, dir string, shards int) string {
	t.Helper()
	helmBin, err := helmtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	chartDir, err := helmtest.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"gateway": map[string]any{"shards": shards, "relay": true}}
	_, gwPath, err := helmtest.RenderCollectorConfigs(helmBin, chartDir, values, dir)
	if err != nil {
		t.Fatalf("rendering the chart's relaying shard configuration: %v", err)
	}
	data, err := os.ReadFile(gwPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"relay:", "NETPULSE_RELAY_ENDPOINT_1", "bearertokenauth/relay", "relay_service_accounts", "keep_relayed_identity: true", "filter/own_shard"} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("the chart's gateway configuration for gateway.shards=%d, gateway.relay=true has no %q:\n%s", shards, want, data)
		}
	}
	return gwPath
}

// startRelayShards runs r.shards otelcol-netpulse processes, each as the chart's Deployment
// of a relaying shard runs it: the rendered configuration, NETPULSE_SHARD_INDEX, the other
// shards' addresses as relay endpoints, a serving certificate of its own, and a token of
// its own Pod (the gateway's service account, the gateway audience) for the relay, which
// the other shards' k8s_token_auth accepts as relay_service_accounts. It waits until each
// is healthy and holds its shard's Lease.
func startRelayShards(ctx context.Context, t *testing.T, cl *benchCluster, r relayRun) ([]*relayShard, *shardServing) {
	t.Helper()
	dir := filepath.Join(cl.dir, "shards")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	config := renderRelayGateway(t, dir, r.shards)
	tlsFiles := writeShardTLS(t, dir, r.shards)
	cs, err := cl.cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	var relayEnv []string
	for i := range r.shards {
		relayEnv = append(relayEnv, fmt.Sprintf("NETPULSE_RELAY_ENDPOINT_%d=%s", i, net.JoinHostPort(shardIP(i), "4317")))
	}
	shards := make([]*relayShard, r.shards)
	for i := range r.shards {
		s := &relayShard{index: i, ip: shardIP(i), pod: fmt.Sprintf("netpulse-gateway-%d-bench", i)}
		cl.createGatewayPod(ctx, t, s.pod)
		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, s.pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		token, err := k8stokenauthtest.PodToken(ctx, cs, pod, []string{audience}, 3600)
		if err != nil {
			t.Fatal(err)
		}
		tokenFile := filepath.Join(dir, fmt.Sprintf("relay-token-%d", i))
		if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		env := append(slices.Clone(r.env), relayEnv...)
		env = append(env, "POD_NAME="+s.pod, "POD_NAMESPACE="+namespace, "POD_IP="+s.ip,
			"NETPULSE_K8S_AUTH=kubeConfig", "KUBECONFIG="+cl.gwKubeconfig, "NETPULSE_SHARD_INDEX="+strconv.Itoa(i),
			"NETPULSE_TLS_CERT_FILE="+tlsFiles.certFs[i], "NETPULSE_TLS_KEY_FILE="+tlsFiles.keyFs[i],
			"NETPULSE_RELAY_TOKEN_FILE="+tokenFile, "NETPULSE_RELAY_CA_FILE="+tlsFiles.caFile)
		s.gw = startCollector(t, fmt.Sprintf("shard %d of %d (otelcol-netpulse, the chart's relaying shard)", i, r.shards), fmt.Sprintf("shard-%d", i), s.ip,
			[]string{r.bin, "--config", config}, env, filepath.Join(cl.dir, fmt.Sprintf("shard-%d.log", i)))
		shards[i] = s
	}
	for _, s := range shards {
		s.gw.waitReady(t, "http://"+net.JoinHostPort(s.ip, "13133")+"/", 90*time.Second)
		deadline := time.Now().Add(60 * time.Second)
		for sum(s.gw.telemetry(t), "otelcol_pod_network_health_is_leader") != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("shard %d did not take its Lease\n%s", s.index, s.gw.proc.LogTail(30))
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Logf("shard %d at %s: leader of netpulse-gateway-%d, RSS idle %.1f MB", s.index, s.ip, s.index, procStatus(s.gw.proc.Pid(), "VmRSS")/1e6)
	}
	return shards, tlsFiles
}

// tsum is sum over a counter's name with and without the Prometheus _total suffix.
func tsum(tel map[string]float64, name string, labels ...string) float64 {
	return sum(tel, name, labels...) + sum(tel, name+"_total", labels...)
}

// shardFigures is one shard's figures over the measured window.
type shardFigures struct {
	cpu, gcCPU                   float64
	gcs                          int
	rss, hwm                     float64
	fds                          int
	requests, points, failed     int64 // its agents' requests, as they saw them
	forwarded, dropped           float64
	queueFull, sendFailed        float64
	forwardedTo                  []float64
	authAccepted, recvPoints     float64
	relayRequestsIn, relayPtsIn  float64
	admissionRefused, rcvRefused float64
	grpcRefused, authRejected    float64
	p50, p99                     time.Duration
	after                        map[string]float64
}

// fanInRelay is TestIngestFanIn with relaying shards (relayShardsEnv).
func fanInRelay(ctx context.Context, t *testing.T, r relayRun) {
	cl := setupCluster(ctx, t, r.n)
	shards, tlsFiles := startRelayShards(ctx, t, cl, r)
	endpoints := make([]string, r.shards)
	for i, s := range shards {
		endpoints[i] = net.JoinHostPort(s.ip, "4317")
	}
	f, err := startRelayFleet(endpoints, tlsFiles.pool, cl.agents, r.interval)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	for _, s := range f.shardOf {
		shards[s].agents++
	}
	for _, s := range shards {
		if s.agents == 0 {
			t.Fatalf("no agent's node belongs to shard %d of %d: more agents needed", s.index, r.shards)
		}
	}
	began := time.Now()
	guard := func(what string) {
		t.Helper()
		for _, s := range shards {
			if s.gw.proc.Exited() {
				t.Fatalf("shard %d exited %s: %v\n%s", s.index, what, s.gw.proc.Err(), s.gw.proc.LogTail(40))
			}
		}
		if avail := memAvailable(); avail < r.minAvailable {
			t.Fatalf("stopped %s: the machine has %.0f MB available (floor %.0f MB); %d of %d agents accepted, %d requests failed: %v",
				what, avail/1e6, r.minAvailable/1e6, f.firstOK.Load(), r.n, f.failed.Load(), f.errors())
		}
	}
	perShard := func(get func(*shardCounts) int64) string {
		var parts []string
		for i := range f.byShard {
			parts = append(parts, fmt.Sprintf("shard %d: %d of %d", i, get(&f.byShard[i]), shards[i].agents))
		}
		return strings.Join(parts, ", ")
	}
	lastLog := time.Now()
	for f.firstOK.Load() < int64(r.n) {
		guard("while the agents were admitted")
		if time.Since(began) > r.admitTimeout {
			t.Fatalf("only %d of %d agents accepted after %v (%s); %d requests failed: %v",
				f.firstOK.Load(), r.n, r.admitTimeout, perShard(func(c *shardCounts) int64 { return c.firstOK.Load() }), f.failed.Load(), f.errors())
		}
		if time.Since(lastLog) >= 30*time.Second {
			lastLog = time.Now()
			t.Logf("admission: %d of %d agents accepted after %v (%s), %d requests failed (%v)",
				f.firstOK.Load(), r.n, time.Since(began).Round(time.Second), perShard(func(c *shardCounts) int64 { return c.firstOK.Load() }), f.failed.Load(), f.errors())
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.admitted = time.Since(began)
	t.Logf("all %d agents accepted after %v, each by its own node's shard (%s); %d requests failed meanwhile: %v",
		r.n, r.admitted.Round(time.Second), perShard(func(c *shardCounts) int64 { return c.firstOK.Load() }), f.failed.Load(), f.errors())
	time.Sleep(2 * r.interval) // every agent past its first round

	figs, elapsed, clientCPU := measureRelayWindow(t, r, shards, f, guard)
	reportRelay(t, r, shards, f, figs, elapsed, clientCPU)
	checkRelay(ctx, t, r, cl, shards, f, figs)
}

// measureRelayWindow reads every shard's CPU, RSS, GC and telemetry and the agents' requests
// over r.window.
func measureRelayWindow(t *testing.T, r relayRun, shards []*relayShard, f *fleet, guard func(string)) ([]shardFigures, time.Duration, float64) {
	t.Helper()
	for _, s := range shards {
		var err error
		s.logOffset = fileSize(s.gw.proc.LogPath)
		if s.cpu0, err = cpuSeconds(s.gw.proc.Pid()); err != nil {
			t.Fatal(err)
		}
		if s.before, err = s.gw.tryScrape("8888"); err != nil {
			t.Fatalf("shard %d's telemetry before the window: %v", s.index, err)
		}
		c := &f.byShard[s.index]
		s.ok0, s.pts0, s.fail0 = c.okRequests.Load(), c.okPoints.Load(), c.failed.Load()
	}
	self0, t0 := selfCPU(), time.Now()
	f.recordLatency.Store(true)
	for time.Since(t0) < r.window {
		time.Sleep(min(r.interval, r.window-time.Since(t0)))
		guard("in the measured window")
		for _, s := range shards {
			s.rssMax = max(s.rssMax, procStatus(s.gw.proc.Pid(), "VmRSS"))
		}
	}
	f.recordLatency.Store(false)
	figs := make([]shardFigures, len(shards))
	for _, s := range shards {
		fg := &figs[s.index]
		cpu1, err := cpuSeconds(s.gw.proc.Pid())
		if err != nil {
			t.Fatal(err)
		}
		c := &f.byShard[s.index]
		fg.requests, fg.points, fg.failed = c.okRequests.Load()-s.ok0, c.okPoints.Load()-s.pts0, c.failed.Load()-s.fail0
		fg.cpu = cpu1 - s.cpu0
		// The figures first; the scrape of a busy shard can fail, and is then reported.
		if fg.after, err = s.gw.tryScrape("8888"); err != nil {
			t.Errorf("shard %d's telemetry after the window: %v", s.index, err)
			fg.after = s.before
		}
	}
	elapsed, clientCPU := time.Since(t0), selfCPU()-self0
	f.latMu.Lock()
	lat, latShard := slices.Clone(f.latencies), slices.Clone(f.latShard)
	f.latMu.Unlock()
	for _, s := range shards {
		fg := &figs[s.index]
		pid := s.gw.proc.Pid()
		fg.rss, fg.hwm, fg.fds = procStatus(pid, "VmRSS"), procStatus(pid, "VmHWM"), fdCount(pid)
		fg.gcCPU, fg.gcs = gcTraceCPU(t, s.gw.proc.LogPath, s.logOffset)
		var mine []time.Duration
		for k, d := range lat {
			if latShard[k] == s.index {
				mine = append(mine, d)
			}
		}
		fg.p50, fg.p99 = percentile(mine, 0.5), percentile(mine, 0.99)
		delta := func(name string, labels ...string) float64 {
			return tsum(fg.after, name, labels...) - tsum(s.before, name, labels...)
		}
		fg.forwardedTo = make([]float64, len(shards))
		for j := range shards {
			fg.forwardedTo[j] = delta("otelcol_pod_network_health_relay_datapoints", fmt.Sprintf(`relay_shard="%d"`, j), `relay_outcome="forwarded"`)
			fg.forwarded += fg.forwardedTo[j]
		}
		fg.queueFull = delta("otelcol_pod_network_health_relay_datapoints", `relay_outcome="queue_full"`)
		fg.sendFailed = delta("otelcol_pod_network_health_relay_datapoints", `relay_outcome="send_failed"`)
		fg.dropped = fg.queueFull + fg.sendFailed
		// Requests and points this shard accepted beyond its own agents': the other shards'
		// forwarded batches (one Authenticate call per OTLP request; the relay has no
		// counter of its requests).
		fg.authAccepted = delta("otelcol_k8s_token_auth_requests", `result="accepted"`)
		fg.recvPoints = delta("otelcol_receiver_accepted_metric_points")
		fg.relayRequestsIn = fg.authAccepted - float64(fg.requests)
		fg.relayPtsIn = fg.recvPoints - float64(fg.points)
		fg.authRejected = delta("otelcol_k8s_token_auth_requests", `result="rejected"`) + delta("otelcol_k8s_token_auth_requests", `result="unavailable"`)
		fg.admissionRefused = delta("otelcol_k8s_net_attributes_admission_refused")
		fg.rcvRefused = delta("otelcol_receiver_refused_metric_points")
		fg.grpcRefused = delta("otelcol_grpc_admission_refused")
	}
	return figs, elapsed, clientCPU
}

// promLabels parses the labels of a series key (`a="x",b="y"}`); values hold no quotes here.
func promLabels(labels string) map[string]string {
	out := map[string]string{}
	for rest := strings.TrimSuffix(labels, "}"); rest != ""; {
		k, v, ok := strings.Cut(rest, `="`)
		if !ok {
			break
		}
		val, after, _ := strings.Cut(v, `"`)
		out[k] = val
		rest = strings.TrimPrefix(after, ",")
	}
	return out
}

// relayLogLines are up to limit of the lines of a shard's log (from offset) that its relay
// wrote (forwarding failures, a full queue), for the report.
func relayLogLines(path string, offset int64, limit int) []string {
	data, err := os.ReadFile(path)
	if err != nil || offset > int64(len(data)) {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(data[offset:]), "\n") {
		if strings.Contains(l, "relay: ") && len(out) < limit {
			out = append(out, l)
		}
	}
	return out
}

// percentile of sorted-in-place samples (0 without any).
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, int(p*float64(len(lat))))]
}

// reportRelay logs and prints (BENCH lines) each shard's figures and the fleet's.
func reportRelay(t *testing.T, r relayRun, shards []*relayShard, f *fleet, figs []shardFigures, elapsed time.Duration, clientCPU float64) {
	t.Helper()
	secs := elapsed.Seconds()
	var requests, failed int64
	for _, s := range shards {
		fg := &figs[s.index]
		requests += fg.requests
		failed += fg.failed
		all := float64(fg.requests) + fg.relayRequestsIn
		t.Logf("shard %d of %d: %d agents (%d fds); their requests %d accepted (%.1f/s of %.1f/s offered), %d failed; export latency p50 %v p99 %v; "+
			"CPU %.1f s (%.3f cores), %.0f µs an agent request, %.0f µs a request with the relayed ones; GC %.1f s in %d cycles (%.1f%%); "+
			"RSS %.0f MB at the end, %.0f MB max in the window, VmHWM %.0f MB; "+
			"relay out: %.0f points forwarded (%.0f/s; per owner %v), %.0f dropped; relay in: %.0f requests (%.2f/s, %.1f points each), %.0f points (accepted %.0f requests, %.0f points in all); "+
			"refused: %.0f by admission, %.0f by the receiver, %.0f by grpc_admission, %.0f tokens not accepted",
			s.index, r.shards, s.agents, fg.fds, fg.requests, float64(fg.requests)/secs, float64(s.agents)/r.interval.Seconds(), fg.failed,
			fg.p50.Round(100*time.Microsecond), fg.p99.Round(100*time.Microsecond),
			fg.cpu, fg.cpu/secs, fg.cpu/float64(fg.requests)*1e6, fg.cpu/all*1e6, fg.gcCPU, fg.gcs, 100*fg.gcCPU/fg.cpu,
			fg.rss/1e6, s.rssMax/1e6, fg.hwm/1e6,
			fg.forwarded, fg.forwarded/secs, fg.forwardedTo, fg.dropped, fg.relayRequestsIn, fg.relayRequestsIn/secs, fg.relayPtsIn/max(fg.relayRequestsIn, 1), fg.relayPtsIn,
			fg.authAccepted, fg.recvPoints,
			fg.admissionRefused, fg.rcvRefused, fg.grpcRefused, fg.authRejected)
		fmt.Printf("BENCH ingest_relay_fanin_s%d_n%d_shard%d agents=%d rss=%.0fMB rss_max=%.0fMB vmhwm=%.0fMB cpu_cores=%.3f cpu_per_agent_request=%.0fus cpu_per_request=%.0fus gc_share=%.3f "+
			"p50=%.1fms p99=%.1fms accepted=%d offered_per_s=%.1f accepted_per_s=%.1f failed=%d fwd_points=%.0f fwd_points_per_s=%.1f dropped=%.0f "+
			"relay_requests_in=%.0f relay_requests_in_per_s=%.2f relay_points_in=%.0f fds=%d\n",
			r.shards, r.n, s.index, s.agents, fg.rss/1e6, s.rssMax/1e6, fg.hwm/1e6, fg.cpu/secs, fg.cpu/float64(fg.requests)*1e6, fg.cpu/all*1e6, fg.gcCPU/fg.cpu,
			float64(fg.p50)/1e6, float64(fg.p99)/1e6, fg.requests, float64(s.agents)/r.interval.Seconds(), float64(fg.requests)/secs, fg.failed,
			fg.forwarded, fg.forwarded/secs, fg.dropped, fg.relayRequestsIn, fg.relayRequestsIn/secs, fg.relayPtsIn, fg.fds)
	}
	f.latMu.Lock()
	lat := slices.Clone(f.latencies)
	f.latMu.Unlock()
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	t.Logf("relaying shards at fan-in: %d shards, GOMEMLIMIT %s each, %d agents, %v rounds, %v window: %d requests accepted (%.1f/s of %.1f/s offered), %d failed %v; "+
		"export latency p50 %v p99 %v max %v (%d samples); client CPU %.2f cores; all agents accepted after %v",
		r.shards, r.memLimit, r.n, r.interval, elapsed.Round(time.Second), requests, float64(requests)/secs, float64(r.n)/r.interval.Seconds(), failed, f.errors(),
		p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), percentile(lat, 1).Round(time.Millisecond), len(lat), clientCPU/secs, r.admitted.Round(time.Second))
	fmt.Printf("BENCH ingest_relay_fanin_s%d_n%d accepted=%d failed=%d accepted_per_s=%.1f offered_per_s=%.1f p50=%.1fms p99=%.1fms admitted_after=%.0fs client_cores=%.3f\n",
		r.shards, r.n, requests, failed, float64(requests)/secs, float64(r.n)/r.interval.Seconds(), float64(p50)/1e6, float64(p99)/1e6, r.admitted.Seconds(), clientCPU/secs)
}

// checkRelay fails the run on what can go wrong with relaying shards: rounds lost, points
// refused, a shard that forwarded nothing to another or dropped any, and an owner that
// judged and exported nothing of what only the relay brought it.
func checkRelay(ctx context.Context, t *testing.T, r relayRun, cl *benchCluster, shards []*relayShard, f *fleet, figs []shardFigures) {
	t.Helper()
	for _, s := range shards {
		fg := &figs[s.index]
		if fg.failed*10 > fg.requests+fg.failed {
			t.Errorf("shard %d: %d of %d requests of its agents failed in the measured window", s.index, fg.failed, fg.requests+fg.failed)
		}
		if fg.admissionRefused > 0 || fg.rcvRefused > 0 {
			t.Errorf("shard %d refused data points: %v by the admission, %v by the OTLP receiver", s.index, fg.admissionRefused, fg.rcvRefused)
		}
		for j, fw := range fg.forwardedTo {
			if j != s.index && fw <= 0 {
				t.Errorf("shard %d forwarded no data point to shard %d in the window", s.index, j)
			}
		}
		if fg.dropped > 0 {
			t.Errorf("shard %d's relay dropped %v data points in the window: %v queue full, %v send failed", s.index, fg.dropped, fg.queueFull, fg.sendFailed)
		}
		if fg.relayRequestsIn <= 0 || fg.relayPtsIn <= 0 {
			t.Errorf("shard %d accepted no request beyond its agents' (%v requests, %v points): no relay reached it", s.index, fg.relayRequestsIn, fg.relayPtsIn)
		}
		for _, l := range matching(fg.after, "relay_datapoints", "admission_refused", "receiver_refused", "grpc_admission_refused", "datapoints_skipped") {
			t.Logf("shard %d telemetry (since start): %s", s.index, l)
		}
		for _, l := range relayLogLines(s.gw.proc.LogPath, 0, 3) {
			t.Logf("shard %d log (since start): %s", s.index, l)
		}
	}
	judgedRelayed(ctx, t, r, cl, shards, f)
}

// judgedRelayed checks that each shard, as owner, judged and exported points it could have
// had only through the relay: PodNetworkHealth objects it wrote (netpulse.io/shard
// "<i>-of-<S>") whose observer is an agent connected to another shard, and series of such
// observers in its prometheus exporter's output (filter/own_shard keeps its own targets'
// points only). No object may be labelled with another shard than its target node's.
func judgedRelayed(ctx context.Context, t *testing.T, r relayRun, cl *benchCluster, shards []*relayShard, f *fleet) {
	t.Helper()
	shardOfUID, shardOfPod := map[string]int{}, map[string]int{}
	for i, id := range cl.agents {
		shardOfUID[string(id.pod.UID)] = f.shardOf[i]
		shardOfPod[id.pod.Name] = f.shardOf[i]
	}
	pnh, err := versioned.NewForConfig(cl.cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	judged := make([]int, r.shards)
	var objects, reachable int
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := pnh.NetpulseV1alpha1().PodNetworkHealths("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		clear(judged)
		objects, reachable = len(l.Items), 0
		for k := range l.Items {
			o := &l.Items[k]
			if o.Spec.TargetPodRef == nil {
				continue
			}
			target, ok := shardOfUID[string(o.Spec.TargetPodRef.UID)]
			if !ok {
				continue
			}
			if want := fmt.Sprintf("%d-of-%d", target, r.shards); o.Labels[v1alpha1.LabelShard] != want {
				t.Fatalf("%s (towards a pod of shard %d) labelled %s=%q, want %q", o.Name, target, v1alpha1.LabelShard, o.Labels[v1alpha1.LabelShard], want)
			}
			if src, ok := shardOfUID[string(o.Spec.SourcePodRef.UID)]; ok && src != target {
				judged[target]++
				if o.Status.Reachability == v1alpha1.Reachable {
					reachable++
				}
			}
		}
		if !slices.Contains(judged, 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("PodNetworkHealth: %d objects; written by each owner shard from observers connected to another shard (only through the relay): %v (%d of them Reachable)", objects, judged, reachable)
	for i, n := range judged {
		if n == 0 {
			t.Errorf("shard %d wrote no object of a pair whose observer is connected to another shard: it judged nothing relayed", i)
		}
	}
	for _, s := range shards {
		exported, err := s.gw.tryScrape("8889")
		if err != nil {
			t.Errorf("shard %d's prometheus exporter: %v", s.index, err)
			continue
		}
		relayed, own, foreign := 0, 0, 0
		example := ""
		for k := range exported {
			name, labels, _ := strings.Cut(k, "{")
			if !strings.HasPrefix(name, "netpulse_") {
				continue
			}
			// The observer: the Resource's k8s.pod.name (resource_to_telemetry_conversion);
			// the target: its node, which decides the owner.
			l := promLabels(labels)
			if node := l["destination_k8s_node_name"]; node != "" && shard.Of(node, r.shards) != s.index {
				foreign++
			}
			src, ok := shardOfPod[l["k8s_pod_name"]]
			switch {
			case !ok:
			case src != s.index:
				relayed++
				example = k
			default:
				own++
			}
		}
		t.Logf("shard %d exports %d per-pair series of observers connected to another shard (relayed; e.g. %s) and %d of its own agents'", s.index, relayed, example, own)
		fmt.Printf("BENCH ingest_relay_fanin_s%d_n%d_shard%d_exported relayed_series=%d own_series=%d judged_relayed_objects=%d\n", r.shards, r.n, s.index, relayed, own, judged[s.index])
		if relayed == 0 {
			t.Errorf("shard %d exports no series of an observer connected to another shard", s.index)
		}
		if foreign > 0 {
			t.Errorf("shard %d exports %d series of targets on other shards' nodes (filter/own_shard keeps its own only)", s.index, foreign)
		}
	}
}
