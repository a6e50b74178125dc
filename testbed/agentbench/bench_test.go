// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package agentbench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/testbed/disttest"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/testpki"
)

func envInt(t *testing.T, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a non-negative integer", name, v)
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

func envSizes(t *testing.T, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 || (len(out) > 0 && n <= out[len(out)-1]) {
			t.Fatalf("%s=%q: want increasing node counts of at least 2", name, v)
		}
		out = append(out, n)
	}
	return out
}

// kustomizeResources lists the files of a kustomization's resources.
func kustomizeResources(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, r := range k.Resources {
		files = append(files, filepath.Join(dir, r))
	}
	return files
}

// shippedAgent is what the DaemonSet sets for the collector container.
type shippedAgent struct {
	memoryLimit, memoryRequest int64
	env                        []string // literal env values (GOMEMLIMIT, ...)
	serviceExtensions          []string // agent.yaml's service::extensions
}

func readShipped(t *testing.T, ds *appsv1.DaemonSet) shippedAgent {
	t.Helper()
	var s shippedAgent
	var c *corev1.Container
	for i := range ds.Spec.Template.Spec.Containers {
		if ds.Spec.Template.Spec.Containers[i].Name == "collector" {
			c = &ds.Spec.Template.Spec.Containers[i]
		}
	}
	if c == nil {
		t.Fatal("the agent DaemonSet has no collector container")
	}
	s.memoryLimit = c.Resources.Limits.Memory().Value()
	s.memoryRequest = c.Resources.Requests.Memory().Value()
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			s.env = append(s.env, e.Name+"="+e.Value)
		}
	}
	data, err := os.ReadFile(kubetest.DeployPath("agent-gateway", "config", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Service struct {
			Extensions []string `yaml:"extensions"`
		} `yaml:"service"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	s.serviceExtensions = cfg.Service.Extensions
	return s
}

// referenceConfig: the same binary's floor - an idle OTLP receiver into agent.yaml's
// otlp_grpc exporter (the same TLS, bearer token and sink), agent.yaml's internal
// telemetry, the health check and pprof; no pod_probe, no processors.
func referenceConfig(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(kubetest.DeployPath("agent-gateway", "config", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var agent struct {
		Extensions map[string]any `yaml:"extensions"`
		Exporters  map[string]any `yaml:"exporters"`
		Service    struct {
			Extensions []string       `yaml:"extensions"`
			Telemetry  map[string]any `yaml:"telemetry"`
		} `yaml:"service"`
	}
	if err := yaml.Unmarshal(data, &agent); err != nil {
		t.Fatal(err)
	}
	if agent.Exporters["otlp_grpc"] == nil {
		t.Fatal("agent.yaml has no otlp_grpc exporter")
	}
	agent.Extensions["pprof"] = map[string]any{"endpoint": "${env:POD_IP}:1777"}
	cfg := map[string]any{
		"extensions": agent.Extensions,
		"receivers":  map[string]any{"otlp": map[string]any{"protocols": map[string]any{"grpc": map[string]any{"endpoint": "${env:POD_IP}:4317"}}}},
		"exporters":  map[string]any{"otlp_grpc": agent.Exporters["otlp_grpc"]},
		"service": map[string]any{
			"extensions": append(slices.Clone(agent.Service.Extensions), "pprof"),
			"telemetry":  agent.Service.Telemetry,
			"pipelines":  map[string]any{"metrics": map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"otlp_grpc"}}},
		},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// figures is one collector's measurement at one cluster size.
type figures struct {
	window sample // largest over the window
	gomem  goMem
}

const mib = 1 << 20

// TestAgentBench: the agent's memory at each cluster size against the reference (package
// doc). NETPULSE_AGENTBENCH_NODES (default 30,1000), _PODS_PER_NODE (other pods per node,
// default 3), _WARM (steady state: after the agent's first export, default 150s, past the
// Go runtime's periodic GC at 2 minutes, which lets it return the start-up LISTs'
// transient to the OS), _WINDOW
// (sampled every second, default 30s), _INTERVAL (the probe round; default agent.yaml's),
// _PROFILE_DIR (where the heap profiles go; default a new directory under $TMPDIR), _CACHED=1
// (the binary's pages cached and charged elsewhere, not to the collectors' cgroups).
func TestAgentBench(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") != "1" {
		t.Skip("a benchmark: NETPULSE_BENCH=1 (make bench) runs it")
	}
	sizes := envSizes(t, "NETPULSE_AGENTBENCH_NODES", []int{30, 1000})
	perNode := envInt(t, "NETPULSE_AGENTBENCH_PODS_PER_NODE", 3)
	warm := envDuration(t, "NETPULSE_AGENTBENCH_WARM", 150*time.Second)
	window := envDuration(t, "NETPULSE_AGENTBENCH_WINDOW", 30*time.Second)
	profileDir := os.Getenv("NETPULSE_AGENTBENCH_PROFILE_DIR")
	if profileDir == "" {
		var err error
		if profileDir, err = os.MkdirTemp("", "agentbench-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(profileDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bin := disttest.Collector(t)
	if st, err := os.Stat(bin); err == nil {
		t.Logf("collector %s (%.1f MiB)", bin, float64(st.Size())/mib)
	}

	// Loopback addresses of their own (the shipped config's ports are fixed), varied by
	// PID so that a concurrent run elsewhere does not collide.
	pid := os.Getpid()
	agentIP := net.IPv4(127, 92, byte(pid>>8), byte(pid)|1)
	refIP := net.IPv4(127, 93, byte(pid>>8), byte(pid)|1).String()
	sinkIP := net.IPv4(127, 94, byte(pid>>8), byte(pid)|1).String()

	began := time.Now()
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	files := append([]string{kubetest.DeployPath("crds"), kubetest.DeployPath("agent-gateway", "namespace.yaml")},
		kustomizeResources(t, kubetest.DeployPath("rbac"))...)
	files = append(files, kubetest.DeployPath("agent-gateway", "agent-daemonset.yaml"))
	if err := kubetest.Apply(ctx, cp.Config, files...); err != nil {
		t.Fatal(err)
	}
	fast := rest.CopyConfig(cp.Config)
	fast.QPS, fast.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(fast)
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.EnsureNamespace(ctx, cs, workloadNamespace); err != nil {
		t.Fatal(err)
	}
	ds, err := cs.AppsV1().DaemonSets(namespace).Get(ctx, "netpulse-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shipped := readShipped(t, ds)
	dir := t.TempDir()
	saCfg, err := cp.ServiceAccountConfig(ctx, namespace, agentServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "agent.kubeconfig")
	if err := kubetest.WriteKubeconfig(saCfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	tlsFiles, err := testpki.WriteServing(filepath.Join(dir, "tls"), "agentbench-sink", sinkIP)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "gateway-token")
	if err := os.WriteFile(tokenFile, []byte("agentbench-token"), 0o600); err != nil { // the sink accepts any
		t.Fatal(err)
	}
	sk, err := startSink(net.JoinHostPort(sinkIP, "4317"), tlsFiles.CertFile, tlsFiles.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer sk.stop()

	// What the harness adds to agent.yaml: pprof (idle but for the reads), and what lets the
	// agent probe its loopback peers on this host (package doc).
	overrides := filepath.Join(dir, "overrides.yaml")
	overridesYAML := fmt.Sprintf("extensions:\n  pprof:\n    endpoint: ${env:POD_IP}:1777\n"+
		"receivers:\n  pod_probe:\n    allow_loopback: true\n    icmp:\n      mode: privileged\n"+
		"service:\n  extensions: [%s]\n", strings.Join(append(slices.Clone(shipped.serviceExtensions), "pprof"), ", "))
	if err := os.WriteFile(overrides, []byte(overridesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	refCfg := filepath.Join(dir, "reference.yaml")
	if err := os.WriteFile(refCfg, referenceConfig(t), 0o600); err != nil {
		t.Fatal(err)
	}
	gatewayEnv := []string{
		"NETPULSE_GATEWAY_ENDPOINT=" + net.JoinHostPort(sinkIP, "4317"),
		"NETPULSE_GATEWAY_CA_FILE=" + tlsFiles.CAFile, "NETPULSE_GATEWAY_TOKEN_FILE=" + tokenFile,
	}
	baseEnv := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, shipped.env...)
	if rate := envInt(t, "NETPULSE_AGENTBENCH_MEMPROFILERATE", 0); rate > 0 {
		// For finding where the heap goes, not for the figures: the runtime samples one
		// allocation per 512 KiB by default, too coarse for a heap of a few MiB.
		baseEnv = append(baseEnv, "GODEBUG=memprofilerate="+strconv.Itoa(rate))
	}
	t.Logf("control plane up in %v; the DaemonSet's collector: memory request %d MiB, limit %d MiB, env %v",
		time.Since(began).Round(time.Second), shipped.memoryRequest/mib, shipped.memoryLimit/mib, shipped.env)

	done := 0
	for _, n := range sizes {
		t0 := time.Now()
		if err := grow(ctx, cs, ds, done, n, perNode, agentIP); err != nil {
			t.Fatal(err)
		}
		done = n
		t.Logf("n=%d: %d nodes, %d agent pods, %d other pods in the API (added in %v)", n, n, n, n*perNode, time.Since(t0).Round(time.Second))
		tag := fmt.Sprintf("n%d", n)

		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, fmt.Sprintf("netpulse-agent-%05d", 0), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		agentEnv := append(slices.Clone(baseEnv), gatewayEnv...)
		agentEnv = append(agentEnv, "POD_NAME="+pod.Name, "POD_NAMESPACE="+namespace, "POD_UID="+string(pod.UID),
			"NODE_NAME="+pod.Spec.NodeName, "POD_IP="+agentIP.String(), "POD_IPS="+agentIP.String(),
			"NETPULSE_K8S_AUTH=kubeConfig", "KUBECONFIG="+kubeconfig)
		if iv := os.Getenv("NETPULSE_AGENTBENCH_INTERVAL"); iv != "" {
			agentEnv = append(agentEnv, "NETPULSE_PROBE_INTERVAL="+iv)
		}
		// Each collector runs its own copy of the binary, out of the page cache, so that the
		// pages it reads are charged to its cgroup: a node whose cache no longer holds the
		// image's files (the first start after the pull finds them cached, charged to the
		// runtime's cgroup, and the container's working set is then its anonymous memory).
		// NETPULSE_AGENTBENCH_CACHED=1 runs the built binary as it is, its pages cached and
		// charged elsewhere (the first start after the image was unpacked).
		agentBin, refBin := bin, bin
		if os.Getenv("NETPULSE_AGENTBENCH_CACHED") != "1" {
			agentBin, refBin = coldCopy(t, bin, filepath.Join(dir, "agent-"+tag)), coldCopy(t, bin, filepath.Join(dir, "reference-"+tag))
		}
		agent := startCollector(t, "agent (otelcol-netpulse, agent.yaml)", "agent-"+tag, agentIP.String(), shipped.memoryLimit,
			[]string{agentBin, "--config", kubetest.DeployPath("agent-gateway", "config", "agent.yaml"), "--config", overrides},
			agentEnv, filepath.Join(dir, "agent-"+tag+".log"))
		ref := startCollector(t, "reference (otlp -> otlp_grpc)", "reference-"+tag, refIP, shipped.memoryLimit,
			[]string{refBin, "--config", refCfg}, append(append(slices.Clone(baseEnv), gatewayEnv...), "POD_IP="+refIP),
			filepath.Join(dir, "reference-"+tag+".log"))
		agent.waitReady(t, "http://"+net.JoinHostPort(agentIP.String(), "13133")+"/", 2*time.Minute)
		ref.waitReady(t, "http://"+net.JoinHostPort(refIP, "13133")+"/", time.Minute)

		// Steady state: the agent has exported rounds with reachable peers, then warm more.
		deadline := time.Now().Add(3 * time.Minute)
		for {
			r := sk.report(pod.Name)
			if r.requests > 0 && len(r.targets) > 0 {
				t.Logf("n=%d: first export after %v", n, time.Since(t0).Round(time.Second))
				break
			}
			if time.Now().After(deadline) {
				ps, cg := agent.read(t)
				t.Fatalf("n=%d: the agent exported no probe results within 3 minutes (anonymous %.1f MiB, peak %.1f; cgroup usage %.1f MiB, limit hit %d times, %d major faults)\n%s",
					n, ps.anon/mib, float64(agent.peakAnon.Load())/mib, cg.workingSet/mib, cg.failcnt, cg.majorFaults, agent.proc.LogTail(40))
			}
			agent.read(t) // fails if it exited
			time.Sleep(500 * time.Millisecond)
		}
		for end := time.Now().Add(warm); time.Now().Before(end); time.Sleep(time.Second) {
			agent.read(t) // fails if it exited
			ref.read(t)
		}
		var agentS, refS sample
		for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(time.Second) {
			agentS.add(agent.read(t))
			refS.add(ref.read(t))
		}
		agentF := figures{window: agentS, gomem: agent.goMemory(t)}
		refF := figures{window: refS, gomem: ref.goMemory(t)}
		agent.saveHeapProfile(t, profileDir)
		ref.saveHeapProfile(t, profileDir)

		// The agent did its job meanwhile: every peer it probed answered, at least k + M of
		// them (agent.yaml's k: 3, one stable peer) on distinct addresses.
		r := sk.report(pod.Name)
		var reachable []string
		for target, status := range r.targets {
			if status == 1 {
				reachable = append(reachable, target)
			}
		}
		t.Logf("n=%d: the agent sent %d requests, %d data points; %d of %d probed targets reachable; %d check results",
			n, r.requests, r.points, len(reachable), len(r.targets), sk.logRecords.Load())
		if want := min(4, n-1); len(reachable) < want || len(reachable) != len(r.targets) {
			t.Errorf("n=%d: %d of %d probed targets reachable, want all and at least %d: %v", n, len(reachable), len(r.targets), want, r.targets)
		}

		line := func(metric string, ours, ref float64) {
			fmt.Printf("BENCH agent_%s_%s ours=%.1fMiB reference=%.1fMiB ratio=%.2f\n", metric, tag, ours/mib, ref/mib, ours/ref)
		}
		line("rss", agentF.window.proc.rss, refF.window.proc.rss)
		line("rss_anon", agentF.window.proc.anon, refF.window.proc.anon)
		line("rss_file", agentF.window.proc.file, refF.window.proc.file)
		line("cgroup_working_set", agentF.window.cgroup.workingSet, refF.window.cgroup.workingSet)
		line("rss_anon_peak", float64(agent.peakAnon.Load()), float64(ref.peakAnon.Load()))
		line("cgroup_peak", agentF.window.cgroup.peak, refF.window.cgroup.peak)
		line("go_heap_live", agentF.gomem.heapAlloc, refF.gomem.heapAlloc)
		line("go_sys", agentF.gomem.sys, refF.gomem.sys)
		for _, c := range []struct {
			name     string
			f        figures
			peakAnon int64
		}{{"agent", agentF, agent.peakAnon.Load()}, {"reference", refF, ref.peakAnon.Load()}} {
			f := c.f
			t.Logf("n=%d %s: VmRSS %.1f MiB (anon %.1f, peak since the start %.1f, file %.1f, VmHWM %.1f); cgroup working set %.1f MiB (anon %.1f, peak %.1f, limit %d, hit %d times, %d major faults); "+
				"Go: live heap %.1f MiB, heap in use %.1f, heap from the OS %.1f (released %.1f), stacks %.1f, runtime total %.1f",
				n, c.name, f.window.proc.rss/mib, f.window.proc.anon/mib, float64(c.peakAnon)/mib, f.window.proc.file/mib, f.window.proc.hwm/mib,
				f.window.cgroup.workingSet/mib, f.window.cgroup.anon/mib, f.window.cgroup.peak/mib, shipped.memoryLimit/mib, f.window.cgroup.failcnt, f.window.cgroup.majorFaults,
				f.gomem.heapAlloc/mib, f.gomem.heapInuse/mib, f.gomem.heapSys/mib, f.gomem.heapReleased/mib, f.gomem.stackInuse/mib, f.gomem.sys/mib)
		}
		// The request is the agent's steady state: its anonymous memory. (The cgroup also
		// holds the binary's file pages, up to the limit when nothing else needs them; the
		// kernel reclaims those before it would OOM-kill.)
		if shipped.memoryRequest > 0 && agentF.window.cgroup.anon > float64(shipped.memoryRequest) {
			t.Errorf("n=%d: the agent's anonymous memory %.1f MiB is above the DaemonSet's memory request %d MiB",
				n, agentF.window.cgroup.anon/mib, shipped.memoryRequest/mib)
		}
		if shipped.memoryLimit > 0 && float64(agent.peakAnon.Load()) > 0.9*float64(shipped.memoryLimit) {
			t.Errorf("n=%d: the agent's anonymous memory peaked at %.1f MiB, within 10 %% of the DaemonSet's memory limit %d MiB",
				n, float64(agent.peakAnon.Load())/mib, shipped.memoryLimit/mib)
		}
		agent.stop()
		ref.stop()
	}
	t.Logf("heap profiles in %s", profileDir)
}
