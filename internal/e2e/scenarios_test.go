package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/simcluster"
)

// Bounds of the scenarios (rounds are 1s, every agent probes every other one each round).
const (
	convergeTimeout = 60 * time.Second // first full mesh after the agents start
	detectTimeout   = 20 * time.Second // a fault shows everywhere it should
	recoverTimeout  = 20 * time.Second // healed: back to healthy
	lossTimeout     = 60 * time.Second // enough echoes for the loss ratio

	delay = 20 * time.Millisecond
	// Healthy RTTs on a veth are tens of microseconds; "sub-millisecond" is the bound.
	healthyRTT = time.Millisecond

	lossPercent   = 20
	lossMinEchoes = 200 // 3 observers x 2 families x 3 echoes per 1s round: ~12s
	lossMin       = 0.10
	lossMax       = 0.30
)

// healthy is the expectation of a healthy mesh from now on: every agent reports status 1
// for every other agent's IPv4 and IPv6 address, with RTTs.
func (e *env) healthy(name string, start time.Time, rtt pathExpect) *expectation {
	pe := pathExpect{reachable: true}
	pe.minRTT, pe.maxRTT = rtt.minRTT, rtt.maxRTT
	return e.expect(name, start).all(pe, nil)
}

// requireHealthy waits until the current mesh is healthy before a scenario injects its
// fault, so scenarios do not depend on each other's order.
func (e *env) requireHealthy(t *testing.T) {
	t.Helper()
	exp := e.healthy("", time.Now(), pathExpect{})
	e.await(t, "baseline", exp, recoverTimeout)
}

// healOnCleanup makes sure a failed scenario leaves no fault behind for the next one.
func (e *env) healOnCleanup(t *testing.T, node string) {
	t.Cleanup(func() {
		if err := e.cl.Heal(node); err != nil {
			t.Errorf("heal %s: %v", node, err)
		}
	})
}

// TestHealthyMesh: every agent reports status 1 for every other agent's addresses, with
// RTTs, and its Resource names the right pod (uid, name, node, namespace, IP).
func TestHealthyMesh(t *testing.T) {
	e := requireEnv(t)
	exp := e.healthy("healthy-mesh", e.agentsStarted, pathExpect{minRTT: time.Nanosecond, maxRTT: 100 * time.Millisecond})
	// Detection here is the first full mesh, counted from the start of the agents.
	e.await(t, "detect", exp, convergeTimeout)

	// The Resource is the source pod, exactly as the downward API describes it.
	for _, a := range exp.agents {
		seen := false
		for _, x := range e.sink.Series() {
			if x.Key.SourceUID != a.UID {
				continue
			}
			seen = true
			want := simcluster.Source{PodName: a.Pod, PodUID: a.UID, PodIP: a.IPs[0].String(), Namespace: simcluster.Namespace, NodeName: a.Node}
			if x.Source != want {
				t.Errorf("series %v: Resource %+v, want %+v", x.Key, x.Source, want)
			}
			if x.TargetKind != "pod" {
				t.Errorf("series %v: %s=%q, want pod", x.Key, contract.TargetKind, x.TargetKind)
			}
		}
		if !seen {
			t.Errorf("no telemetry from agent %s (uid %s) on %s", a.Pod, a.UID, a.Node)
		}
	}
	// Every series of this mesh has its address family right.
	for _, x := range e.sink.Series() {
		want := "ipv4"
		if ip := net.ParseIP(x.Key.Destination); ip != nil && ip.To4() == nil {
			want = "ipv6"
		}
		if x.NetworkType != want {
			t.Errorf("series %v: %s=%q, want %q", x.Key, contract.NetworkType, x.NetworkType, want)
		}
	}
	// Extension point: with the gateway, also assert here that a PodNetworkHealth object
	// exists for every observed pair and reads Reachable=True.
}

// TestAgentCredentials: the agents run with the netpulse-agent service account and only
// the deploy/rbac rules: they read agent pods in their namespace and nodes, nothing else.
func TestAgentCredentials(t *testing.T) {
	e := requireEnv(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", e.cl.AgentKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Proxy = http.ProxyURL(nil) // the harness only talks to its own addresses
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Pods(simcluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=netpulse-agent"}); err != nil {
		t.Errorf("agent cannot list its peers: %v", err)
	}
	if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("agent cannot list nodes: %v", err)
	}
	for what, call := range map[string]func() error{
		"list pods in default": func() error {
			_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			return err
		},
		"list secrets": func() error {
			_, err := cs.CoreV1().Secrets(simcluster.Namespace).List(ctx, metav1.ListOptions{})
			return err
		},
		"delete a pod": func() error {
			return cs.CoreV1().Pods(simcluster.Namespace).Delete(ctx, "no-such-pod", metav1.DeleteOptions{})
		},
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("agent credentials: %s: got %v, want Forbidden", what, err)
		}
	}
}

// TestPartition: node-2 is cut off. Every other agent reports status 0 with error.type
// timeout for node-2's addresses, node-2's agent reports 0 for every peer, all other pairs
// stay 1. After Heal everything is back to 1.
func TestPartition(t *testing.T) {
	e := requireEnv(t)
	const node = "node-2"
	e.requireHealthy(t)
	e.healOnCleanup(t, node)

	start := time.Now()
	if err := e.cl.Partition(node); err != nil {
		t.Fatal(err)
	}
	exp := e.expect("partition", start).
		all(pathExpect{reachable: false, errorType: contract.ErrorTypeTimeout}, towards(node)).
		all(pathExpect{reachable: false}, from(node)).
		all(pathExpect{reachable: true, stable: true}, not(involves(node)))
	e.await(t, "detect", exp, detectTimeout)
	logErrorTypes(t, e, exp, node)

	start = time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	e.await(t, "recover", e.healthy("partition", start, pathExpect{}), recoverTimeout)
}

// logErrorTypes reports which error.type the partitioned node's own agent sees.
func logErrorTypes(t *testing.T, e *env, exp *expectation, node string) {
	src, _ := exp.agent(node)
	for _, dst := range exp.agents {
		if dst.Node == node {
			continue
		}
		for _, ip := range dst.IPs {
			x, ok := e.sink.Get(simcluster.SeriesKey{SourceUID: src.UID, Destination: ip.String(), Probe: contract.ProbeTypeICMP})
			if ok && len(x.Rounds) > 0 {
				t.Logf("%s→%s (%s): errors %v", node, dst.Node, ip, x.Rounds[len(x.Rounds)-1].Errors)
			}
		}
		return // one peer is enough to show it
	}
}

// TestDelay: node-3 answers echoes 20ms late. The RTTs towards node-3 average >= 20ms,
// every other path stays sub-millisecond (and reachable throughout).
func TestDelay(t *testing.T) {
	e := requireEnv(t)
	const node = "node-3"
	e.requireHealthy(t)
	e.healOnCleanup(t, node)

	start := time.Now()
	if err := e.cl.Delay(node, delay); err != nil {
		t.Fatal(err)
	}
	exp := e.expect("delay", start).
		all(pathExpect{reachable: true, stable: true, minRTT: delay, maxRTT: delay + 80*time.Millisecond}, towards(node)).
		all(pathExpect{reachable: true, stable: true, maxRTT: healthyRTT}, not(towards(node)))
	// Averages must not mix in replies from before the fault: rounds last < 1s.
	exp.window = start.Add(probeInterval)
	e.await(t, "detect", exp, detectTimeout)
	logMeanRTTs(t, e, exp, node)

	start = time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	rec := e.healthy("delay", start, pathExpect{maxRTT: healthyRTT})
	rec.window = start.Add(probeInterval)
	e.await(t, "recover", rec, recoverTimeout)
}

// logMeanRTTs reports the mean RTT towards the delayed node and the slowest other path.
func logMeanRTTs(t *testing.T, e *env, exp *expectation, node string) {
	o, ok := e.checkers[0].(*otlpChecker)
	if !ok {
		return
	}
	var towardsMin, towardsMax, othersMax time.Duration
	for p := range exp.paths {
		src, _ := exp.agent(p.from)
		dst, _ := exp.agent(p.to)
		for _, ip := range dst.IPs {
			x, _ := o.series(src, ip.String())
			mean, _, ok := meanRTT(x, exp.window)
			if !ok {
				continue
			}
			if p.to == node {
				if towardsMin == 0 || mean < towardsMin {
					towardsMin = mean
				}
				towardsMax = max(towardsMax, mean)
			} else {
				othersMax = max(othersMax, mean)
			}
		}
	}
	t.Logf("E2E delay towards %s: mean RTT %v-%v per path (injected %v); slowest other path %v",
		node, towardsMin.Round(10*time.Microsecond), towardsMax.Round(10*time.Microsecond), delay, othersMax.Round(time.Microsecond))
}

// TestLoss: node-4 drops 20% of what it receives from the other nodes. Over at least 200
// echoes towards node-4 (all observers, both families) the loss ratio is within 0.10-0.30
// (±3.5σ at 200 echoes); paths not involving node-4 stay reachable throughout.
func TestLoss(t *testing.T) {
	e := requireEnv(t)
	const node = "node-4"
	e.requireHealthy(t)
	e.healOnCleanup(t, node)

	start := time.Now()
	if err := e.cl.Loss(node, lossPercent); err != nil {
		t.Fatal(err)
	}
	stable := func(p pair) bool { return !involves(node)(p) }
	detect := e.expect("loss", start).all(pathExpect{reachable: true, stable: true}, stable)
	detect.loss[node] = lossExpect{minLost: 1}
	e.await(t, "detect", detect, detectTimeout)

	measure := e.expect("loss-ratio", start).all(pathExpect{reachable: true, stable: true}, stable)
	measure.window = start.Add(probeInterval)
	measure.loss[node] = lossExpect{min: lossMin, max: lossMax, minEchoes: lossMinEchoes}
	e.await(t, "measure", measure, lossTimeout)
	if o, ok := e.checkers[0].(*otlpChecker); ok {
		sent, lost := int64(0), int64(0)
		dst, _ := measure.agent(node)
		for _, src := range measure.agents {
			for _, ip := range dst.IPs {
				if src.Node != node {
					x, _ := o.series(src, ip.String())
					s, l := echoesInWindow(x, measure.window)
					sent, lost = sent+s, lost+l
				}
			}
		}
		t.Logf("E2E loss towards %s: %.3f over %d echoes (injected %d%%, accepted %.2f-%.2f)",
			node, float64(lost)/float64(sent), sent, lossPercent, lossMin, lossMax)
	}

	start = time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	e.await(t, "recover", e.healthy("loss", start, pathExpect{}), recoverTimeout)
}

// TestAPIServerOutage: with kube-apiserver down the agents keep probing from what their
// informers know (every path stays reachable through the outage); after the restart they
// still do, and the next test (the roll) proves their watches came back.
func TestAPIServerOutage(t *testing.T) {
	e := requireEnv(t)
	e.requireHealthy(t)

	stopping := time.Now()
	if err := e.cl.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	t.Logf("kube-apiserver stopped in %.1fs", start.Sub(stopping).Seconds())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := e.cl.StartAPIServer(ctx); err != nil {
				t.Errorf("restart kube-apiserver: %v", err)
			}
		}
	})
	during := e.expect("api-outage", start).all(pathExpect{reachable: true, stable: true, minRounds: 3}, nil)
	e.await(t, "probe-through", during, detectTimeout)
	if _, err := e.cl.Client.Discovery().ServerVersion(); err == nil {
		t.Fatal("kube-apiserver answered during the outage")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.cl.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	t.Logf("E2E api outage: kube-apiserver down %.1fs, probes continued", time.Since(stopping).Seconds())
	for _, a := range e.cl.Agents() {
		if !a.Ready {
			t.Logf("agent %s on %s not Ready yet after the restart", a.Pod, a.Node)
		}
	}
	e.await(t, "recover", e.healthy("api-outage", time.Now(), pathExpect{}), recoverTimeout)
}

// TestRoll: a DaemonSet-style roll replaces every agent pod (new UIDs, new IPs). The new
// agents converge on a full mesh of the new pods, report under their new UIDs, and probe
// none of the old addresses.
func TestRoll(t *testing.T) {
	e := requireEnv(t)
	e.requireHealthy(t)
	before := e.cl.Agents()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rollStart := time.Now()
	if err := e.cl.RollAgents(ctx); err != nil {
		t.Fatal(err)
	}
	rolled := time.Now()
	after := e.cl.Agents()
	if len(after) != len(before) {
		t.Fatalf("%d agents after the roll, want %d", len(after), len(before))
	}
	oldAddrs := map[string]bool{}
	oldUIDs := map[string]bool{}
	for _, a := range before {
		oldUIDs[a.UID] = true
		for _, ip := range a.IPs {
			oldAddrs[ip.String()] = true
		}
	}
	newAddrs := map[string]bool{}
	for _, a := range after {
		if oldUIDs[a.UID] {
			t.Fatalf("agent on %s kept its UID %s", a.Node, a.UID)
		}
		for _, ip := range a.IPs {
			if oldAddrs[ip.String()] {
				t.Fatalf("agent on %s kept address %s", a.Node, ip)
			}
			newAddrs[ip.String()] = true
		}
	}
	t.Logf("E2E roll: %d agents replaced in %.1fs", len(after), rolled.Sub(rollStart).Seconds())

	e.await(t, "detect", e.healthy("roll", rolled, pathExpect{}), convergeTimeout)
	converged := time.Now()

	// The API holds exactly the new pods, all Ready.
	pods, err := e.cl.Client.CoreV1().Pods(simcluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=netpulse-agent"})
	if err != nil {
		t.Fatal(err)
	}
	newUIDs := map[string]bool{}
	for _, a := range after {
		newUIDs[a.UID] = true
	}
	if len(pods.Items) != len(after) {
		t.Errorf("%d agent pods in the API after the roll, want %d", len(pods.Items), len(after))
	}
	for _, p := range pods.Items {
		if !newUIDs[string(p.UID)] {
			t.Errorf("pod %s (uid %s) is not one of the new agents", p.Name, p.UID)
		}
		if !podReady(&p) {
			t.Errorf("pod %s is not Ready", p.Name)
		}
	}

	// Give the new agents a few rounds, then: no source but the new pods, and no target
	// but the new addresses.
	time.Sleep(3 * probeInterval)
	settled := converged.Add(probeInterval)
	for _, x := range e.sink.Series() {
		if len(x.Since(rolled)) > 0 && oldUIDs[x.Key.SourceUID] {
			t.Errorf("old pod %s (uid %s) still reports after the roll", x.Source.PodName, x.Key.SourceUID)
		}
		if len(x.Since(settled)) > 0 && !newAddrs[x.Key.Destination] {
			t.Errorf("%s still probes %s, which no pod has any more", x.Source.PodName, x.Key.Destination)
		}
	}
	// Extension point: with the gateway, the old pods' PodNetworkHealth objects are
	// garbage-collected with their pods and the new pairs get objects of their own.
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestGatewaySlot runs a collector in the gateway slot (host side of the bridge, gateway
// environment and service account) and checks it serves OTLP on HostIPv4:4317. Until the
// gateway components land the config is a minimal OTLP → debug pipeline; then the slot runs
// deploy/agent-gateway/config/gateway.yaml.
func TestGatewaySlot(t *testing.T) {
	e := requireEnv(t)
	cfg := filepath.Join(t.TempDir(), "gateway-slot.yaml")
	if err := os.WriteFile(cfg, []byte(`extensions:
  health_check:
    endpoint: ${env:POD_IP}:13133
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: ${env:POD_IP}:4317
exporters:
  debug: {}
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [debug]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	gw, err := e.cl.StartGateway(ctx, simcluster.GatewayOptions{Config: cfg})
	if gw != nil {
		t.Cleanup(func() { _ = e.cl.StopGateway(gw) })
	}
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", gw.Endpoint, 2*time.Second)
	if err != nil {
		t.Fatalf("gateway OTLP endpoint %s: %v", gw.Endpoint, err)
	}
	conn.Close()
	t.Logf("gateway slot ready at %s in %.1fs", gw.Endpoint, time.Since(start).Seconds())
}
