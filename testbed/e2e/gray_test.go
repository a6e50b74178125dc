// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// Gray failures end to end: the gateway's gray judgement on real sockets, nft loss and the
// echo responder's delay in the nodes' namespaces, read from the objects as a user would.

// grayWant says which pairs must read Degraded with reason: those towards node, and those
// from it when fromToo. Every other pair must not be Degraded at all, and no pair towards
// node may read Unreachable while the fault holds (a node that answers part of its echoes,
// or answers late, is not down).
type grayWant struct {
	node    string
	reason  string
	fromToo bool
	// blame is what the message must name (the node the verdict is blamed on).
	blame string
	// orReason is a second reason a pair may read instead (a congested node both delays
	// and drops: each pair reads the one its judgement found first).
	orReason string
}

func (w grayWant) accepts(reason string) bool {
	return reason == w.reason || w.orReason != "" && reason == w.orReason
}

// awaitGray polls the objects until every wanted pair reads Degraded with the reason; it
// fails at once when another pair is Degraded or a pair towards the node is Unreachable,
// and after timeout. It returns how long it took from start.
func (e *env) awaitGray(t *testing.T, w grayWant, start time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	ctx := context.Background()
	nodeOf := map[string]string{} // pod name -> node
	for _, a := range e.cl.Agents() {
		nodeOf[a.Pod] = a.Node
	}
	for {
		objs, err := e.api.objects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for name, o := range objs {
			if o.Spec.TargetPodRef == nil {
				continue
			}
			from, to := nodeOf[o.Spec.SourcePodRef.Name], nodeOf[o.Spec.TargetPodRef.Name]
			if from == "" || to == "" {
				continue // a pod of another generation (its object is being pruned)
			}
			c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionDegraded)
			degraded := c != nil && c.Status == metav1.ConditionTrue
			if to == w.node && o.Status.Reachability == v1alpha1.Unreachable {
				t.Fatalf("%s reads Unreachable during a gray fault of %s: %+v", name, w.node, o.Status.Conditions)
			}
			if degraded && c.Reason == v1alpha1.ReasonAddressFamilyUnreachable {
				// Both families lose alike: random loss is not an address family's failure.
				t.Fatalf("%s (%s -> %s) reads %s during a gray fault of %s: %s", name, from, to, c.Reason, w.node, c.Message)
			}
			switch {
			case to == w.node || w.fromToo && from == w.node:
				if !degraded || !w.accepts(c.Reason) || !strings.Contains(c.Message, w.blame) {
					missing = append(missing, fmt.Sprintf("%s (%s -> %s): %s", name, from, to, condText(c)))
				}
			case degraded && from == w.node:
				// A pair from the node may carry it too (the node's own side).
			case degraded:
				t.Fatalf("%s (%s -> %s) is Degraded (%s: %s): only the pairs of %s may be", name, from, to, c.Reason, c.Message, w.node)
			}
		}
		if len(missing) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("not every pair of %s reads Degraded/%s blaming %s within %v: %v", w.node, w.reason, w.blame, timeout, missing)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func condText(c *metav1.Condition) string {
	if c == nil {
		return "no Degraded condition"
	}
	return fmt.Sprintf("Degraded=%s %s %q", c.Status, c.Reason, c.Message)
}

// awaitNoGray waits until no pair reads Degraded with a gray reason (PacketLoss,
// HighLatency): an earlier scenario's loss clears over its window once healed (within a
// minute of clean rounds at 1 s rounds), and a scenario that asserts what is Degraded
// starts from a clean picture. It fails after timeout, naming what is still Degraded.
func (e *env) awaitNoGray(t *testing.T, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		got, err := e.degradedReasons(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var gray []string
		for name, r := range got {
			if r == v1alpha1.ReasonPacketLoss || r == v1alpha1.ReasonHighLatency {
				gray = append(gray, name+": "+r)
			}
		}
		if len(gray) == 0 {
			if d := time.Since(start); d > time.Second {
				t.Logf("E2E gray verdicts of earlier scenarios cleared %.1fs into the wait", d.Seconds())
			}
			return
		}
		if time.Since(start) > timeout {
			t.Fatalf("gray verdicts still written %v after the scenarios before healed: %v", timeout, gray)
		}
		time.Sleep(time.Second)
	}
}

// TestSlowZoneLink: the link between the mesh's two zones answers 30 ms late, both ways
// (simcluster.DelayFrom on every node, for the other zone's addresses). Every pair across
// the zones reads Degraded/HighLatency "between zones" (the zone pair's latency, no node
// blamed), no pair inside a zone is Degraded, none is Unreachable; healed, every pair is
// healthy again. Before the zone pairs judged latency, the 4-node mesh read every node as
// slow at the target's side (each target's observers are two of three across the link).
func TestSlowZoneLink(t *testing.T) {
	e := requireGrayMesh(t)
	e.requireHealthy(t)
	e.awaitNoGray(t, 3*time.Minute)
	const delay = 30 * time.Millisecond
	zoneOf := map[string]string{}
	var ns []simcluster.Node
	for _, n := range e.cl.Nodes() {
		zoneOf[n.Name] = n.Zone
		ns = append(ns, n)
	}
	agents := e.cl.Agents()
	nodeOf := map[string]string{}
	for _, a := range agents {
		nodeOf[a.Pod] = a.Node
	}
	start := time.Now()
	for _, n := range ns {
		e.healOnCleanup(t, n.Name)
		var from []netip.Addr
		for _, o := range ns {
			if o.Zone != n.Zone {
				from = append(from, o.IPv4, o.IPv6)
			}
		}
		for _, a := range agents {
			if zoneOf[a.Node] != n.Zone {
				from = append(from, a.IPs...)
			}
		}
		if err := e.cl.DelayFrom(n.Name, delay, from); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for {
		objs, err := e.api.objects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for name, o := range objs {
			if o.Spec.TargetPodRef == nil {
				continue
			}
			from, to := nodeOf[o.Spec.SourcePodRef.Name], nodeOf[o.Spec.TargetPodRef.Name]
			if from == "" || to == "" {
				continue
			}
			if o.Status.Reachability == v1alpha1.Unreachable {
				t.Fatalf("%s (%s -> %s) reads Unreachable on a slow link: %+v", name, from, to, o.Status.Conditions)
			}
			c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionDegraded)
			degraded := c != nil && c.Status == metav1.ConditionTrue
			switch {
			case zoneOf[from] != zoneOf[to]:
				if !degraded || c.Reason != v1alpha1.ReasonHighLatency || !strings.Contains(c.Message, "between zones") {
					missing = append(missing, fmt.Sprintf("%s (%s -> %s): %s", name, from, to, condText(c)))
				}
			case degraded:
				t.Fatalf("%s (%s -> %s, inside %s) is Degraded (%s: %s) on a slow link between zones", name, from, to, zoneOf[from], c.Reason, c.Message)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Since(start) > lossTimeout {
			t.Fatalf("not every pair across the zones reads Degraded/HighLatency between zones within %v: %v", lossTimeout, missing)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("E2E slow zone link: every pair across the zones Degraded/HighLatency between zones %.1fs after the link began answering %v late", time.Since(start).Seconds(), delay)
	healed := time.Now()
	for _, n := range ns {
		if err := e.cl.Heal(n.Name); err != nil {
			t.Fatal(err)
		}
	}
	e.await(t, "recover", e.healthy("slow zone link", healed, pathExpect{}), recoverTimeout)
}
