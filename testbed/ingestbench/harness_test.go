// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/extension/k8stokenauthextension/k8stokenauthtest"
	"github.com/netpulse/netpulse/testbed/childproc"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// agentIdentity is one simulated agent: its Pod object (on its own Node), the pod IP it
// sends from, and its pod-bound token for the gateway's audience.
type agentIdentity struct {
	pod   *corev1.Pod
	ip    net.IP
	token string
}

// benchCluster is the control plane with deploy/'s CRDs, namespace, RBAC and agent
// DaemonSet applied, n Nodes and n agent Pods (Running, Ready, a loopback pod IP each)
// with their tokens, the gateway's ServiceAccount kubeconfig and the serving certificate.
type benchCluster struct {
	cp           *kubetest.ControlPlane
	dir          string
	agents       []agentIdentity
	gwKubeconfig string
	tls          *k8stokenauthtest.TLS
}

// agentIP is agent i's pod IP: a loopback address of its own, so that each agent is its
// own peer (k8s_token_auth's per-peer review budget), as pods are.
func agentIP(i int) net.IP { return net.IPv4(127, 1, byte(i/200), byte(10+i%200)) }

func kustomizeResources(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	inResources := false
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "resources:"):
			inResources = true
		case inResources && strings.HasPrefix(strings.TrimSpace(l), "- "):
			files = append(files, filepath.Join(dir, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))))
		case inResources && strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#"):
			inResources = false
		}
	}
	return files
}

func setupCluster(ctx context.Context, t *testing.T, n int, servingIPs ...string) *benchCluster {
	t.Helper()
	began := time.Now()
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	c := &benchCluster{cp: cp, dir: t.TempDir()}
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
	ds, err := cs.AppsV1().DaemonSets(namespace).Get(ctx, "netpulse-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.agents = make([]agentIdentity, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			id, err := createAgent(gctx, cs, ds, i)
			c.agents[i] = id
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	saCfg, err := cp.ServiceAccountConfig(ctx, namespace, gatewayServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	c.gwKubeconfig = filepath.Join(c.dir, "gateway.kubeconfig")
	if err := kubetest.WriteKubeconfig(saCfg, c.gwKubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	if c.tls, err = k8stokenauthtest.WriteTLS(filepath.Join(c.dir, "tls"), servingIPs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane with %d nodes, agent pods and tokens in %v", n, time.Since(began).Round(time.Second))
	return c
}

// createAgent creates agent i's Node (three zones) and its Pod as the DaemonSet controller
// would, plays the kubelet (Running, Ready for an hour, its pod IP) and mints the pod-bound
// token the kubelet would project (audience netpulse-gateway, one hour).
func createAgent(ctx context.Context, cs kubernetes.Interface, ds *appsv1.DaemonSet, i int) (agentIdentity, error) {
	node := fmt.Sprintf("bench-node-%05d", i)
	zone := fmt.Sprintf("zone-%c", 'a'+i%3)
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{
		"kubernetes.io/hostname": node, "topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "region-1",
	}}}, metav1.CreateOptions{}); err != nil {
		return agentIdentity{}, err
	}
	tmpl := ds.Spec.Template
	labels := map[string]string{"pod-template-generation": strconv.FormatInt(ds.Generation, 10)}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("netpulse-agent-%05d", i), Namespace: namespace, Labels: labels, Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = node
	pod, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return agentIdentity{}, err
	}
	ip := agentIP(i)
	since := metav1.NewTime(time.Now().Add(-time.Hour))
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: ip.String(), HostIPs: []corev1.HostIP{{IP: ip.String()}},
		PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}}, StartTime: &since,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: since},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: since},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: since},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: since},
		},
	}
	if pod, err = cs.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return agentIdentity{}, err
	}
	token, err := k8stokenauthtest.PodToken(ctx, cs, pod, []string{audience}, 3600)
	if err != nil {
		return agentIdentity{}, err
	}
	return agentIdentity{pod: pod, ip: ip, token: token}, nil
}

// createGatewayPod creates the Pod object of the gateway replica from the Deployment's
// template, so pod_network_health can label it as the Lease holder (no kubelet runs it).
func (c *benchCluster) createGatewayPod(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	objs, err := kubetest.DecodeFile(kubetest.DeployPath("agent-gateway", "gateway-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
		// A restarted gateway (TestIngestFanIn's restart) finds its Pod there.
		if _, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no Deployment in deploy/agent-gateway/gateway-deployment.yaml")
}

// collector is a running collector process and where to reach its endpoints.
type collector struct {
	name string
	file string // the name in file names
	ip   string
	proc *childproc.Process
}

func startCollector(t *testing.T, name, file, ip string, argv, env []string, logPath string) *collector {
	t.Helper()
	p, err := childproc.Start(childproc.Options{Name: name, Harness: "ingestbench", Argv: argv, Env: env, LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{name: name, file: file, ip: ip, proc: p}
	t.Cleanup(func() { _ = c.proc.Stop(10 * time.Second) })
	return c
}

// waitReady polls url (2xx) or, for a tcp:// address, a TCP connect.
func (c *collector) waitReady(t *testing.T, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c.proc.Exited() {
			t.Fatalf("%s exited: %v\n%s", c.name, c.proc.Err(), c.proc.LogTail(40))
		}
		if addr, ok := strings.CutPrefix(url, "tcp://"); ok {
			if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				_ = conn.Close()
				return
			}
		} else if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode < 300 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready at %s within %v\n%s", c.name, url, timeout, c.proc.LogTail(40))
}

// cpuSeconds is the process's user + system CPU time (/proc/<pid>/stat, clock ticks of
// 1/100 s, which is USER_HZ on every Linux).
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// After "pid (comm) ", utime and stime are the 12th and 13th fields.
	ut, err1 := strconv.ParseFloat(fields[11], 64)
	st, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: %q", pid, s)
	}
	return (ut + st) / 100, nil
}

// rssBytes is the process's resident set (VmRSS).
func rssBytes(pid int) float64 { return procStatus(pid, "VmRSS") }

// heapAfterGC is the collector's live heap: the in-use bytes of the pprof extension's heap
// profile with gc=1, which runs a GC first (inuseBytes; not MemStats.HeapAlloc, which
// counts what was allocated while the profile was written).
func (c *collector) heapAfterGC(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get("http://" + net.JoinHostPort(c.ip, "1777") + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	v, err := inuseBytes(body)
	if err != nil {
		t.Fatalf("%s: the heap profile: %v", c.name, err)
	}
	return v
}

// steadyHeap is the median of n heapAfterGC readings spaced by gap: one reading is the
// retained state plus whatever requests happen to be in flight at that GC, which varies
// by tens of KB per agent from one reading to the next; the median is the typical heap.
func (c *collector) steadyHeap(t *testing.T, n int, gap time.Duration) float64 {
	t.Helper()
	v := make([]float64, n)
	for i := range v {
		if i > 0 {
			time.Sleep(gap)
		}
		v[i] = c.heapAfterGC(t)
	}
	slices.Sort(v)
	return v[n/2]
}

// saveProfile writes the pprof extension's answer at path (a profile) to file.
func (c *collector) saveProfile(t *testing.T, path, file string) {
	resp, err := http.Get("http://" + net.JoinHostPort(c.ip, "1777") + path)
	if err != nil {
		t.Errorf("%s: profile %s: %v", c.name, path, err)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(file, data, 0o644)
	}
	if err != nil {
		t.Errorf("%s: profile %s: %v", c.name, path, err)
	}
}

// telemetry scrapes the collector's own metrics (:8888) as name{labels} -> value.
func (c *collector) telemetry(t *testing.T) map[string]float64 {
	t.Helper()
	return c.scrape(t, "8888")
}

// scrape reads a Prometheus text endpoint of the collector (:8888 its own telemetry, :8889
// the gateway's prometheus exporter) as name{labels} -> value, one entry per series.
func (c *collector) scrape(t *testing.T, port string) map[string]float64 {
	t.Helper()
	out, err := c.tryScrape(port)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryScrape is scrape, returning its error.
func (c *collector) tryScrape(port string) (map[string]float64, error) {
	resp, err := http.Get("http://" + net.JoinHostPort(c.ip, port) + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20) // a line is one series; 1 MiB bounds a label set
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			continue
		}
		out[l[:i]] = v
	}
	return out, sc.Err()
}

// sum adds the series of telemetry whose name is name and whose labels contain every one
// of the label matchers (`key="value"`).
func sum(tel map[string]float64, name string, labels ...string) float64 {
	var s float64
	for k, v := range tel {
		n, rest, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			s += v
		}
	}
	return s
}

// matching lists telemetry series whose name contains sub, for the log.
func matching(tel map[string]float64, subs ...string) []string {
	var out []string
	for k, v := range tel {
		for _, s := range subs {
			if strings.Contains(k, s) {
				out = append(out, fmt.Sprintf("%s %g", k, v))
				break
			}
		}
	}
	return out
}
