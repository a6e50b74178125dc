// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
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
