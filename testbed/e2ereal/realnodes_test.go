// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2ereal installs netpulse as a user would, with its Helm chart and image, on a
// local cluster of real nodes (testbed/realcluster: real kubelets, containerd, CNI,
// kube-proxy, CoreDNS, kube-scheduler), and asserts through the API and the nodes only.
// One cluster serves the whole test; the steps run in order and build on each other.
package e2ereal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/helmtest"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/realcluster"
)

const (
	namespace       = "netpulse"
	nodeProblemType = corev1.NodeConditionType("netpulse.io/PodNetworkProblem")
	// EnvImage overrides the netpulse image archive (default bin/realnode/images/otelcol-netpulse.tar,
	// written by `make node-image`).
	EnvImage = "NETPULSE_REALNODE_IMAGE"
	// EnvKeep=1 keeps the run directory (every component's log) after the test.
	EnvKeep = "NETPULSE_E2E_KEEP"
)

// suite is the shared state of the steps.
type suite struct {
	cl        *realcluster.Cluster
	cs        kubernetes.Interface
	pnh       versioned.Interface
	helm      string
	chart     string
	installed time.Time
	figures   []string
}

func (s *suite) figure(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	s.figures = append(s.figures, line)
}

func netpulseImage(t *testing.T) string {
	if p := os.Getenv(EnvImage); p != "" {
		return p
	}
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	p := filepath.Join(root, "bin", "realnode", "images", "otelcol-netpulse.tar")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the netpulse image archive %s is missing (run `make node-image`, or set %s): %v", p, EnvImage, err)
	}
	return p
}

func TestRealNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of real nodes (root, about 5 minutes)")
	}
	ctx := context.Background()
	image := netpulseImage(t)
	helm, err := helmtest.Binary()
	require.NoError(t, err)
	chart, err := helmtest.ChartDir()
	require.NoError(t, err)

	start := time.Now()
	// Every step runs with a NetworkPolicy engine on the nodes (kube-network-policies), so
	// the chart's NetworkPolicy is enforced from the install on, as on a cluster with one.
	cl, err := realcluster.Start(ctx, realcluster.Options{Nodes: 3, Zones: 2, Images: []string{image}, Logf: t.Logf,
		KeepDir: os.Getenv(EnvKeep) == "1", NetworkPolicy: true})
	require.NoError(t, err)
	s := &suite{cl: cl, helm: helm, chart: chart}
	s.figure("cluster of %d real nodes up (control plane, nodes Ready, cluster DNS Ready): %.0f s", len(cl.Nodes), time.Since(start).Seconds())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs:\n%s", cl.Logs(40))
			if s.cs != nil {
				t.Logf("pods:\n%s", cl.PodReport(context.Background(), s.cs, namespace))
			}
		}
		for _, f := range s.figures {
			t.Logf("figure: %s", f)
		}
		if err := cl.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	cs, err := cl.Clientset()
	require.NoError(t, err)
	s.cs = cs
	s.pnh, err = versioned.NewForConfig(cl.ControlPlane.Config)
	require.NoError(t, err)

	for _, step := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Install", s.install},
		{"Reachable", s.reachable},
		// While the first rounds' pairs are fresh: the policy's refusals and admissions,
		// then without it, then restored (#40 item 8).
		{"NetworkPolicy", s.networkPolicy},
		{"PartitionAndHeal", s.partitionAndHeal},
		// After 2-3 minutes of steady state and one fault, before anything restarts.
		{"Footprint", s.footprint},
		{"UpgradeRollsAgents", s.upgradeRollsAgents},
		// At the upgrade's 5 s rounds: a gray verdict in a few minutes.
		{"GrayLoss", s.grayLoss},
		{"GrayCongestion", s.grayCongestion},
		{"GraySlowNode", s.graySlowNode},
		// Before the takeover: the check is created while both replicas run, so the new
		// leader resumes a check its standby only read (#28 item 6).
		{"SidecarCheck", s.sidecarCheck},
		{"GatewayTakeover", s.gatewayTakeover},
		{"Matrix", s.matrix},
		// Last before the uninstall: it replaces the gateway (docs/sharding.md).
		{"Shards", s.shardsOnRealNodes},
		{"Uninstall", s.uninstall},
	} {
		if !t.Run(step.name, step.fn) {
			t.Fatalf("step %s failed; later steps build on it", step.name)
		}
	}
}

// helmCmd runs helm against the cluster as a user would.
func (s *suite) helmCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(s.helm, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.cl.Kubeconfig, "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "helm %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// install: the namespace labelled for Pod Security "restricted" (docs/helm.md), then
// `helm install` with only the values an air-gapped user sets.
func (s *suite) install(t *testing.T) {
	ctx := context.Background()
	_, err := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: namespace, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	s.installed = time.Now()
	s.helmCmd(t, "install", "netpulse", s.chart, "-n", namespace, "--set", "image.pullPolicy=Never")
	require.NoError(t, s.waitAgentsReady(ctx, 3*time.Minute))
	require.NoError(t, s.cl.WaitDeploymentAvailable(ctx, s.cs, namespace, "netpulse-gateway", 3*time.Minute))
	s.figure("helm install → every agent and both gateway replicas Ready: %.0f s", time.Since(s.installed).Seconds())
	// Every node runs one agent, and the two gateway replicas are on different nodes.
	agents := s.pods(t, "app.kubernetes.io/name=netpulse-agent")
	nodes := map[string]bool{}
	for _, p := range agents {
		nodes[p.Spec.NodeName] = true
	}
	require.Len(t, nodes, len(s.cl.Nodes), "one agent per node")
	gws := s.pods(t, "app.kubernetes.io/name=netpulse-gateway")
	require.Len(t, gws, 2)
}

func (s *suite) pods(t *testing.T, selector string) []corev1.Pod {
	t.Helper()
	list, err := s.cs.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	return list.Items
}

func (s *suite) waitAgentsReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := s.cl.Healthy(); err != nil {
			return err
		}
		ds, err := s.cs.AppsV1().DaemonSets(namespace).Get(ctx, "netpulse-agent", metav1.GetOptions{})
		if err == nil && ds.Status.ObservedGeneration >= ds.Generation && ds.Status.DesiredNumberScheduled == int32(len(s.cl.Nodes)) &&
			ds.Status.UpdatedNumberScheduled == ds.Status.DesiredNumberScheduled && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled &&
			ds.Status.NumberAvailable == ds.Status.DesiredNumberScheduled {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agents not Ready after %v:\n%s", timeout, s.cl.PodReport(ctx, s.cs, namespace))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// objects returns the PodNetworkHealth objects in the namespace by source→target pod.
func (s *suite) objects(ctx context.Context) (map[string]*v1alpha1.PodNetworkHealth, error) {
	list, err := s.pnh.NetpulseV1alpha1().PodNetworkHealths(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]*v1alpha1.PodNetworkHealth{}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Spec.TargetPodRef == nil {
			continue
		}
		out[o.Spec.SourcePodRef.Name+"→"+o.Spec.TargetPodRef.Name] = o
	}
	return out, nil
}

// awaitObjects polls until ok holds for the current agents' objects.
func (s *suite) awaitObjects(t *testing.T, what string, timeout time.Duration, ok func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	last := ""
	lastLog := start
	for time.Since(start) < timeout {
		if time.Since(lastLog) > 15*time.Second && last != "" {
			t.Logf("%s: waiting %.0f s: %s", what, time.Since(start).Seconds(), last)
			lastLog = time.Now()
		}
		require.NoError(t, s.cl.Healthy())
		agents := map[string]corev1.Pod{}
		for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-agent") {
			if p.DeletionTimestamp == nil {
				agents[p.Name] = p
			}
		}
		objs, err := s.objects(ctx)
		if err == nil {
			if last = ok(agents, objs); last == "" {
				return time.Since(start)
			}
		} else {
			last = err.Error()
		}
		time.Sleep(time.Second)
	}
	s.dumpState(t)
	t.Fatalf("%s: not after %v: %s", what, timeout, last)
	return 0
}

// reachable: every agent has objects as a source, every object between live agents is
// Reachable.
func (s *suite) reachable(t *testing.T) {
	d := s.awaitObjects(t, "every pair Reachable", 3*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		return allReachable(agents, objs)
	})
	s.figure("all objects Reachable %.0f s after the pods were Ready (%.0f s after helm install)", d.Seconds(), time.Since(s.installed).Seconds())
}

// agentOn returns the agent pod on node.
func (s *suite) agentOn(t *testing.T, node string) corev1.Pod {
	t.Helper()
	for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-agent") {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			return p
		}
	}
	t.Fatalf("no agent on %s", node)
	return corev1.Pod{}
}

// quietNode is a node that runs no gateway replica (and, if possible, no CoreDNS): cutting
// it off must not cut the others from the gateway or from DNS.
func (s *suite) quietNode(t *testing.T) string {
	busy := map[string]int{}
	for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-gateway") {
		busy[p.Spec.NodeName] += 10
	}
	dns, err := s.cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	require.NoError(t, err)
	for _, p := range dns.Items {
		busy[p.Spec.NodeName]++
	}
	best := ""
	for _, n := range s.cl.Nodes {
		if busy[n.Name] < 10 && (best == "" || busy[n.Name] < busy[best]) {
			best = n.Name
		}
	}
	require.NotEmpty(t, best, "every node runs a gateway replica")
	return best
}

func (s *suite) nodeConditions(t *testing.T) map[string]corev1.ConditionStatus {
	t.Helper()
	nodes, err := s.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]corev1.ConditionStatus{}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == nodeProblemType {
				out[n.Name] = c.Status
			}
		}
	}
	return out
}

func (s *suite) hasEvent(ctx context.Context, object, reason string, since time.Time) bool {
	evs, err := s.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object + ",reason=" + reason})
	if err != nil {
		return false
	}
	for _, ev := range evs.Items {
		last := ev.LastTimestamp.Time
		if ev.EventTime.After(last) {
			last = ev.EventTime.Time
		}
		if ev.Series != nil && ev.Series.LastObservedTime.After(last) {
			last = ev.Series.LastObservedTime.Time
		}
		if !last.Before(since.Truncate(time.Second)) {
			return true
		}
	}
	return false
}

// partitionAndHeal cuts one node off from the others with nft in its network namespace:
// the objects towards its agent turn Unreachable with an outage and an Event, its node
// condition (and only its) turns True; healing restores all of it.
func (s *suite) partitionAndHeal(t *testing.T) {
	ctx := context.Background()
	victim := s.quietNode(t)
	victimAgent := s.agentOn(t, victim).Name
	cut := time.Now()
	require.NoError(t, s.cl.Partition(victim))
	healed := false
	defer func() {
		if !healed {
			_ = s.cl.Heal(victim)
		}
	}()
	d := s.awaitObjects(t, "partitioned "+victim+" detected", 2*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		var bad []string
		towards := 0
		for key, o := range objs {
			if o.Spec.TargetPodRef.Name != victimAgent || o.Spec.SourcePodRef.Name == victimAgent {
				continue
			}
			towards++
			if o.Status.Reachability != v1alpha1.Unreachable {
				bad = append(bad, key+" is "+string(o.Status.Reachability))
			} else if len(o.Status.Outages) == 0 || o.Status.Outages[len(o.Status.Outages)-1].End != nil {
				bad = append(bad, key+" has no open outage")
			} else if !s.hasEvent(ctx, o.Name, v1alpha1.EventOutageDetected, cut) {
				bad = append(bad, key+" has no "+v1alpha1.EventOutageDetected+" Event")
			}
		}
		if towards == 0 {
			bad = append(bad, "no object towards "+victimAgent)
		}
		conds := s.nodeConditions(t)
		for _, n := range s.cl.Nodes {
			want := corev1.ConditionFalse
			if n.Name == victim {
				want = corev1.ConditionTrue
			}
			if got := conds[n.Name]; got != want && !(want == corev1.ConditionFalse && got == "") {
				bad = append(bad, fmt.Sprintf("node %s condition %q, want %q", n.Name, got, want))
			}
		}
		sort.Strings(bad)
		return strings.Join(bad, "; ")
	})
	s.figure("partition of %s → objects Unreachable with outage and Event, its node condition True (only its): %.1f s", victim, d.Seconds())

	heal := time.Now()
	require.NoError(t, s.cl.Heal(victim))
	healed = true
	d = s.awaitObjects(t, "healed "+victim+" recovered", 2*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		var bad []string
		for key, o := range objs {
			if o.Spec.TargetPodRef.Name != victimAgent || o.Spec.SourcePodRef.Name == victimAgent {
				continue
			}
			if o.Status.Reachability != v1alpha1.Reachable {
				bad = append(bad, key+" is "+string(o.Status.Reachability))
			} else if n := len(o.Status.Outages); n == 0 || o.Status.Outages[n-1].End == nil {
				bad = append(bad, key+" has no closed outage")
			} else if !s.hasEvent(ctx, o.Name, v1alpha1.EventRestored, heal) {
				bad = append(bad, key+" has no "+v1alpha1.EventRestored+" Event")
			}
		}
		if st := s.nodeConditions(t)[victim]; st != corev1.ConditionFalse {
			bad = append(bad, fmt.Sprintf("node %s condition %q", victim, st))
		}
		sort.Strings(bad)
		return strings.Join(bad, "; ")
	})
	s.figure("heal of %s → objects Reachable, outage closed, Event, node condition False: %.1f s", victim, d.Seconds())
}
