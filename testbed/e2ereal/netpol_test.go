// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2ereal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/realcluster"
)

const (
	// gatewayPolicy is the chart's NetworkPolicy (templates/networkpolicy.yaml).
	gatewayPolicy = "netpulse-gateway"
	// outsideNamespace holds the pods the policy must refuse: unlabelled, so neither an
	// agent's namespace nor a sidecar namespace.
	outsideNamespace = "np-outside"
	// monitoringNamespace is where the step's scraper runs: the namespace a Prometheus
	// typically runs in.
	monitoringNamespace = "monitoring"
)

// gatewayPorts are the ports of the gateway pods the step dials: OTLP, telemetry,
// per-pair metrics, health check.
var gatewayPorts = []int32{4317, 8888, 8889, 13133}

// prober is a pod whose network namespace the step dials from.
type prober struct {
	kind  string // agent, outside, monitoring
	pod   corev1.Pod
	ns    map[string]string // its namespace's labels
	netns string
}

// dial is one TCP connection attempt from a prober to a gateway pod's address and port.
type dial struct {
	from      *prober
	gw        corev1.Pod
	ip        string
	port      int32
	sameNode  bool
	admit     bool // what the installed policy says
	connected bool
	// reached: the connection reached the gateway pod's kernel: connected, or refused with
	// a RST (IPv6: the gateway listens on its pod's IPv4 address only, ${POD_IP}), where a
	// NetworkPolicy engine drops the SYN and the dial times out.
	reached bool
	took    time.Duration
	failure string // timeout, refused (RST), ...
}

// ipv4 is whether the dial is to the gateway's IPv4 address, where it listens.
func (d *dial) ipv4() bool { return net.ParseIP(d.ip).To4() != nil }

// policyMismatch says how a dial disagrees with the policy: reached where it is refused,
// dropped where it is admitted, or not connected on an admitted IPv4 port (where the
// gateway listens).
func (d *dial) policyMismatch() bool {
	return d.reached != d.admit || (d.admit && d.ipv4() && !d.connected)
}

// networkPolicy proves the chart's NetworkPolicy on a real policy engine: SIG Network's
// kube-network-policies runs on every node (realcluster Options.NetworkPolicy; nftables and
// NFQUEUE in each node's namespace) and has enforced the policy since the install. From
// inside the network namespaces of the agents, of pods in another namespace (labelled as
// agents and sidecars: the policy must not admit a label alone) and of a pod in the
// monitoring namespace, the step opens TCP connections to every gateway pod's OTLP,
// telemetry, metrics and health ports, IPv4 and IPv6, on the same node and across
// nodes, and compares each outcome with what the installed policy admits (its own rules,
// evaluated here). Then it deletes the policy (every connection opens: the refusals were
// the policy's) and restores it with `helm upgrade` (refused again), and last it reads from
// the monitoring pod, through the gateway's metrics port, that every agent's rounds kept
// arriving while the policy was enforced. Last, a declared check that a workload's own
// NetworkPolicy blocks reads Unreachable naming that policy (checkBlockedByUserPolicy).
func (s *suite) networkPolicy(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	np, err := s.cs.NetworkingV1().NetworkPolicies(namespace).Get(ctx, gatewayPolicy, metav1.GetOptions{})
	require.NoError(t, err, "the chart installs its NetworkPolicy (networkPolicy.enabled, on by default)")

	gateways := s.pods(t, "app.kubernetes.io/name=netpulse-gateway")
	require.Len(t, gateways, 2)
	gwNodes := map[string]bool{}
	for _, gw := range gateways {
		gwNodes[gw.Spec.NodeName] = true
	}
	// The monitoring pod runs where no gateway does: its connections cross nodes.
	quiet := ""
	for _, n := range s.cl.Nodes {
		if !gwNodes[n.Name] {
			quiet = n.Name
		}
	}
	require.NotEmpty(t, quiet, "a node without a gateway replica")

	// The outside pods carry the agents' and sidecars' labels in a namespace that is
	// neither: one on every node, so that each gateway is dialled from its own node (a
	// bridged connection, judged through br_netfilter) and from the others (routed).
	outside := map[string]string{"app.kubernetes.io/name": "netpulse-agent", "netpulse.io/sidecar": "true"}
	var pods []*corev1.Pod
	for _, n := range s.cl.Nodes {
		pods = append(pods, probePod(outsideNamespace, "outside-"+n.Name, n.Name, outside))
	}
	pods = append(pods, probePod(monitoringNamespace, "scraper", quiet, map[string]string{"app.kubernetes.io/name": "prometheus"}))
	for _, name := range []string{outsideNamespace, monitoringNamespace} {
		_, err := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{outsideNamespace, monitoringNamespace} {
			_ = s.cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	for _, p := range pods {
		_, err := s.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	var probers []*prober
	nsLabels := map[string]map[string]string{}
	for _, p := range pods {
		running := s.waitPodRunning(t, p.Namespace, p.Name, 2*time.Minute)
		kind := "outside"
		if p.Namespace == monitoringNamespace {
			kind = "monitoring"
		}
		probers = append(probers, &prober{kind: kind, pod: running})
	}
	for _, a := range s.pods(t, "app.kubernetes.io/name=netpulse-agent") {
		if a.DeletionTimestamp == nil && a.Status.Phase == corev1.PodRunning {
			probers = append(probers, &prober{kind: "agent", pod: a})
		}
	}
	for _, p := range probers {
		if nsLabels[p.pod.Namespace] == nil {
			ns, err := s.cs.CoreV1().Namespaces().Get(ctx, p.pod.Namespace, metav1.GetOptions{})
			require.NoError(t, err)
			nsLabels[p.pod.Namespace] = ns.Labels
		}
		p.ns = nsLabels[p.pod.Namespace]
		p.netns, err = s.cl.PodNetns(ctx, &p.pod)
		require.NoError(t, err)
	}

	// What the policy must say, whatever else it admits: the agents' OTLP, and not a pod
	// of another namespace that only wears their labels.
	for _, p := range probers {
		switch p.kind {
		case "agent":
			require.True(t, policyAdmits(np, p.pod.Namespace, p.ns, p.pod.Labels, 4317), "the chart's policy admits agents to OTLP")
		case "outside":
			require.False(t, policyAdmits(np, p.pod.Namespace, p.ns, p.pod.Labels, 4317), "the chart's policy refuses OTLP from %s/%s", p.pod.Namespace, p.pod.Name)
		}
	}

	verdicts := func() (accepted, dropped float64) {
		for _, n := range s.cl.Nodes {
			a, d, err := n.NetworkPolicyVerdicts()
			require.NoError(t, err)
			accepted += a
			dropped += d
		}
		return accepted, dropped
	}

	// 1. With the policy installed: every outcome is the policy's.
	acc0, drop0 := verdicts()
	dials := s.dialGateways(t, probers, gateways, np)
	acc1, drop1 := verdicts()
	var wrong []string
	refused := 0
	for _, d := range dials {
		if d.policyMismatch() {
			wrong = append(wrong, d.String())
		}
		if !d.admit {
			refused++
		}
	}
	require.Empty(t, wrong, "connections the policy decides otherwise (%d dials)", len(dials))
	for _, line := range summarize(dials) {
		s.figure("NetworkPolicy on %s, as installed: %s", engineVersion(t), line)
	}
	// Each refused connection's SYNs were dropped by the engine, not answered by anything.
	require.GreaterOrEqual(t, drop1-drop0, float64(refused), "the engines dropped the refused connections' first packets")
	s.figure("NetworkPolicy engine: %.0f packets dropped and %.0f accepted during the %d dials (%d refused by the policy, each dropped by the engine on the gateway's node; 2 tries of 2 s each)",
		drop1-drop0, acc1-acc0, len(dials), refused)

	// 2. Without it: everything connects, so every refusal above was the policy's.
	deleted := time.Now()
	require.NoError(t, s.cs.NetworkingV1().NetworkPolicies(namespace).Delete(ctx, gatewayPolicy, metav1.DeleteOptions{}))
	var stranger *prober
	for _, p := range probers {
		if p.kind == "outside" && !gwNodes[p.pod.Spec.NodeName] {
			stranger = p
		}
	}
	require.NotNil(t, stranger)
	target := net.JoinHostPort(gateways[0].Status.PodIP, "4317")
	opened := awaitDial(t, stranger.netns, target, true, time.Minute)
	s.figure("NetworkPolicy deleted → %s/%s (other namespace, other node) connects to the gateway's OTLP port %.0f ms later",
		stranger.pod.Namespace, stranger.pod.Name, float64(opened.Sub(deleted).Microseconds())/1000)
	open := s.dialGateways(t, probers, gateways, nil)
	var closed []string
	for _, d := range open {
		if d.policyMismatch() {
			closed = append(closed, d.String())
		}
	}
	require.Empty(t, closed, "without the NetworkPolicy every gateway port is open to every pod")
	s.figure("NetworkPolicy deleted: %d of %d dials reach the gateway pods (every pod, port, family and node; IPv4 connects, IPv6 is answered with a RST)", len(open), len(open))

	// 3. `helm upgrade` puts it back: refused again, and again exactly the policy's.
	restoring := time.Now()
	s.helmCmd(t, "upgrade", "netpulse", s.chart, "-n", namespace, "--reuse-values")
	np, err = s.cs.NetworkingV1().NetworkPolicies(namespace).Get(ctx, gatewayPolicy, metav1.GetOptions{})
	require.NoError(t, err, "helm upgrade re-creates the deleted NetworkPolicy")
	shut := awaitDial(t, stranger.netns, target, false, time.Minute)
	s.figure("NetworkPolicy restored (helm upgrade --reuse-values) → that connection refused again %.1f s after the upgrade began", shut.Sub(restoring).Seconds())
	again := s.dialGateways(t, probers, gateways, np)
	wrong = wrong[:0]
	for _, d := range again {
		if d.policyMismatch() {
			wrong = append(wrong, d.String())
		}
	}
	require.Empty(t, wrong, "after the restore, connections the policy decides otherwise")

	// 4. The agents kept reporting under the policy: from the monitoring namespace, through
	// the gateways' metrics port, every agent's probe counters grow.
	var scraper *prober
	for _, p := range probers {
		if p.kind == "monitoring" {
			scraper = p
		}
	}
	require.True(t, policyAdmits(np, scraper.pod.Namespace, scraper.ns, scraper.pod.Labels, 8889), "the policy admits the monitoring namespace to the metrics port")
	var agents []string
	for _, p := range probers {
		if p.kind == "agent" {
			agents = append(agents, p.pod.Name)
		}
	}
	first := s.agentCounters(t, scraper.netns, gateways, agents)
	const wait = 25 * time.Second
	var second map[string]float64
	deadline := time.Now().Add(2 * time.Minute)
	for {
		time.Sleep(wait)
		second = s.agentCounters(t, scraper.netns, gateways, agents)
		var stale []string
		for _, a := range agents {
			if second[a] <= first[a] {
				stale = append(stale, fmt.Sprintf("%s (%.0f → %.0f)", a, first[a], second[a]))
			}
		}
		if len(stale) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "agents whose probe counters did not grow under the policy: %s", strings.Join(stale, ", "))
	}
	var grew []string
	for _, a := range agents {
		grew = append(grew, fmt.Sprintf("%.0f → %.0f", first[a], second[a]))
	}
	s.awaitObjects(t, "every pair Reachable under the NetworkPolicy", time.Minute, allReachable)
	s.figure("NetworkPolicy enforced: every agent's rounds keep reaching the gateway (packets sent, read through 8889 from %s/%s: %s), every pair Reachable; the step took %.0f s",
		scraper.pod.Namespace, scraper.pod.Name, strings.Join(grew, ", "), time.Since(start).Seconds())

	// 5. A user's own policy blocking a declared check is named by it (netpol_checks_test.go).
	s.checkBlockedByUserPolicy(t)
}

// probePod is a pause container pinned to node.
func probePod(ns, name, node string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "pause", Image: realcluster.PauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}
}

func (s *suite) waitPodRunning(t *testing.T, ns, name string, timeout time.Duration) corev1.Pod {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		p, err := s.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.PodIPs) > 0 {
			running := true
			for _, st := range p.Status.ContainerStatuses {
				running = running && st.State.Running != nil
			}
			if running && len(p.Status.ContainerStatuses) > 0 {
				return *p
			}
		}
		require.True(t, time.Now().Before(deadline), "pod %s/%s not running after %v:\n%s", ns, name, timeout, s.cl.PodReport(ctx, s.cs, ns))
		require.NoError(t, s.cl.Healthy())
		time.Sleep(500 * time.Millisecond)
	}
}

// dialGateways dials every gateway pod's addresses (IPv4 and IPv6) and ports from every
// prober, in parallel. With a policy, a connection the policy admits gets 3 tries and one
// it refuses 2 (each 2 s); without one, every connection gets 3.
func (s *suite) dialGateways(t *testing.T, probers []*prober, gateways []corev1.Pod, np *networkingv1.NetworkPolicy) []*dial {
	t.Helper()
	var dials []*dial
	for _, p := range probers {
		for _, gw := range gateways {
			for _, ip := range gw.Status.PodIPs {
				for _, port := range gatewayPorts {
					admit := np == nil || policyAdmits(np, p.pod.Namespace, p.ns, p.pod.Labels, port)
					dials = append(dials, &dial{from: p, gw: gw, ip: ip.IP, port: port, sameNode: p.pod.Spec.NodeName == gw.Spec.NodeName, admit: admit})
				}
			}
		}
	}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, d := range dials {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tries := 3
			if !d.admit {
				tries = 2
			}
			for i := 0; i < tries && !d.connected; i++ {
				began := time.Now()
				conn, err := realcluster.DialInNetns(d.from.netns, "tcp", net.JoinHostPort(d.ip, strconv.Itoa(int(d.port))), 2*time.Second)
				d.took = time.Since(began)
				if err == nil {
					_ = conn.Close()
					d.connected = true
					d.failure = ""
				} else {
					d.failure = dialFailure(err)
				}
				d.reached = d.connected || d.failure == failRefused
				if d.reached && !d.ipv4() {
					break
				}
			}
		}()
	}
	wg.Wait()
	return dials
}

const failRefused = "refused (RST)"

func dialFailure(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case strings.Contains(err.Error(), "connection refused"):
		return failRefused
	default:
		return err.Error()
	}
}

func (d *dial) String() string {
	where := "other node"
	if d.sameNode {
		where = "same node"
	}
	got := "connected"
	if !d.connected {
		got = "not connected: " + d.failure
	}
	return fmt.Sprintf("%s %s/%s → %s %s:%d (%s): %s, policy admits=%v", d.from.kind, d.from.pod.Namespace, d.from.pod.Name, d.gw.Name, d.ip, d.port, where, got, d.admit)
}

// summarize condenses dials to one line per prober kind and address family: per port, how
// many reached the gateway pods (IPv4: connected; IPv6: answered, with a RST) of how many
// tried, and how the others failed.
func summarize(dials []*dial) []string {
	type key struct {
		kind string
		v4   bool
	}
	type tally struct {
		n, reached, same map[int32]int
		fails            map[string]int
		took             []time.Duration
		pods             map[string]bool
	}
	tallies := map[key]*tally{}
	for _, d := range dials {
		k := key{d.from.kind, d.ipv4()}
		tl := tallies[k]
		if tl == nil {
			tl = &tally{n: map[int32]int{}, reached: map[int32]int{}, same: map[int32]int{}, fails: map[string]int{}, pods: map[string]bool{}}
			tallies[k] = tl
		}
		tl.pods[d.from.pod.Name] = true
		tl.n[d.port]++
		if d.sameNode {
			tl.same[d.port]++
		}
		if d.reached {
			tl.reached[d.port]++
			if d.connected {
				tl.took = append(tl.took, d.took)
			}
		} else {
			tl.fails[d.failure]++
		}
	}
	order := map[string]int{"agent": 0, "outside": 1, "monitoring": 2}
	keys := slices.SortedFunc(maps.Keys(tallies), func(a, b key) int {
		if a.kind != b.kind {
			return order[a.kind] - order[b.kind]
		}
		if a.v4 == b.v4 {
			return 0
		}
		if a.v4 {
			return -1
		}
		return 1
	})
	var out []string
	for _, k := range keys {
		tl := tallies[k]
		fam, verb := "IPv6", "answered (RST: nothing listens there)"
		if k.v4 {
			fam, verb = "IPv4", "connected"
		}
		var ports []string
		for _, p := range gatewayPorts {
			ports = append(ports, fmt.Sprintf(":%d %d/%d", p, tl.reached[p], tl.n[p]))
		}
		line := fmt.Sprintf("%s pods (%d) → gateway pods, %s (%d of %d per port on the same node): %s %s",
			k.kind, len(tl.pods), fam, tl.same[gatewayPorts[0]], tl.n[gatewayPorts[0]], strings.Join(ports, ", "), verb)
		if len(tl.took) > 0 {
			slices.Sort(tl.took)
			line += fmt.Sprintf(" (median %.1f ms)", float64(tl.took[len(tl.took)/2].Microseconds())/1000)
		}
		for _, f := range slices.Sorted(maps.Keys(tl.fails)) {
			line += fmt.Sprintf("; %d %s", tl.fails[f], f)
		}
		out = append(out, line)
	}
	return out
}

// awaitDial dials address from netns every 500 ms (1 s tries) until a connection opens
// (want true) or fails (want false), and returns when.
func awaitDial(t *testing.T, netns, address string, want bool, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		conn, err := realcluster.DialInNetns(netns, "tcp", address, time.Second)
		if err == nil {
			_ = conn.Close()
		}
		if (err == nil) == want {
			return time.Now()
		}
		require.True(t, time.Now().Before(deadline), "a connection to %s still %v after %v (last: %v)", address, !want, timeout, err)
		time.Sleep(500 * time.Millisecond)
	}
}

// agentCounters sums, per agent pod, the netpulse_probe_packets_sent series the gateways'
// metrics ports export for it as a source (label k8s_pod_name), read from netns.
func (s *suite) agentCounters(t *testing.T, netns string, gateways []corev1.Pod, agents []string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	seen := map[string]bool{}
	for _, gw := range gateways {
		body, err := realcluster.HTTPGetInNetns(netns, net.JoinHostPort(gw.Status.PodIP, "8889"), "/metrics", 5*time.Second)
		require.NoError(t, err, "the gateway %s's metrics from the monitoring namespace", gw.Name)
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "#") || line == "" {
				continue
			}
			name, _, _ := strings.Cut(line, "{")
			seen[name] = true
			if !strings.HasPrefix(name, "netpulse_probe_packets_sent") {
				continue
			}
			for _, a := range agents {
				if strings.Contains(line, `{k8s_pod_name="`+a+`"`) || strings.Contains(line, `,k8s_pod_name="`+a+`"`) {
					v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
					require.NoError(t, err, "%q", line)
					out[a] += v
				}
			}
		}
	}
	for _, a := range agents {
		if _, ok := out[a]; !ok {
			names := slices.Sorted(maps.Keys(seen))
			t.Fatalf("no netpulse_probe_packets_sent series of agent %s on the gateways' metrics ports; series names: %s", a, strings.Join(names, ", "))
		}
	}
	return out
}

// policyAdmits evaluates a NetworkPolicy's ingress rules (networking.k8s.io/v1 semantics)
// for a TCP connection from a pod to port on a pod the policy selects: a rule admits it
// when one of its ports matches (none: every port) and one of its peers does (none: every
// source). A peer with only a podSelector means the policy's namespace; ipBlock peers
// never match a pod here (the chart has none).
func policyAdmits(np *networkingv1.NetworkPolicy, podNS string, nsLabels, podLabels map[string]string, port int32) bool {
	for _, rule := range np.Spec.Ingress {
		if !portMatches(rule.Ports, port) {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil {
				continue
			}
			podOK := selectorMatches(peer.PodSelector, podLabels)
			nsOK := podNS == np.Namespace
			if peer.NamespaceSelector != nil {
				nsOK = selectorMatches(peer.NamespaceSelector, nsLabels)
			}
			if podOK && nsOK {
				return true
			}
		}
	}
	return false
}

// selectorMatches: a nil selector matches everything, as an empty one does.
func selectorMatches(sel *metav1.LabelSelector, lbls map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(lbls))
}

func portMatches(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.IntVal == port || (p.EndPort != nil && p.Port.IntVal <= port && port <= *p.EndPort) {
			return true
		}
	}
	return false
}

// engineVersion names the engine and the version tools/netpol/go.mod pins.
func engineVersion(t *testing.T) string {
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "tools", "netpol", "go.mod"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "sigs.k8s.io/kube-network-policies" {
			return "kube-network-policies " + f[1]
		}
	}
	return "kube-network-policies"
}
