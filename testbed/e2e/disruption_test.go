// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// setNodeReady writes node's Ready condition as the node lifecycle controller does when
// the kubelet stops posting status (Unknown / NodeStatusUnknown), or back to True. The
// simulated cluster runs no node lifecycle controller: this is its write, made by the test.
func (e *env) setNodeReady(ctx context.Context, node string, status corev1.ConditionStatus) error {
	reason, msg := "KubeletReady", "kubelet is posting ready status"
	if status != corev1.ConditionTrue {
		reason, msg = "NodeStatusUnknown", "Kubelet stopped posting node status."
	}
	now := metav1.Now()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now,
	}}}})
	if err != nil {
		return err
	}
	_, err = e.cl.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// TestKubeletStopsPosting: node-3's kubelet stops posting status (its Ready condition
// turns Unknown, as the node lifecycle controller writes it), then node-3 drops off the
// network (a node shutting down). The cluster said first that node-3 is not ready, so its
// failures are expected: the pairs towards it read Unknown / NodeNotReady, it gets no node
// condition and no outage Event. Ready again and healed, all is Reachable.
func TestKubeletStopsPosting(t *testing.T) {
	e := requireMesh(t)
	const node = "node-3"
	e.requireHealthy(t)
	e.healOnCleanup(t, node)
	ctx := context.Background()
	t.Cleanup(func() {
		if err := e.setNodeReady(ctx, node, corev1.ConditionTrue); err != nil {
			t.Errorf("node %s Ready again: %v", node, err)
		}
	})
	if err := e.setNodeReady(ctx, node, corev1.ConditionUnknown); err != nil {
		t.Fatal(err)
	}
	// A few rounds with the node not ready and still answering: the gateway's index sees
	// the condition, and the observations say so.
	time.Sleep(5 * time.Second)

	start := time.Now()
	if err := e.cl.Partition(node); err != nil {
		t.Fatal(err)
	}
	exp := e.expect("kubelet-stopped", start).
		all(pathExpect{disruption: v1alpha1.ReasonNodeNotReady}, towards(node)).
		all(pathExpect{reachable: true, stable: true}, not(involves(node)))
	exp.nodeProblem[node] = false
	exp.nodeProblemOthers = true
	e.await(t, "excused", exp, detectTimeout)
	time.Sleep(10 * time.Second)
	e.await(t, "still excused", exp, detectTimeout)
	e.requireNoOutageEventTowards(t, ctx, node, start)

	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	if err := e.setNodeReady(ctx, node, corev1.ConditionTrue); err != nil {
		t.Fatal(err)
	}
	rec := e.healthy("kubelet-stopped", time.Now(), pathExpect{})
	rec.nodeProblem[node] = false
	rec.nodeProblemOthers = true
	e.await(t, "recover", rec, recoverTimeout)
}

// TestPodDeleted: node-2's agent pod is deleted (graceful delete: deletionTimestamp, then
// its collector stops) and for 15 s nothing replaces it. Its peers stop probing it; the
// probes that fail while it goes are expected (PodTerminating): no pair towards it ever
// reads Unreachable, no outage Event names it, no node condition. A new pod then makes the
// mesh healthy again.
func TestPodDeleted(t *testing.T) {
	e := requireMesh(t)
	const node = "node-2"
	e.requireHealthy(t)
	e.healOnCleanup(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var gone simcluster.Agent
	for _, a := range e.cl.Agents() {
		if a.Node == node {
			gone = a
		}
	}
	start := time.Now()
	if err := e.cl.DeletePod(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Logf("E2E pod deleted: %s on %s, graceful delete took %.1fs", gone.Pod, node, time.Since(start).Seconds())
	for time.Since(start) < 15*time.Second {
		objs, err := e.api.objects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.Spec.TargetPodRef != nil && o.Spec.TargetPodRef.Name == gone.Pod && o.Status.Reachability == v1alpha1.Unreachable {
				t.Fatalf("%s reads Unreachable: a deleted pod's pairs are not an outage (%+v)", o.Name, o.Status.Conditions)
			}
		}
		n, err := e.cl.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if nodeCondition(n) == corev1.ConditionTrue {
			t.Fatalf("node %s marked: a deleted pod is not a node problem", node)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, a := range e.cl.Agents() {
		name := objectName(a, gone)
		if e.api.hasEvent(ctx, name, v1alpha1.EventOutageDetected, start) {
			t.Errorf("an outage Event on %s: the deleted pod's failures are expected", name)
		}
	}
	if _, err := e.cl.CreatePod(ctx, node); err != nil {
		t.Fatal(err)
	}
	rec := e.healthy("pod-deleted", time.Now(), pathExpect{})
	rec.gone = []simcluster.Agent{gone}
	e.await(t, "recover", rec, convergeTimeout)
}

// requireNoOutageEventTowards fails when any pair towards node's agent got an outage
// Event since start.
func (e *env) requireNoOutageEventTowards(t *testing.T, ctx context.Context, node string, since time.Time) {
	t.Helper()
	for _, src := range e.cl.Agents() {
		for _, dst := range e.cl.Agents() {
			if dst.Node != node || src.Node == node {
				continue
			}
			if name := objectName(src, dst); e.api.hasEvent(ctx, name, v1alpha1.EventOutageDetected, since) {
				t.Errorf("an outage Event on %s: %s's failures are expected", name, node)
			}
		}
	}
}

// degradedReasons maps every object to the reason of its Degraded condition when it is
// True.
func (e *env) degradedReasons(ctx context.Context) (map[string]string, error) {
	objs, err := e.api.objects(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, o := range objs {
		if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
			out[o.Name] = c.Reason
		}
	}
	return out, nil
}

// TestPathMTUBlackHole: node-4 drops every packet from the other nodes longer than 1,400
// bytes, silently (a hop with a smaller MTU whose ICMP errors are filtered). The agents'
// path-MTU probes (NETPULSE_PATH_MTU=true in this suite: 1,500-byte don't-fragment echoes
// every 6 rounds, and 1,280-byte controls) find it: every pair towards node-4, and every
// pair from it (an echo's reply is as large as the request, and node-4 drops it on the
// way in), reads Degraded / MTUBlackHole within two MTU rounds and stays Reachable
// (ordinary probes are small); no other pair is Degraded, and none was before the fault,
// although the probes ran in every scenario before. Healed, the next MTU round clears it.
func TestPathMTUBlackHole(t *testing.T) {
	e := requireMesh(t)
	const node = "node-4"
	e.requireHealthy(t)
	e.awaitNoGray(t, 2*time.Minute) // the scenarios before replaced pods; transients clear
	e.healOnCleanup(t, node)
	ctx := context.Background()
	before, err := e.degradedReasons(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) > 0 {
		t.Fatalf("Degraded on a healthy cluster with path-MTU probes on: %v", before)
	}
	var towards []string // the pairs towards node-4 and from it
	for _, src := range e.cl.Agents() {
		for _, dst := range e.cl.Agents() {
			if src.Node != dst.Node && (dst.Node == node || src.Node == node) {
				towards = append(towards, objectName(src, dst))
			}
		}
	}
	start := time.Now()
	if err := e.cl.DropAbove(node, 1400); err != nil {
		t.Fatal(err)
	}
	// Two MTU rounds (every 6 rounds of 1 s) plus batching; 45 s leaves room for a loaded
	// machine.
	const mtuTimeout = 45 * time.Second
	awaitDegraded := func(what string, want func(name string, reason string, found bool) bool) time.Duration {
		t.Helper()
		for {
			got, err := e.degradedReasons(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ok := true
			var why []string
			for _, name := range towards {
				r, found := got[name]
				if !want(name, r, found) {
					ok = false
					why = append(why, fmt.Sprintf("%s: Degraded=%v %q", name, found, r))
				}
			}
			for name, r := range got {
				if !slices.Contains(towards, name) {
					t.Fatalf("%s: %s is Degraded (%s): only the pairs towards and from %s may be", what, name, r, node)
				}
			}
			if ok {
				return time.Since(start)
			}
			if time.Since(start) > mtuTimeout {
				t.Fatalf("%s: not within %v: %v", what, mtuTimeout, why)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	d := awaitDegraded("black hole", func(_ string, r string, found bool) bool { return found && r == v1alpha1.ReasonMTUBlackHole })
	t.Logf("E2E path-MTU black hole: every pair towards and from %s Degraded/MTUBlackHole %.1fs after the drop (MTU probes every 6 rounds of %v)", node, d.Seconds(), probeInterval)
	exp := e.healthy("mtu", start, pathExpect{stable: true})
	e.await(t, "still reachable", exp, detectTimeout)

	start = time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	d = awaitDegraded("healed", func(_ string, _ string, found bool) bool { return !found })
	t.Logf("E2E path-MTU healed: no pair Degraded %.1fs after the heal", d.Seconds())
}
