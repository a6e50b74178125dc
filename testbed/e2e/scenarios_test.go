// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/simcluster"
	"github.com/netpulse/netpulse/testbed/viewtest"
)

// Bounds of the scenarios (rounds are 1s, every agent probes every other one each round;
// the gateway needs failures_to_unreachable = 3 failed rounds for an Unreachable verdict,
// successes_to_reachable = 2 for Reachable, and writes a verdict change at once).
const (
	convergeTimeout = 60 * time.Second // first full mesh of objects after the agents start
	detectTimeout   = 30 * time.Second // a fault shows everywhere it should
	recoverTimeout  = 30 * time.Second // healed: back to healthy

	delay = 20 * time.Millisecond
	// Healthy RTTs on a veth are tens of microseconds; p50 "sub-millisecond" is the bound.
	healthyRTT = time.Millisecond

	lossPercent = 20
	// The exporter rewrites a loss ratio that moved by more than loss_tolerance (0.05) at
	// most once a minute (MinChangeInterval), so a ratio written from the first few echoes
	// is corrected after a minute at the latest, then from ~360 echoes per pair (σ ≈ 0.02);
	// a first value already within 0.05 of the truth is not rewritten, and lies in range.
	lossTimeout = 100 * time.Second
	lossMin     = 0.10
	// smallLossTimeout bounds TestSmallLoss (2 %, see there).
	smallLossTimeout = 4 * time.Minute
	// slowNodeDelay is TestSlowNode's delay.
	slowNodeDelay = 50 * time.Millisecond
	lossMax       = 0.30

	// targetTTL is passed to the gateway as NETPULSE_TARGET_TTL (gateway.yaml's target_ttl,
	// default 10m; the exporter's minimum is 1m): objects whose target was deleted are
	// pruned this long after its last observation.
	targetTTL = time.Minute

	// nodeMinHold is passed to the gateway as NETPULSE_NODE_MIN_HOLD (gateway.yaml's
	// node_conditions.min_hold, default 1m): a marked node is cleared this long after the
	// last evidence; recoverTimeout must exceed it.
	nodeMinHold = 10 * time.Second
)

// healthy is the expectation of a healthy mesh: every agent's object for every other agent
// reads Reachable (with latency).
func (e *env) healthy(name string, start time.Time, pe pathExpect) *expectation {
	pe.reachable = true
	return e.expect(name, start).all(pe, nil)
}

// requireHealthy waits until the current mesh is healthy before a scenario injects its
// fault, so scenarios do not depend on each other's order.
func (e *env) requireHealthy(t *testing.T) {
	t.Helper()
	exp := e.healthy("", time.Now(), pathExpect{})
	e.await(t, "baseline", exp, convergeTimeout)
}

// healOnCleanup makes sure a failed scenario leaves no fault (and no node without its
// agent pod) behind for the next one.
func (e *env) healOnCleanup(t *testing.T, node string) {
	t.Cleanup(func() {
		if err := e.cl.Heal(node); err != nil {
			t.Errorf("heal %s: %v", node, err)
		}
		for _, a := range e.cl.Agents() {
			if a.Node == node {
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := e.cl.CreatePod(ctx, node); err != nil {
			t.Errorf("recreate the agent pod on %s: %v", node, err)
		}
	})
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

// TestGatewayCredentials: the gateway runs with the netpulse-gateway service account and
// only the deploy/rbac rules, and holds the writer Lease.
func TestGatewayCredentials(t *testing.T) {
	e := requireEnv(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", e.cl.GatewayKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Proxy = http.ProxyURL(nil)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Secrets(simcluster.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("gateway credentials: list secrets: got %v, want Forbidden", err)
	}
	if err := cs.CoreV1().Pods(simcluster.Namespace).Delete(ctx, "no-such-pod", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("gateway credentials: delete a pod: got %v, want Forbidden", err)
	}
	deadline := time.Now().Add(convergeTimeout)
	for {
		l, err := e.cl.Client.CoordinationV1().Leases(simcluster.Namespace).Get(ctx, "netpulse-gateway", metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == e.gw.Name {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lease netpulse-gateway not held by %s: %v %v", e.gw.Name, l, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The leader labels its own pod, which is what the gateway Service selects.
	for {
		p, err := e.cl.Client.CoreV1().Pods(simcluster.Namespace).Get(ctx, e.gw.Name, metav1.GetOptions{})
		if err == nil && p.Labels["netpulse.io/gateway-leader"] == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway pod %s not labelled as the leader: %v", e.gw.Name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestPartition: node-2 is cut off. Its pairs (both directions) go Unreachable with an
// ongoing outage, node-2 (only) gets netpulse.io/PodNetworkProblem=True by quorum of the
// other nodes, the other pairs stay Reachable, and a ConnectivityOutageDetected Event is
// written. After Heal: Reachable again, the outage has an end, ConnectivityRestored, and the
// node condition is False.
func TestPartition(t *testing.T) {
	e := requireMesh(t)
	const node = "node-2"
	e.requireHealthy(t)
	e.healOnCleanup(t, node)

	start := time.Now()
	if err := e.cl.Partition(node); err != nil {
		t.Fatal(err)
	}
	// The others cannot reach node-2: its pairs are Unreachable. node-2 cannot reach
	// anyone, but the quorum puts the blame on node-2: its own pairs read Unknown
	// (ObserverUnhealthy), not Unreachable, so no healthy target is accused.
	exp := e.expect("partition", start).
		all(pathExpect{reachable: false, ongoingOutage: true}, towards(node)).
		all(pathExpect{observerUnhealthy: true, ongoingOutage: true}, observedFrom(node)).
		all(pathExpect{reachable: true, stable: true}, not(involves(node)))
	exp.nodeProblem[node] = true
	exp.nodeProblemOthers = true
	observer := pair{"node-1", node}
	exp.events = []eventExpect{{observer, v1alpha1.EventOutageDetected}}
	e.await(t, "detect", exp, detectTimeout)
	e.checkView(t, node)

	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	rec := e.healthy("partition", healed, pathExpect{}).
		all(pathExpect{reachable: true, endedOutage: true}, involves(node))
	rec.outageSince = start
	rec.nodeProblem[node] = false
	rec.nodeProblemOthers = true
	rec.events = []eventExpect{{observer, v1alpha1.EventRestored}}
	e.await(t, "recover", rec, recoverTimeout)
}

// TestDrain: node-4 is cordoned (the first step of a drain), then cut off. The cluster said
// first that node-4 is going away, so its failures are expected: the pairs towards it read
// Unknown with reason NodeDraining, it gets no node condition and no outage Event, and every
// other pair stays Reachable. Uncordoned and healed, all is Reachable again.
func TestDrain(t *testing.T) {
	e := requireMesh(t)
	const node = "node-4"
	e.requireHealthy(t)
	e.healOnCleanup(t, node)
	ctx := context.Background()
	cordon := func(on bool) error {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
		_, err := e.cl.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() {
		if err := cordon(false); err != nil {
			t.Errorf("uncordon %s: %v", node, err)
		}
	})
	if err := cordon(true); err != nil {
		t.Fatal(err)
	}
	// A few rounds with the node cordoned and still answering, as in a drain before its
	// pods go: the gateway's index sees the cordon, and the observations say so.
	time.Sleep(5 * time.Second)

	start := time.Now()
	if err := e.cl.Partition(node); err != nil {
		t.Fatal(err)
	}
	exp := e.expect("drain", start).
		all(pathExpect{disruption: v1alpha1.ReasonNodeDraining}, towards(node)).
		all(pathExpect{reachable: true, stable: true}, not(involves(node)))
	exp.nodeProblem[node] = false
	exp.nodeProblemOthers = true
	e.await(t, "excused", exp, detectTimeout)
	// Held for a while: no verdict against the drained node, no Event.
	time.Sleep(10 * time.Second)
	e.await(t, "still excused", exp, detectTimeout)
	for _, src := range e.cl.Agents() {
		for _, dst := range e.cl.Agents() {
			if dst.Node != node || src.Node == node {
				continue
			}
			if name := objectName(src, dst); e.api.hasEvent(ctx, name, v1alpha1.EventOutageDetected, start) {
				t.Errorf("an outage Event on %s: the drained node's failures are expected", name)
			}
		}
	}

	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	if err := cordon(false); err != nil {
		t.Fatal(err)
	}
	rec := e.healthy("drain", time.Now(), pathExpect{})
	rec.nodeProblem[node] = false
	rec.nodeProblemOthers = true
	e.await(t, "recover", rec, recoverTimeout)
}

// TestDelay: node-3 answers echoes 20ms late. With the 5-minute window, the p50 of an
// existing pair moves only once half the window's samples are delayed (~2.5 min), and
// p90/p99/max are written only along with a verdict, p50 or loss change. So the scenario
// replaces node-3's agent pod while the delay is set: the pairs towards the new pod
// have only delayed samples, and their first status reads p50 >= 20ms; every other pair
// stays Reachable with a sub-millisecond p50.
func TestDelay(t *testing.T) {
	e := requireMesh(t)
	const node = "node-3"
	e.requireHealthy(t)
	e.awaitNoGray(t, 3*time.Minute) // TestDrain's heal clears first: this scenario asserts what is Degraded
	e.healOnCleanup(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if err := e.cl.DeletePod(ctx, node); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.cl.Delay(node, delay); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.CreatePod(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Logf("new agent pod on %s Ready %.1fs after the delay was set", node, time.Since(start).Seconds())
	exp := e.expect("delay", start).
		all(pathExpect{reachable: true, minP50: delay, maxP50: delay + 80*time.Millisecond}, towards(node)).
		all(pathExpect{reachable: true, stable: true, maxP50: healthyRTT}, not(towards(node)))
	e.await(t, "detect", exp, detectTimeout)
	logLatency(t, e, exp, node)
	// Judged: every pair towards the node reads Degraded/HighLatency blaming it, nothing else
	// is Degraded, nothing reads Unreachable. Its new pod's RTT is judged against its
	// node's learnt baseline (the node was quick before the delay).
	d := e.awaitGray(t, grayWant{node: node, reason: v1alpha1.ReasonHighLatency, blame: "at the target's node " + node}, start, detectTimeout+30*time.Second)
	t.Logf("E2E delay: every pair towards %s Degraded/HighLatency blaming it %.1fs after the delay was set", node, d.Seconds())

	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	// The delayed samples stay in the figures' window for 5 minutes; the judgement reads the
	// recent rounds, so the HighLatency verdict clears well before. Until it has, the next
	// scenario would see node-3's pairs Degraded (a CI run failed TestLoss that way).
	e.await(t, "recover", e.healthy("delay", healed, pathExpect{}), recoverTimeout)
	e.awaitNoGray(t, 3*time.Minute)
	t.Logf("E2E delay: no pair Degraded %.1fs after the heal", time.Since(healed).Seconds())
}

// logLatency reports the written p50 towards the delayed node and the slowest other p50.
func logLatency(t *testing.T, e *env, exp *expectation, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	objs, err := e.api.objects(ctx)
	if err != nil {
		t.Log(err)
		return
	}
	var towardsMin, towardsMax, othersMax time.Duration
	for p := range exp.paths {
		src, _ := exp.agent(p.from)
		dst, _ := exp.agent(p.to)
		o := objs[objectName(src, dst)]
		if o == nil || o.Status.Latency == nil {
			continue
		}
		p50, err := o.Status.Latency.P50.Duration()
		if err != nil {
			continue
		}
		if p.to == node {
			if towardsMin == 0 || p50 < towardsMin {
				towardsMin = p50
			}
			towardsMax = max(towardsMax, p50)
		} else {
			othersMax = max(othersMax, p50)
		}
	}
	t.Logf("E2E delay towards %s: p50 %v-%v per pair (injected %v); slowest other p50 %v",
		node, towardsMin, towardsMax, delay, othersMax)
}

// TestLoss: node-4's agent pod is deleted: the objects it owned (its pairs as source) are
// garbage-collected by kube-controller-manager (owner reference). Its successor starts
// while node-4 drops 20% of what it receives from the other nodes (so the new pairs'
// windows hold only lossy echoes): the lossRatio of every pair towards node-4 settles in
// 0.10-0.30 while the pairs not involving node-4 stay Reachable. The objects whose target
// was the deleted pod are pruned target_ttl (NETPULSE_TARGET_TTL=1m) after its last
// observation.
func TestLoss(t *testing.T) {
	e := requireMesh(t)
	const node = "node-4"
	e.requireHealthy(t)
	e.awaitNoGray(t, 3*time.Minute) // this scenario asserts what is Degraded
	e.healOnCleanup(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	old, _ := e.expect("", time.Now()).agent(node)
	deleted := time.Now()
	if err := e.cl.DeletePod(ctx, node); err != nil {
		t.Fatal(err)
	}
	gc := e.expect("delete-pod (gc of source-owned objects)", deleted)
	gc.gone = []simcluster.Agent{old}
	e.await(t, "detect", gc, detectTimeout)

	start := time.Now()
	if err := e.cl.Loss(node, lossPercent); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.CreatePod(ctx, node); err != nil {
		t.Fatal(err)
	}
	stable := not(involves(node))
	measure := e.expect("loss", start).
		all(pathExpect{reachable: true}, towards(node)).
		all(pathExpect{reachable: true, stable: true}, stable)
	measure.loss[node] = lossExpect{min: lossMin, max: lossMax}
	e.await(t, "detect", measure, lossTimeout)
	logLoss(t, e, measure, node)
	// Judged: the loss of every echo into node-4 reads Degraded/PacketLoss on every pair
	// towards it (the target's side) and from it (its own side: the replies to its echoes
	// are lost too), blaming node-4; nothing else is Degraded, nothing Unreachable.
	d := e.awaitGray(t, grayWant{node: node, reason: v1alpha1.ReasonPacketLoss, fromToo: true, blame: node}, start, lossTimeout)
	t.Logf("E2E loss: every pair towards and from %s Degraded/PacketLoss blaming it %.1fs after the loss began", node, d.Seconds())

	// The pairs towards the deleted pod: pruned after the target TTL.
	pruned := e.expect("delete-pod (target ttl)", deleted)
	pruned.goneTargets = []simcluster.Agent{old}
	e.await(t, "prune", pruned, targetTTL+60*time.Second)

	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	e.await(t, "recover", e.healthy("loss", healed, pathExpect{}), recoverTimeout)
}

func logLoss(t *testing.T, e *env, exp *expectation, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	objs, err := e.api.objects(ctx)
	if err != nil {
		t.Log(err)
		return
	}
	dst, _ := exp.agent(node)
	var parts []string
	var totalSent, totalLost int32
	for _, src := range exp.agents {
		if src.Node == node {
			continue
		}
		if o := objs[objectName(src, dst)]; o != nil {
			var sent, lost int32
			for _, pr := range o.Status.Probes {
				sent, lost = sent+pr.Sent, lost+pr.Lost
			}
			totalSent, totalLost = totalSent+sent, totalLost+lost
			parts = append(parts, fmt.Sprintf("%s %s (%d/%d)", src.Node, o.Status.LossRatio, lost, sent))
		}
	}
	t.Logf("E2E loss towards %s: lossRatio %s (injected %d%%, accepted %.2f-%.2f)",
		node, strings.Join(parts, ", "), lossPercent, lossMin, lossMax)
	// A written ratio may rest on few echoes: the first one is written from the pair's
	// first rounds, and one within loss_tolerance (0.05) of later estimates is not
	// rewritten before the heartbeat. Each ratio was asserted in range above; the aggregate
	// is judged only when enough echoes stand behind it.
	if totalSent < 200 {
		t.Logf("E2E loss towards %s: the written ratios rest on %d echoes (first writes, within tolerance since); no aggregate", node, totalSent)
		return
	}
	agg := float64(totalLost) / float64(totalSent)
	t.Logf("E2E loss towards %s over all pairs: %.3f (%d/%d echoes)", node, agg, totalLost, totalSent)
	if agg < lossMin || agg > lossMax {
		t.Errorf("loss towards %s over all pairs: %.3f outside [%.2f, %.2f]", node, agg, lossMin, lossMax)
	}
}

// TestLossyObserver (here, before TestRoll replaces every pod and with them the windows that
// still hold the loss: TestHealthyMesh wants lossRatio 0): node-2 loses 10 % of what it sends (its own uplink: its echo requests
// and its replies to its peers' echoes). Every pair of node-2 reads Degraded/PacketLoss
// blaming node-2 (towards it, the target's side; from it, its own side), no other pair is
// Degraded, none reads Unreachable; healed, every pair is healthy again.
func TestLossyObserver(t *testing.T) {
	e := requireMesh(t)
	const node = "node-2"
	e.requireHealthy(t)
	e.awaitNoGray(t, 3*time.Minute) // TestLoss's node-4 clears first
	e.healOnCleanup(t, node)
	start := time.Now()
	if err := e.cl.EgressLoss(node, 10); err != nil {
		t.Fatal(err)
	}
	d := e.awaitGray(t, grayWant{node: node, reason: v1alpha1.ReasonPacketLoss, fromToo: true, blame: node}, start, lossTimeout)
	t.Logf("E2E lossy observer: every pair of %s Degraded/PacketLoss blaming it %.1fs after its egress began losing 10%%", node, d.Seconds())
	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	e.await(t, "recover", e.healthy("lossy observer", healed, pathExpect{}), recoverTimeout)
}

// TestHalfLoss: node-3 loses half of what it receives, the 50 % run (which read
// AddressFamilyUnreachable, a wrong diagnosis, or nothing at all). A node that answers most
// probes is not down (3 echoes a probe: a probe fails when all 3 are lost, 1 in 8) and both
// address families lose alike: every pair of node-3 reads Degraded/PacketLoss blaming
// node-3 (towards it; from it, the replies to its echoes are lost too), none reads
// Unreachable or AddressFamilyUnreachable at any poll, no other pair is Degraded; healed,
// every pair is healthy again.
func TestHalfLoss(t *testing.T) {
	e := requireGrayMesh(t)
	const node = "node-3"
	e.requireHealthy(t)
	e.awaitNoGray(t, 3*time.Minute) // TestLossyObserver's node-2 clears first
	e.healOnCleanup(t, node)
	start := time.Now()
	if err := e.cl.Loss(node, 50); err != nil {
		t.Fatal(err)
	}
	w := grayWant{node: node, reason: v1alpha1.ReasonPacketLoss, fromToo: true, blame: node}
	d := e.awaitGray(t, w, start, lossTimeout)
	t.Logf("E2E half loss: every pair of %s Degraded/PacketLoss blaming it %.1fs after it began losing 50%% of its input", node, d.Seconds())
	// Held 20 s, polled: still no Unreachable, no wrong diagnosis, nothing else Degraded.
	for held := time.Now(); time.Since(held) < 20*time.Second; time.Sleep(2 * time.Second) {
		e.awaitGray(t, w, held, lossTimeout)
	}
	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	e.await(t, "recover", e.healthy("half loss", healed, pathExpect{}), recoverTimeout)
}

// TestCongestedNode: node-1's uplink is shaped to 2 Mbit/s with a 200 ms queue and a bulk
// sender keeps the queue full (simcluster.Congest), the congested node (RTT p50
// 208 ms, loss 0.17-0.23, and Reachable everywhere before the gray judgement). Everything
// node-1 sends waits ~200 ms and about a third is dropped: its echo replies (pairs towards
// it) and its own echo requests (pairs from it). Every pair of node-1 reads Degraded with
// HighLatency or PacketLoss blaming node-1, none reads Unreachable, no other pair is
// Degraded; healed, every pair is healthy again.
func TestCongestedNode(t *testing.T) {
	e := requireGrayMesh(t)
	const node, peer = "node-1", "node-4"
	e.requireHealthy(t)
	e.awaitNoGray(t, 3*time.Minute) // TestHalfLoss's node-3 clears first
	e.healOnCleanup(t, node)
	start := time.Now()
	if err := e.cl.Congest(node, peer, 2000, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	w := grayWant{node: node, reason: v1alpha1.ReasonHighLatency, orReason: v1alpha1.ReasonPacketLoss, fromToo: true, blame: node}
	d := e.awaitGray(t, w, start, lossTimeout)
	t.Logf("E2E congested node: every pair of %s Degraded (HighLatency or PacketLoss) blaming it %.1fs after its uplink was congested", node, d.Seconds())
	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	e.await(t, "recover", e.healthy("congested node", healed, pathExpect{}), recoverTimeout)
}

// TestSmallLoss: node-2 drops 2 % of what it receives (the issue's "a NIC that drops a few
// percent"): its peers' echo requests and the replies to its own echoes. Every pair of
// node-2 reads Degraded/PacketLoss blaming node-2, none reads Unreachable or
// AddressFamilyUnreachable, no other pair is Degraded; healed, every pair is healthy again.
// At 1 s rounds node-2 gets 9 echo requests a second: the sequential bound for 2 % against
// the 0.1 % background at 12 nats is ~290 echoes, ~33 s; smallLossTimeout allows for the
// held rounds, the two slots and the leave-one-out.
func TestSmallLoss(t *testing.T) {
	e := requireGrayMesh(t)
	const node = "node-2"
	e.requireHealthy(t)
	e.awaitNoGray(t, 3*time.Minute)
	e.healOnCleanup(t, node)
	start := time.Now()
	if err := e.cl.Loss(node, 2); err != nil {
		t.Fatal(err)
	}
	w := grayWant{node: node, reason: v1alpha1.ReasonPacketLoss, fromToo: true, blame: node}
	d := e.awaitGray(t, w, start, smallLossTimeout)
	t.Logf("E2E small loss: every pair of %s Degraded/PacketLoss blaming it %.1fs after it began losing 2%% of its input", node, d.Seconds())
	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	e.await(t, "recover", e.healthy("small loss", healed, pathExpect{}), recoverTimeout)
}

// TestSlowNode: node-4, quick so far (its baseline learnt), answers echoes 50 ms late (the
// issue's "+50 ms"; simcluster.Delay: a userspace responder in its namespace). Every pair
// towards node-4 reads Degraded/HighLatency blaming node-4 within a few rounds, nothing else
// is Degraded, nothing reads Unreachable; healed, every pair is healthy again.
func TestSlowNode(t *testing.T) {
	e := requireGrayMesh(t)
	const node = "node-4"
	e.requireHealthy(t)
	e.awaitNoGray(t, 3*time.Minute)
	e.healOnCleanup(t, node)
	start := time.Now()
	if err := e.cl.Delay(node, slowNodeDelay); err != nil {
		t.Fatal(err)
	}
	w := grayWant{node: node, reason: v1alpha1.ReasonHighLatency, blame: "at the target's node " + node}
	d := e.awaitGray(t, w, start, detectTimeout)
	t.Logf("E2E slow node: every pair towards %s Degraded/HighLatency blaming it %.1fs after it began answering %v late", node, d.Seconds(), slowNodeDelay)
	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	e.await(t, "recover", e.healthy("slow node", healed, pathExpect{}), recoverTimeout)
}

// TestRoll: a DaemonSet-style roll replaces every agent pod (new UIDs, new IPs). The new
// pods get objects for every pair, Reachable, and the old pods' objects are
// garbage-collected with their pods.
func TestRoll(t *testing.T) {
	e := requireMesh(t)
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
	oldUIDs := map[string]bool{}
	for _, a := range before {
		oldUIDs[a.UID] = true
	}
	for _, a := range after {
		if oldUIDs[a.UID] {
			t.Fatalf("agent on %s kept its UID %s", a.Node, a.UID)
		}
	}
	t.Logf("E2E roll: %d agents replaced in %.1fs", len(after), rolled.Sub(rollStart).Seconds())

	exp := e.healthy("roll", rolled, pathExpect{})
	exp.gone = before
	e.await(t, "detect", exp, convergeTimeout)

	// The API holds exactly the new pods, all Ready.
	pods, err := e.cl.Client.CoreV1().Pods(simcluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=netpulse-agent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != len(after) {
		t.Errorf("%d agent pods in the API after the roll, want %d", len(pods.Items), len(after))
	}
	for _, p := range pods.Items {
		if oldUIDs[string(p.UID)] {
			t.Errorf("pod %s (uid %s) is one of the old agents", p.Name, p.UID)
		}
		if !podReady(&p) {
			t.Errorf("pod %s is not Ready", p.Name)
		}
	}

	// Objects the new pods wrote about old pods that were still running during the roll
	// are pruned after the target TTL; then exactly the new mesh remains.
	pruned := e.expect("roll (target ttl)", rolled)
	pruned.goneTargets = before
	e.await(t, "prune", pruned, targetTTL+60*time.Second)
	// Then exactly the new mesh remains. A new agent that probed an old pod's address in its
	// first rounds (before its informer dropped the pod) can leave a pair the gateway
	// attributed to whatever owns that address now (in the simulated cluster a first
	// generation pod has its node's address): not probed again, it goes once its observer's
	// ring has moved on (verdict.RingMovedRounds), so the count is awaited, not read once.
	want := len(after) * (len(after) - 1)
	deadline := time.Now().Add(targetTTL + 60*time.Second)
	for {
		objs, err := e.api.objects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) == want {
			t.Logf("E2E roll: exactly the new mesh's %d objects %.1fs after the roll", want, time.Since(rolled).Seconds())
			break
		}
		if time.Now().After(deadline) {
			var names []string
			for _, o := range objs {
				tgt := ""
				switch {
				case o.Spec.TargetPodRef != nil:
					tgt = o.Spec.TargetPodRef.Name
				case o.Spec.TargetNodeRef != nil:
					tgt = "node " + o.Spec.TargetNodeRef.Name
				case o.Spec.TargetEndpoint != nil:
					tgt = fmt.Sprintf("endpoint %+v", *o.Spec.TargetEndpoint)
				}
				names = append(names, fmt.Sprintf("%s→%s (%s, created %s, %s)", o.Spec.SourcePodRef.Name, tgt, o.Spec.TargetKind, o.CreationTimestamp.Format("15:04:05"), o.Status.Reachability))
			}
			slices.Sort(names)
			t.Fatalf("%d PodNetworkHealth objects after the roll, want %d (roll done %s):\n%s", len(objs), want, rolled.Format("15:04:05"), strings.Join(names, "\n"))
		}
		time.Sleep(time.Second)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestAPIServerOutage: kube-apiserver stops; while it is down node-1 is partitioned. When
// it is back, the gateway (its leader election and writer) resumes: node-1's pairs reach
// the API as Unreachable, and Reachable again after Heal.
func TestAPIServerOutage(t *testing.T) {
	e := requireMesh(t)
	const node = "node-1"
	e.requireHealthy(t)
	e.healOnCleanup(t, node)

	stopping := time.Now()
	if err := e.cl.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver stopped in %.1fs", time.Since(stopping).Seconds())
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
	if err := e.cl.Partition(node); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * probeInterval) // the verdict changes while the API is away
	if _, err := e.cl.Client.Discovery().ServerVersion(); err == nil {
		t.Fatal("kube-apiserver answered during the outage")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.cl.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	back := time.Now()
	t.Logf("E2E api outage: kube-apiserver down %.1fs", back.Sub(stopping).Seconds())
	exp := e.expect("api-restart", back).
		all(pathExpect{reachable: false, ongoingOutage: true}, towards(node)).
		all(pathExpect{observerUnhealthy: true, ongoingOutage: true}, observedFrom(node)).
		all(pathExpect{reachable: true}, not(involves(node)))
	exp.outageSince = stopping
	// As TestAPIServerOutageUnderLoad: after the API is back, client-go's reflectors and the
	// writer's back-off may wait up to 30 s each before the first write lands (60 s failed
	// once in a clean-clone CI run: 2 of 3 pairs still unwritten).
	e.await(t, "detect", exp, 90*time.Second)

	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	rec := e.healthy("api-restart", healed, pathExpect{}).all(pathExpect{reachable: true, endedOutage: true}, involves(node))
	rec.outageSince = stopping
	e.await(t, "recover", rec, recoverTimeout)
}

// checkView opens the gateway's connectivity view in headless Chromium while node is
// partitioned and its condition is True: the page must show the node as a problem node
// and its column as Unreachable. The screenshot is kept (its path is logged).
func (e *env) checkView(t *testing.T, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shot := filepath.Join(os.TempDir(), "netpulse-e2e-matrix.png")
	url := "http://" + net.JoinHostPort(simcluster.HostIPv4.String(), "8089") + "/#node=" + node
	var dom string
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		dom, err = viewtest.RenderPage(ctx, url, shot)
		if err == nil && strings.Contains(dom, `data-problem-node="`+node+`" data-status="True"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view at %s does not show %s as a problem node (err %v):\n%.2000s", url, node, err, dom)
		}
		time.Sleep(2 * time.Second)
	}
	if !regexp.MustCompile(`<th[^>]*data-node="` + node + `"[^>]*data-condition="True"[^>]*data-target-verdict="Unreachable"`).MatchString(dom) {
		t.Errorf("the view's column of %s is not marked Unreachable with its condition True", node)
	}
	t.Logf("E2E view: %s shown partitioned in headless Chromium; screenshot %s", node, shot)
}
