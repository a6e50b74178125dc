// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/planner"
	"github.com/netpulse/netpulse/internal/shard"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// requireSharded is requireEnv for the sharded pass (shardsEnv >= 2).
func requireSharded(t *testing.T) *env {
	t.Helper()
	e := requireEnv(t)
	if shards < 2 {
		t.Skipf("a sharded scenario; this run has one gateway: `make test` runs it with %s=2 (and %s=chart)", shardsEnv, configEnv)
	}
	return e
}

// shardView is what the API shows of a sharded cluster at one moment.
type shardView struct {
	objects []v1alpha1.PodNetworkHealth
	nodeOf  map[string]string // agent pod UID -> node
}

func (e *env) shardView(t *testing.T) shardView {
	t.Helper()
	v := shardView{nodeOf: map[string]string{}}
	for _, a := range e.cl.Agents() {
		v.nodeOf[a.UID] = a.Node
	}
	l, err := e.api.pnh.NetpulseV1alpha1().PodNetworkHealths(simcluster.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("list PodNetworkHealth: %v", err)
		return v
	}
	v.objects = l.Items
	return v
}

// targetNode is the node of an object's target pod ("" if not an agent's).
func (v shardView) targetNode(o *v1alpha1.PodNetworkHealth) string {
	if o.Spec.TargetPodRef == nil {
		return ""
	}
	return v.nodeOf[string(o.Spec.TargetPodRef.UID)]
}

// stableRing is the stable pairs (source node -> target node) the agents' planner gives the
// full membership, as every agent computes it once it has seen every agent pod.
func stableRing(t *testing.T, agents []simcluster.Agent) map[string]string {
	t.Helper()
	members := make([]planner.Member, 0, len(agents))
	for _, a := range agents {
		members = append(members, planner.Member{ID: a.UID, Node: a.Node, Zone: a.Zone})
	}
	// The ring depends on the members and M only, not on K or the interval.
	plan, err := planner.New(members, planner.Config{K: 1, Stable: stablePeers, BaseInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ring := map[string]string{}
	for _, m := range members {
		for _, to := range plan.StableTargets(m.ID) {
			ring[m.Node] = to.Node
		}
	}
	return ring
}

// ringOf names the objects of the stable pairs in want (source node -> target node).
func (v shardView) ringOf(want map[string]string) map[string]bool {
	names := map[string]bool{}
	for i := range v.objects {
		o := &v.objects[i]
		if src := v.nodeOf[string(o.Spec.SourcePodRef.UID)]; src != "" && want[src] == v.targetNode(o) {
			names[o.Name] = true
		}
	}
	return names
}

// problems lists what is wrong with the view, "" if nothing: every object carries its
// target node's shard label and none reads ObserverSilent; every object of ring (the stable
// pairs, by name) is there and reads Reachable, Unreachable towards down, anything from down
// (its observer is cut off). Other objects (rotating pairs', kept after a failure or from a
// ring an agent saw before it saw every pod) are only checked for their label.
func (v shardView) problems(ring map[string]bool, down string) string {
	present := 0
	for i := range v.objects {
		o := &v.objects[i]
		node := v.targetNode(o)
		if label := fmt.Sprintf("%d-of-%d", shard.Of(node, shards), shards); o.Labels["netpulse.io/shard"] != label {
			return fmt.Sprintf("%s (towards %s) labelled %q, want %q", o.Name, node, o.Labels["netpulse.io/shard"], label)
		}
		if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReachable); c != nil && c.Reason == v1alpha1.ReasonObserverSilent {
			return fmt.Sprintf("%s reads ObserverSilent: a shard lost an agent it hears only by heartbeat", o.Name)
		}
		if !ring[o.Name] {
			continue // a rotating pair's object, kept after a failure
		}
		present++
		if v.nodeOf[string(o.Spec.SourcePodRef.UID)] == down {
			continue
		}
		want := v1alpha1.Reachable
		if node == down {
			want = v1alpha1.Unreachable
		}
		if o.Status.Reachability != want {
			return fmt.Sprintf("%s (towards %s) reads %s, want %s", o.Name, node, o.Status.Reachability, want)
		}
	}
	if present != len(ring) {
		return fmt.Sprintf("%d of the %d stable pairs' objects", present, len(ring))
	}
	return ""
}

func (e *env) nodeProblem(t *testing.T, node string) corev1.ConditionStatus {
	n, err := e.api.core.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Logf("get node %s: %v", node, err)
		return ""
	}
	for _, c := range n.Status.Conditions {
		if c.Type == nodeProblemType {
			return c.Status
		}
	}
	return ""
}

func (e *env) leaseHolder(t *testing.T, i int) string {
	l, err := e.api.core.CoordinationV1().Leases(simcluster.Namespace).Get(context.Background(), fmt.Sprintf("netpulse-gateway-%d", i), metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// await polls cond every 250 ms until it returns "" or timeout passes; it returns how long
// that took, or fails with cond's last problem.
func await(t *testing.T, what string, timeout time.Duration, cond func() string) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		if last = cond(); last == "" {
			return time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v: %s", what, timeout, last)
	return 0
}

// TestShardedCluster: the gateway as the chart's gateway.shards=2 renders it, two shards in
// their own slots, each leading its own Lease, the agents routing every target's points to
// its node's shard and their heartbeat to both. Every object is written by its target
// node's shard; a partition of a node of shard 1 reads Unreachable with that node's
// condition only; shard 1's gateway is killed (SIGKILL) and a new replica takes its Lease
// and resumes from the API without rewriting any object; a partition after that is
// detected by the replacement. No object reads ObserverSilent at any time.
func TestShardedCluster(t *testing.T) {
	e := requireSharded(t)
	all := map[string]bool{}
	var ofOne []string
	for _, a := range e.cl.Agents() {
		all[a.Node] = true
		if shard.Of(a.Node, shards) == 1 {
			ofOne = append(ofOne, a.Node)
		}
	}
	if len(ofOne) < 2 {
		t.Fatalf("shard 1 of %d owns %v: want 2 nodes at least (%d nodes)", shards, ofOne, nodes)
	}
	// The stable pairs are the planner's for the whole membership. An agent that started
	// before it saw every pod probed, for a round or two, a stable peer of a partial ring;
	// that pair's object stays (a rotating pair's, until it expires) and is not one of them.
	want := stableRing(t, e.cl.Agents())
	var ring map[string]bool
	took := await(t, "every stable pair Reachable and labelled with its target node's shard", convergeTimeout,
		func() string {
			v := e.shardView(t)
			ring = v.ringOf(want)
			if len(ring) != len(want) {
				return fmt.Sprintf("%d of the %d stable pairs have an object", len(ring), len(want))
			}
			return v.problems(ring, "")
		})
	healthy := func() string { return e.shardView(t).problems(ring, "") }
	t.Logf("figure: sharded (%d shards) healthy %v after the test began (%v after the agents started)", shards, took.Round(100*time.Millisecond), time.Since(e.agentsStarted).Round(time.Second))
	for i, gw := range e.shardGWs {
		if h := e.leaseHolder(t, i); h != gw.Name {
			t.Fatalf("Lease netpulse-gateway-%d held by %q, want %s", i, h, gw.Name)
		}
	}
	// The chart's shards relay (gateway.relay): each agent reached its node's shard only,
	// so the stable pairs across shards above were written by their owner from what the
	// other shard forwarded. Each shard forwarded, and lost nothing.
	for i := range e.shardGWs {
		forwarded, lost := e.relayed(t, i)
		if forwarded == 0 || lost > 0 {
			t.Fatalf("shard %d forwarded %v data points and lost %v: want some forwarded, none lost", i, forwarded, lost)
		}
		t.Logf("figure: sharded: shard %d forwarded %.0f data points of its agents to the other shard, lost none", i, forwarded)
	}

	partition := func(node, phase string) {
		t.Helper()
		start := time.Now()
		if err := e.cl.Partition(node); err != nil {
			t.Fatal(err)
		}
		took := await(t, phase+": "+node+" Unreachable, its condition True, no other", 60*time.Second, func() string {
			if p := e.shardView(t).problems(ring, node); p != "" {
				return p
			}
			for n := range all {
				st := e.nodeProblem(t, n)
				if n == node && st != corev1.ConditionTrue {
					return n + "'s condition " + string(st)
				}
				if n != node && st == corev1.ConditionTrue {
					return n + " marked too"
				}
			}
			return ""
		})
		t.Logf("figure: sharded %s: partition of %s (shard %d) in the API %v", phase, node, shard.Of(node, shards), took.Round(100*time.Millisecond))
		if err := e.cl.Heal(node); err != nil {
			t.Fatal(err)
		}
		healed := time.Now()
		await(t, phase+": healed", 60*time.Second, func() string {
			if p := healthy(); p != "" {
				return p
			}
			if st := e.nodeProblem(t, node); st == corev1.ConditionTrue {
				return node + "'s condition still True"
			}
			return ""
		})
		t.Logf("figure: sharded %s: healed in the API %v after the heal (%v after the partition)", phase, time.Since(healed).Round(100*time.Millisecond), time.Since(start).Round(time.Second))
	}
	partition(ofOne[0], "first leader")

	// Shard 1's leader crashes; a replica with a new identity starts in its slot.
	before := map[string]string{}
	for _, o := range e.shardView(t).objects {
		before[o.Name] = o.ResourceVersion
	}
	old := e.shardGWs[1]
	if err := e.cl.KillGateway(old); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gw, err := e.cl.StartGateway(ctx, e.shardGateway(1, "b"))
	if err != nil {
		t.Fatal(err)
	}
	e.shardGWs[1] = gw
	await(t, "the replacement leads shard 1", time.Minute, func() string {
		if h := e.leaseHolder(t, 1); h != gw.Name {
			return "held by " + h
		}
		return ""
	})
	t.Logf("figure: sharded: shard 1's replacement leads %v after the SIGKILL", time.Since(killed).Round(100*time.Millisecond))
	if h := e.leaseHolder(t, 0); h != e.shardGWs[0].Name {
		t.Fatalf("shard 0's Lease moved to %q", h)
	}
	time.Sleep(20 * time.Second)
	v := e.shardView(t)
	rewritten := 0
	for _, o := range v.objects {
		if rv, ok := before[o.Name]; ok && rv != o.ResourceVersion {
			rewritten++
			t.Logf("rewritten across the replacement: %s (%s)", o.Name, o.Status.Reachability)
		}
	}
	if rewritten > 0 {
		t.Fatalf("%d of %d objects rewritten in the 20 s after shard 1's replacement took over", rewritten, len(before))
	}
	if p := v.problems(ring, ""); p != "" {
		t.Fatalf("after the replacement: %s", p)
	}
	t.Logf("figure: sharded: 0 of %d objects rewritten in the 20 s after the takeover", len(before))

	partition(ofOne[1], "replacement")

	e.relayedCheck(t, ofOne[0])
}

// relayedCheck declares a check whose source pod runs on node, a node of shard 1: the agent
// there runs it and sends its results to the shard it reaches (shard 1, its node's), which
// relays them to shard 0, the only shard that folds check results in. The check reads
// Reachable, written by shard 0, only through the relay.
func (e *env) relayedCheck(t *testing.T, node string) {
	t.Helper()
	cl := e.cl
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := kubetest.EnsureNamespace(ctx, cl.Client, checksNamespace); err != nil {
		t.Fatal(err)
	}
	web, err := cl.StartWorkload(ctx, simcluster.WorkloadOptions{Pod: workloadPod("web-relay", map[string]string{"app": "web-relay"}), Node: node})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.StopWorkload(context.Background(), web) }()
	if _, err := cl.Serve(ctx, web, 8080); err != nil {
		t.Fatal(err)
	}
	src, err := cl.StartWorkload(ctx, simcluster.WorkloadOptions{Pod: workloadPod("client-relay", map[string]string{"app": "client-relay"}), Node: node})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.StopWorkload(context.Background(), src) }()
	ncs := e.api.pnh.NetpulseV1alpha1().NetworkChecks(checksNamespace)
	if _, err := ncs.Create(ctx, networkCheck("relayed", "client-relay", v1alpha1.CheckTarget{Address: net.JoinHostPort(web.IPv4.String(), "8080")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ncs.Delete(context.Background(), "relayed", metav1.DeleteOptions{}) }()
	took := await(t, "the check from a pod on "+node+" (shard 1) Reachable, written by shard 0 from what shard 1 relayed", 2*time.Minute, func() string {
		nc, err := ncs.Get(ctx, "relayed", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(nc.Status.Conditions, v1alpha1.ConditionReachable)
		if c == nil || c.Status != metav1.ConditionTrue || len(nc.Status.Successes) == 0 {
			return fmt.Sprintf("Reachable %v, %d successes", c, len(nc.Status.Successes))
		}
		return ""
	})
	t.Logf("figure: sharded: a declared check run on %s (shard 1's) reads Reachable %v after it was created, through the relay to shard 0", node, took.Round(100*time.Millisecond))
}

// relayed reads shard i's otelcol_pod_network_health_relay_datapoints: forwarded and lost
// (queue_full, send_failed).
func (e *env) relayed(t *testing.T, i int) (forwarded, lost float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(simcluster.GatewayIPv4(i).String(), "8888") + "/metrics"
	all, err := scrape(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if !strings.HasPrefix(s.name, "otelcol_pod_network_health_relay_datapoints") {
			continue
		}
		if s.labels["relay_outcome"] == "forwarded" {
			forwarded += s.value
		} else {
			lost += s.value
		}
	}
	return forwarded, lost
}
