// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2ereal

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// gatewayLease is the writer Lease of the chart's gateway configuration.
const gatewayLease = "netpulse-gateway"

// falseVerdicts lists what would be a false report while nothing is broken: a node
// condition True, or an outage Event since since.
func (s *suite) falseVerdicts(ctx context.Context, t *testing.T, since time.Time) []string {
	var out []string
	for n, st := range s.nodeConditions(t) {
		if st == corev1.ConditionTrue {
			out = append(out, "node "+n+" condition True")
		}
	}
	evs, err := s.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.EventOutageDetected})
	require.NoError(t, err)
	for _, ev := range evs.Items {
		last := ev.LastTimestamp.Time
		if ev.EventTime.After(last) {
			last = ev.EventTime.Time
		}
		if !last.Before(since.Truncate(time.Second)) {
			out = append(out, fmt.Sprintf("Event %s on %s: %s", ev.Reason, ev.InvolvedObject.Name, ev.Message))
		}
	}
	return out
}

// upgradeRollsAgents: `helm upgrade --reuse-values` with a new probe interval rolls the
// DaemonSet (the configuration checksum changes); during and after the roll nothing is
// reported broken, and every pair of the new agents converges Reachable.
func (s *suite) upgradeRollsAgents(t *testing.T) {
	ctx := context.Background()
	before := map[string]bool{}
	for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-agent") {
		before[p.Name] = true
	}
	start := time.Now()
	s.helmCmd(t, "upgrade", "netpulse", s.chart, "-n", namespace, "--reuse-values", "--set", "probe.interval=5s")
	var false_ []string
	for {
		false_ = append(false_, s.falseVerdicts(ctx, t, start)...)
		rolled := true
		pods := s.pods(t, "app.kubernetes.io/name=netpulse-agent")
		for _, p := range pods {
			if before[p.Name] {
				rolled = false
			}
		}
		if rolled && s.waitAgentsReady(ctx, 0) == nil {
			break
		}
		require.Less(t, time.Since(start), 4*time.Minute, "the DaemonSet did not roll:\n%s", s.cl.PodReport(ctx, s.cs, namespace))
		time.Sleep(time.Second)
	}
	rolled := time.Since(start)
	cm, err := s.cs.CoreV1().ConfigMaps(namespace).Get(ctx, "netpulse-agent-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, strings.Join(slices.Collect(maps.Values(cm.Data)), "\n"), "5s", "the agents' configuration carries the new interval")
	d := s.awaitObjects(t, "every pair of the rolled agents Reachable", 3*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		false_ = append(false_, s.falseVerdicts(ctx, t, start)...)
		return allReachable(agents, objs)
	})
	if fv := dedupe(false_); len(fv) > 0 {
		s.dumpState(t)
		t.Fatalf("false reports during the roll (started %s): %s", start.Format("15:04:05.000"), strings.Join(fv, "\n"))
	}
	// The old agents' objects go with their pods (owner references, the garbage collector).
	gc := s.awaitObjects(t, "the old agents' objects garbage-collected", 2*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		var left []string
		for key, o := range objs {
			if before[o.Spec.SourcePodRef.Name] {
				left = append(left, key)
			}
		}
		slices.Sort(left)
		return strings.Join(left, "; ")
	})
	s.figure("helm upgrade (probe interval 10s → 5s) → DaemonSet rolled in %.0f s, new pairs Reachable %.0f s later, old objects collected %.0f s after that, no false report", rolled.Seconds(), d.Seconds(), gc.Seconds())
}

func dedupe(in []string) []string {
	slices.Sort(in)
	return slices.Compact(in)
}

// allReachable is "" when every agent has an object as a source and every object between
// live agents is Reachable.
func allReachable(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
	sources := map[string]int{}
	var bad []string
	for key, o := range objs {
		src, dst := o.Spec.SourcePodRef.Name, o.Spec.TargetPodRef.Name
		if _, ok := agents[src]; !ok {
			continue
		}
		if _, ok := agents[dst]; !ok {
			continue
		}
		sources[src]++
		if o.Status.Reachability != v1alpha1.Reachable {
			bad = append(bad, fmt.Sprintf("%s is %q", key, o.Status.Reachability))
		}
	}
	for a := range agents {
		if sources[a] == 0 {
			bad = append(bad, a+" has no object yet")
		}
	}
	slices.Sort(bad)
	return strings.Join(bad, "; ")
}

// record is what a user reads as the history: per object its verdict, Reachable condition
// and outage starts; outage and restore Events by object; the node conditions.
type record struct {
	objects map[string]string
	events  map[string]int32
	nodes   map[string]corev1.NodeCondition
	// check is the declared check's record (SidecarCheck ran before the takeover, so the
	// standby loaded it while the leader wrote it: #28 item 6): verdict, Reachable
	// condition, outage starts, and its Events; newestSuccess may only move forward.
	check         string
	checkEvents   int32
	newestSuccess time.Time
}

func (s *suite) record(ctx context.Context, t *testing.T) *record {
	objs, err := s.objects(ctx)
	require.NoError(t, err)
	r := &record{objects: map[string]string{}, events: map[string]int32{}, nodes: map[string]corev1.NodeCondition{}}
	for key, o := range objs {
		var b strings.Builder
		fmt.Fprintf(&b, "%s", o.Status.Reachability)
		for _, c := range o.Status.Conditions {
			if c.Type == v1alpha1.ConditionReachable {
				fmt.Fprintf(&b, " %s/%s since %s", c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339))
			}
		}
		for _, out := range o.Status.Outages {
			fmt.Fprintf(&b, " outage@%s", out.Start.UTC().Format(time.RFC3339))
		}
		r.objects[key] = b.String()
	}
	evs, err := s.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, ev := range evs.Items {
		if ev.Reason != v1alpha1.EventOutageDetected && ev.Reason != v1alpha1.EventRestored {
			continue
		}
		n := max(ev.Count, 1)
		if ev.Series != nil {
			n = max(n, ev.Series.Count)
		}
		r.events[ev.InvolvedObject.Name+"/"+ev.Reason] += n
	}
	nodes, err := s.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == nodeProblemType {
				c.LastHeartbeatTime = metav1.Time{}
				r.nodes[n.Name] = c
			}
		}
	}
	if nc, err := s.pnh.NetpulseV1alpha1().NetworkChecks(checksNamespace).Get(ctx, "web-to-dns", metav1.GetOptions{}); err == nil {
		var b strings.Builder
		fmt.Fprintf(&b, "%s", nc.Status.Reachability)
		for _, c := range nc.Status.Conditions {
			if c.Type == v1alpha1.ConditionReachable {
				fmt.Fprintf(&b, " %s/%s since %s", c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339))
			}
		}
		for _, o := range nc.Status.Outages {
			fmt.Fprintf(&b, " outage@%s", o.Start.UTC().Format(time.RFC3339))
		}
		r.check = b.String()
		for _, e := range nc.Status.Successes {
			if e.Time.After(r.newestSuccess) {
				r.newestSuccess = e.Time.Time
			}
		}
		evs, err := s.cs.CoreV1().Events(checksNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web-to-dns"})
		require.NoError(t, err)
		for _, ev := range evs.Items {
			r.checkEvents += max(ev.Count, 1)
		}
	}
	return r
}

func (before *record) diff(after *record) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(before.objects)) {
		if a, ok := after.objects[k]; !ok {
			out = append(out, k+": deleted")
		} else if a != before.objects[k] {
			out = append(out, fmt.Sprintf("%s: %s -> %s", k, before.objects[k], a))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after.events)) {
		if after.events[k] != before.events[k] {
			out = append(out, fmt.Sprintf("Event %s: %d -> %d", k, before.events[k], after.events[k]))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(before.nodes)) {
		if !apiequality.Semantic.DeepEqual(before.nodes[n], after.nodes[n]) {
			out = append(out, fmt.Sprintf("node %s: %+v -> %+v", n, before.nodes[n], after.nodes[n]))
		}
	}
	if before.check != after.check {
		out = append(out, fmt.Sprintf("NetworkCheck: %s -> %s", before.check, after.check))
	}
	if after.newestSuccess.Before(before.newestSuccess) {
		out = append(out, fmt.Sprintf("NetworkCheck's newest success rolled back: %s -> %s", before.newestSuccess, after.newestSuccess))
	}
	if after.checkEvents != before.checkEvents {
		out = append(out, fmt.Sprintf("NetworkCheck Events: %d -> %d", before.checkEvents, after.checkEvents))
	}
	return out
}

func (s *suite) leaseHolder(ctx context.Context) string {
	l, err := s.cs.CoordinationV1().Leases(namespace).Get(ctx, gatewayLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// gatewayTakeover deletes the leader gateway pod as a user or a node drain would (a
// graceful delete): the other replica takes the Lease and the Deployment replaces the pod.
// Nothing false is reported (no object Unreachable, no outage Event, no node condition),
// and once the agents are back every object reads as before with the same outage history.
//
// What the real nodes show and the simulated cluster (which restarts its gateway in the
// same slot) did not: the Service that selects the leader has no endpoint from the old
// leader's deletion until the new one labels itself, the agents back off meanwhile, and the
// new leader reads them silent after its settle time, so the objects read Unknown /
// ObserverSilent for a while. The figure records how long; docs/figures.md states it.
func (s *suite) gatewayTakeover(t *testing.T) {
	ctx := context.Background()
	leader := s.leaseHolder(ctx)
	require.NotEmpty(t, leader, "a gateway holds the Lease")
	var leaderPod string
	for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-gateway") {
		if strings.Contains(leader, p.Name) {
			leaderPod = p.Name
		}
	}
	require.NotEmpty(t, leaderPod, "Lease holder %q is none of the gateway pods", leader)
	before := s.record(ctx, t)
	deleted := time.Now()
	require.NoError(t, s.cs.CoreV1().Pods(namespace).Delete(ctx, leaderPod, metav1.DeleteOptions{}))
	var holder string
	for {
		holder = s.leaseHolder(ctx)
		if holder != "" && holder != leader {
			break
		}
		require.Empty(t, s.falseVerdicts(ctx, t, deleted))
		require.Less(t, time.Since(deleted), 2*time.Minute, "no other gateway took the Lease from %s", leader)
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(deleted)
	var unknownFrom, unknownTo time.Time
	d := s.awaitObjects(t, "every object as before the takeover", 3*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		if fv := s.falseVerdicts(ctx, t, deleted); len(fv) > 0 {
			return "false report: " + strings.Join(fv, "; ")
		}
		for _, o := range objs {
			if o.Status.Reachability == v1alpha1.ReachabilityUnknown {
				if unknownFrom.IsZero() {
					unknownFrom = time.Now()
				}
				unknownTo = time.Now()
			}
		}
		after := s.record(ctx, t)
		return strings.Join(before.diff(after), "; ")
	})
	require.Empty(t, s.falseVerdicts(ctx, t, deleted), "false reports during the takeover")
	require.NoError(t, s.cl.WaitDeploymentAvailable(ctx, s.cs, namespace, "netpulse-gateway", 3*time.Minute))
	// And it stays so past the new leader's settle time and takeover grace (30 s) and three
	// of the agents' rounds: nothing rolled back or re-emitted later, no agent read silent
	// (the check's status too, #28 item 6).
	for time.Since(deleted) < 50*time.Second {
		time.Sleep(time.Second)
		require.Empty(t, before.diff(s.record(ctx, t)), "the record changed after the takeover")
	}
	unknown := "none read Unknown"
	if !unknownFrom.IsZero() {
		unknown = fmt.Sprintf("objects read Unknown/ObserverSilent for about %.0f s", unknownTo.Sub(unknownFrom).Seconds()+1)
	}
	s.figure("leader gateway pod deleted → %s holds the Lease after %.1f s; no false report; %s; record as before %.0f s after the delete",
		holder, took.Seconds(), unknown, time.Since(deleted).Seconds())
	_ = d
}

// matrix runs `kubectl netpulse matrix` against the cluster as a workstation would.
func (s *suite) matrix(t *testing.T) {
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	plugin := filepath.Join(root, "bin", "kubectl-netpulse")
	_, err = os.Stat(plugin)
	require.NoError(t, err, "bin/kubectl-netpulse (make build)")
	out, err := exec.Command(plugin, "--kubeconfig", s.cl.Kubeconfig, "matrix").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("kubectl netpulse matrix:\n%s", out)
	for _, n := range s.cl.Nodes {
		require.Contains(t, string(out), n.Name)
	}
	require.NotContains(t, string(out), "node problems (")

	// The writer's summary beside its Lease, current by it (the leader since the takeover
	// writes its own at its first judgement).
	var status []byte
	current := regexp.MustCompile(`(?m)^netpulse/netpulse-gateway\s+0/1\s+[3-9]\s.*\syes$`)
	if !assert.Eventually(t, func() bool {
		status, err = exec.Command(plugin, "--kubeconfig", s.cl.Kubeconfig, "status", "-n", namespace).CombinedOutput()
		return err == nil && current.Match(status)
	}, 60*time.Second, 2*time.Second) {
		t.Fatalf("kubectl netpulse status never showed the writer's current summary: %v\n%s", err, status)
	}
	t.Logf("kubectl netpulse status:\n%s", status)
}

// footprint reads each netpulse container's memory and CPU from its cgroup on the node
// and reports them against the container's requests and limits.
func (s *suite) footprint(t *testing.T) {
	for _, p := range append(s.pods(t, "app.kubernetes.io/name=netpulse-agent"), s.pods(t, "app.kubernetes.io/name=netpulse-gateway")...) {
		n, err := s.cl.Node(p.Spec.NodeName)
		require.NoError(t, err)
		for _, cst := range p.Status.ContainerStatuses {
			id := cst.ContainerID[strings.Index(cst.ContainerID, "://")+3:]
			usage, rss, cpu, err := n.ContainerUsage(string(p.UID), string(p.Status.QOSClass), id)
			require.NoError(t, err)
			var spec corev1.Container
			for _, c := range p.Spec.Containers {
				if c.Name == cst.Name {
					spec = c
				}
			}
			age := time.Since(cst.State.Running.StartedAt.Time)
			s.figure("%s/%s on %s: memory working set %.1f MiB, anonymous %.1f MiB (request %s, limit %s), CPU %.2f%% of a core over its %.0f s (request %s)",
				p.Name, cst.Name, p.Spec.NodeName, float64(usage)/(1<<20), float64(rss)/(1<<20), spec.Resources.Requests.Memory(), spec.Resources.Limits.Memory(),
				100*cpu.Seconds()/age.Seconds(), age.Seconds(), spec.Resources.Requests.Cpu())
			if lim := spec.Resources.Limits.Memory(); !lim.IsZero() {
				require.Less(t, usage, lim.Value(), "%s/%s above its memory limit", p.Name, cst.Name)
			}
			peak, failcnt, oomKills, err := n.ContainerMemoryEvents(string(p.UID), string(p.Status.QOSClass), id)
			require.NoError(t, err)
			s.figure("%s/%s on %s: memory peak %.1f MiB (file pages included), limit reached %d times, OOM kills %d, restarts %d",
				p.Name, cst.Name, p.Spec.NodeName, float64(peak)/(1<<20), failcnt, oomKills, cst.RestartCount)
			// A container the OOM killer ended restarts: its limit is too small for it.
			require.LessOrEqual(t, oomKills, int64(0), "%s/%s: OOM kills in its cgroup", p.Name, cst.Name)
			if term := cst.LastTerminationState.Terminated; term != nil {
				require.NotEqual(t, "OOMKilled", term.Reason, "%s/%s was OOM-killed", p.Name, cst.Name)
			}
			// The agent's request is its measured steady state, anonymous memory
			// (docs/figures.md, "Agent memory"): every node pays it, so more means the figure
			// is stale. (The working set can also hold the binary's pages when the node's
			// page cache charged them to the container; the kernel reclaims those.)
			if req := spec.Resources.Requests.Memory(); p.Labels["app.kubernetes.io/name"] == "netpulse-agent" && !req.IsZero() {
				require.Less(t, rss, req.Value(), "%s/%s: anonymous memory above its memory request", p.Name, cst.Name)
			}
		}
	}
}

// uninstall: `helm uninstall` removes the release; the agents' objects go with their
// source pods; what stays is what docs/helm.md says stays: the CRDs, the namespace, the
// Lease and the node conditions.
func (s *suite) uninstall(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	s.helmCmd(t, "uninstall", "netpulse", "-n", namespace, "--wait", "--timeout", "2m")
	for {
		pods, err := s.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		objs, err := s.pnh.NetpulseV1alpha1().PodNetworkHealths("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		if len(pods.Items) == 0 && len(objs.Items) == 0 {
			break
		}
		require.Less(t, time.Since(start), 2*time.Minute, "%d pods and %d PodNetworkHealth objects left", len(pods.Items), len(objs.Items))
		time.Sleep(time.Second)
	}
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=netpulse"}
	var left []string
	crbs, err := s.cs.RbacV1().ClusterRoleBindings().List(ctx, sel)
	require.NoError(t, err)
	for _, o := range crbs.Items {
		left = append(left, "ClusterRoleBinding "+o.Name)
	}
	crs, err := s.cs.RbacV1().ClusterRoles().List(ctx, sel)
	require.NoError(t, err)
	for _, o := range crs.Items {
		left = append(left, "ClusterRole "+o.Name)
	}
	var names []string
	cms, err := s.cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range cms.Items {
		names = append(names, "ConfigMap "+o.Name)
	}
	secrets, err := s.cs.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range secrets.Items {
		names = append(names, "Secret "+o.Name)
	}
	svcs, err := s.cs.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range svcs.Items {
		names = append(names, "Service "+o.Name)
	}
	sas, err := s.cs.CoreV1().ServiceAccounts(namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range sas.Items {
		names = append(names, "ServiceAccount "+o.Name)
	}
	for _, n := range names {
		// What Kubernetes itself puts in every namespace.
		if n != "ConfigMap kube-root-ca.crt" && n != "ServiceAccount default" {
			left = append(left, n)
		}
	}
	require.Empty(t, left, "left behind by helm uninstall")
	res, err := s.cs.Discovery().ServerResourcesForGroupVersion("netpulse.io/v1alpha1")
	require.NoError(t, err, "the netpulse.io CRDs stay (Helm never deletes crds/)")
	var kinds []string
	for _, r := range res.APIResources {
		kinds = append(kinds, r.Name)
	}
	require.Contains(t, kinds, "podnetworkhealths")
	require.Contains(t, kinds, "networkchecks")
	s.figure("helm uninstall → no pod, no PodNetworkHealth, no release object left after %.0f s (CRDs kept)", time.Since(start).Seconds())
}

// dumpState logs what a failed assertion needs to be understood: every agent pod with its
// deletion time, every object's status, every Event with its times.
func (s *suite) dumpState(t *testing.T) {
	ctx := context.Background()
	t.Logf("pods:\n%s", s.cl.PodReport(ctx, s.cs, namespace))
	objs, _ := s.objects(ctx)
	for _, k := range slices.Sorted(maps.Keys(objs)) {
		b, _ := json.Marshal(objs[k].Status)
		t.Logf("object %s: %s", k, b)
	}
	// What each gateway replica counted as refused (the metric names the reason).
	for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-gateway") {
		if p.Status.PodIP == "" {
			continue
		}
		out, err := exec.Command("curl", "-s", "--max-time", "3", "http://"+p.Status.PodIP+":8888/metrics").Output()
		if err != nil {
			t.Logf("gateway %s metrics: %v", p.Name, err)
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "skipped") || strings.Contains(line, "refused") || strings.Contains(line, "observers") {
				t.Logf("gateway %s: %s", p.Name, line)
			}
		}
	}
	evs, _ := s.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	for _, ev := range evs.Items {
		t.Logf("event %s %s/%s %s first %s last %s x%d: %s", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason,
			ev.FirstTimestamp.Format("15:04:05"), ev.LastTimestamp.Format("15:04:05"), ev.Count, ev.Message)
	}
}
