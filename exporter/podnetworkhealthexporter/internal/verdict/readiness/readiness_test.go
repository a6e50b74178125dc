// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package readiness

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func pod(name, node string, created time.Time) PodInfo {
	return PodInfo{Namespace: "shop", Name: name, UID: "uid-" + name, Node: node, Created: created, HasGate: true}
}

func seen(p PodInfo, fromNode string, at time.Time, ok bool) observation.Observation {
	return observation.Observation{
		Source:    observation.Source{Namespace: "netpulse", Name: "agent-" + fromNode, UID: "u-" + fromNode, Node: fromNode},
		Target:    observation.Target{Kind: observation.TargetPod, Namespace: p.Namespace, Name: p.Name, UID: p.UID, Node: p.Node, Address: "10.0.0.1"},
		ProbeType: "tcp",
		Timestamp: at,
		Success:   ok,
	}
}

func TestReachedFromAnotherNode(t *testing.T) {
	g := NewGate(Config{})
	p := pod("checkout-1", "node-a", t0)
	g.Observe(seen(p, "node-a", t0.Add(time.Second), true))    // same node: does not count
	g.Observe(seen(p, "node-b", t0.Add(2*time.Second), false)) // failed: does not count
	assert.Empty(t, g.Decide([]PodInfo{p}, t0.Add(3*time.Second)))

	g.Observe(seen(p, "node-c", t0.Add(4*time.Second), true))
	flips := g.Decide([]PodInfo{p}, t0.Add(5*time.Second))
	require.Len(t, flips, 1)
	assert.Equal(t, Flip{
		Namespace: "shop", Name: "checkout-1", UID: "uid-checkout-1", ConditionType: DefaultConditionType, Status: StatusTrue,
		Reason:  ReasonReached,
		Message: "reached over the pod network from netpulse/agent-node-c on node node-c (tcp) at 2026-03-01T12:00:04Z",
	}, flips[0])

	// Handed out once: not again while the writer's update travels, again after RetryAfter
	// (the write may have been lost), never once the pod shows True.
	assert.Empty(t, g.Decide([]PodInfo{p}, t0.Add(10*time.Second)))
	assert.Len(t, g.Decide([]PodInfo{p}, t0.Add(36*time.Second)), 1)
	p.Condition = StatusTrue
	assert.Empty(t, g.Decide([]PodInfo{p}, t0.Add(time.Hour)))
}

func TestReachRules(t *testing.T) {
	g := NewGate(Config{})
	// A reach by name of an earlier incarnation (before this pod was created) does not count.
	old := pod("db-0", "node-a", t0)
	old.UID = "uid-old"
	g.Observe(seen(old, "node-b", t0.Add(time.Minute), true))
	p := pod("db-0", "node-a", t0.Add(2*time.Minute))
	assert.Empty(t, g.Decide([]PodInfo{p}, t0.Add(3*time.Minute)))
	// A reach that names the pod by namespace/name only counts once it is recent enough.
	byName := seen(p, "node-b", t0.Add(4*time.Minute), true)
	byName.Target.UID = ""
	g.Observe(byName)
	assert.Len(t, g.Decide([]PodInfo{p}, t0.Add(5*time.Minute)), 1)

	// Node targets, unknown observer nodes and pods without the gate are ignored.
	q := pod("web-1", "node-a", t0)
	nodeTarget := seen(q, "node-b", t0, true)
	nodeTarget.Target.Kind = observation.TargetNode
	noNode := seen(q, "", t0, true)
	g.Observe(nodeTarget, noNode)
	assert.Empty(t, g.Decide([]PodInfo{q}, t0.Add(time.Hour)))
	g.Observe(seen(q, "node-b", t0, true))
	q.HasGate = false
	assert.Empty(t, g.Decide([]PodInfo{q}, t0.Add(time.Hour)))
	// Without the pod's node, the target node of the observation is used.
	q.HasGate, q.Node = true, ""
	assert.Len(t, g.Decide([]PodInfo{q}, t0.Add(time.Hour)), 1)
}

func TestFailOpen(t *testing.T) {
	p := pod("lonely", "node-a", t0)
	g := NewGate(Config{FailOpenTimeout: 5 * time.Minute})
	assert.Empty(t, g.Decide([]PodInfo{p}, t0.Add(5*time.Minute-time.Second)))
	flips := g.Decide([]PodInfo{p}, t0.Add(5*time.Minute))
	require.Len(t, flips, 1)
	assert.Equal(t, ReasonFailOpen, flips[0].Reason)
	assert.Equal(t, StatusTrue, flips[0].Status)
	assert.Equal(t, "not reached over the pod network from another node within 5m0s of creation; failing open", flips[0].Message)
	// Disabled by default.
	assert.Empty(t, NewGate(Config{}).Decide([]PodInfo{p}, t0.Add(24*time.Hour)))
}

// kube-system's pods and system-critical pods that declare the gate are never held back:
// True at once, never reached, without fail-open.
func TestExemptPodsAreNeverGated(t *testing.T) {
	dns := pod("coredns-1", "node-a", t0)
	dns.Namespace, dns.Exempt = "kube-system", Exempt("kube-system", "")
	cni := pod("cni-1", "node-a", t0)
	cni.Namespace, cni.Exempt = "cni", Exempt("cni", "system-node-critical")
	ctl := pod("ctl-1", "node-a", t0)
	ctl.Exempt = Exempt("shop", "system-cluster-critical")
	web := pod("web-1", "node-a", t0)
	web.Exempt = Exempt("shop", "high")
	flips := NewGate(Config{}).Decide([]PodInfo{dns, cni, ctl, web}, t0)
	require.Len(t, flips, 3, "every exempt pod, not the workload")
	for _, f := range flips {
		assert.Equal(t, ReasonExempt, f.Reason, f.Name)
		assert.Equal(t, StatusTrue, f.Status)
		assert.NotEqual(t, "web-1", f.Name)
	}
}

func TestRateLimitOldestFirst(t *testing.T) {
	g := NewGate(Config{MaxFlipsPerMinute: 10, FailOpenTimeout: time.Minute})
	var pods []PodInfo
	for i := range 100 {
		pods = append(pods, pod(fmt.Sprintf("p-%03d", 99-i), "node-a", t0.Add(time.Duration(99-i)*time.Second)))
	}
	now := t0.Add(10 * time.Minute)
	flips := g.Decide(pods, now)
	require.Len(t, flips, 10, "the burst")
	assert.Equal(t, "p-000", flips[0].Name, "oldest first")
	assert.Equal(t, "p-009", flips[9].Name)
	assert.Equal(t, 90, g.Backlog())
	flips = g.Decide(pods, now.Add(21*time.Second))
	require.Len(t, flips, 3, "10 per minute: 3.5 tokens after 21s")
	assert.Equal(t, "p-010", flips[0].Name, "handed-out pods are not repeated")
	flips = g.Decide(pods, now.Add(10*time.Minute))
	assert.Len(t, flips, 10, "the bucket holds at most a minute's worth")
}

// Property: whatever the observations and pods, every flip sets True, pods already True are
// never touched, reached flips are backed by a reach from another node, and the number of
// flips in any interval stays within the token bucket (burst + rate x length).
func TestGateInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for iter := range 100 {
		rate := 1 + rng.IntN(20)
		g := NewGate(Config{MaxFlipsPerMinute: rate, FailOpenTimeout: time.Duration(rng.IntN(3)) * time.Minute})
		nodes := []string{"node-a", "node-b", "node-c"}
		var pods []PodInfo
		for i := range 5 + rng.IntN(60) {
			p := pod(fmt.Sprint("p-", i), nodes[rng.IntN(3)], t0.Add(time.Duration(rng.IntN(600))*time.Second))
			p.HasGate = rng.IntN(5) != 0
			if rng.IntN(5) == 0 {
				p.Condition = StatusTrue
			}
			pods = append(pods, p)
		}
		reached := map[string]bool{}
		var flipTimes []time.Time
		now := t0
		for range 100 {
			now = now.Add(time.Duration(1+rng.IntN(20)) * time.Second)
			for range rng.IntN(10) {
				p := pods[rng.IntN(len(pods))]
				from := nodes[rng.IntN(3)]
				ok := rng.IntN(3) != 0
				g.Observe(seen(p, from, now, ok))
				if ok && from != p.Node && !now.Before(p.Created) {
					reached[p.UID] = true
				}
			}
			for _, f := range g.Decide(pods, now) {
				require.Equal(t, StatusTrue, f.Status)
				var p *PodInfo
				for i := range pods {
					if pods[i].UID == f.UID {
						p = &pods[i]
					}
				}
				require.NotNil(t, p)
				require.True(t, p.HasGate, "iter %d", iter)
				require.NotEqual(t, StatusTrue, p.Condition, "iter %d: never touch a pod that is True", iter)
				if f.Reason == ReasonReached {
					require.True(t, reached[f.UID], "iter %d: %s flipped without a reach from another node", iter, f.Name)
				}
				flipTimes = append(flipTimes, now)
				if rng.IntN(2) == 0 {
					p.Condition = StatusTrue // the write reached the informer
				}
			}
		}
		for i := range flipTimes {
			for j := i; j < len(flipTimes); j++ {
				window := flipTimes[j].Sub(flipTimes[i])
				assert.LessOrEqual(t, float64(j-i+1), float64(rate)+window.Minutes()*float64(rate)+1e-9, "iter %d", iter)
			}
		}
	}
}

func TestExpire(t *testing.T) {
	g := NewGate(Config{})
	p := pod("x", "node-a", t0)
	g.Observe(seen(p, "node-b", t0, true))
	assert.Equal(t, 0, g.Expire(t0.Add(15*time.Minute)))
	assert.Equal(t, 1, g.Expire(t0.Add(15*time.Minute+time.Second)), "one target under two keys")
	assert.Empty(t, g.Decide([]PodInfo{p}, t0.Add(16*time.Minute)))
}

func TestGateConcurrentUse(t *testing.T) {
	g := NewGate(Config{})
	pods := []PodInfo{pod("a", "node-a", t0), pod("b", "node-b", t0)}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				now := t0.Add(time.Duration(i) * time.Second)
				g.Observe(seen(pods[w%2], "node-c", now, true))
				_ = g.Decide(pods, now)
				_ = g.Expire(now)
				_ = g.Backlog()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, DefaultConditionType, g.Config().ConditionType)
}

// With MinReachingNodes 2 (authenticated observers), one observer node - however many
// times it reports, and however many of its pods - does not make a pod ready; a second
// node does, and the flip is dated by it.
func TestMinReachingNodes(t *testing.T) {
	g := NewGate(Config{MinReachingNodes: 2})
	p := pod("checkout-1", "node-a", t0)
	for i := range 5 {
		g.Observe(seen(p, "node-b", t0.Add(time.Duration(i+1)*time.Second), true))
	}
	g.Observe(seen(p, "node-a", t0.Add(6*time.Second), true)) // the pod's own node: never counts
	assert.Empty(t, g.Decide([]PodInfo{p}, t0.Add(7*time.Second)), "one observer node is not enough")

	g.Observe(seen(p, "node-c", t0.Add(8*time.Second), true))
	flips := g.Decide([]PodInfo{p}, t0.Add(9*time.Second))
	require.Len(t, flips, 1)
	assert.Equal(t, "reached over the pod network from netpulse/agent-node-c on node node-c (tcp) at 2026-03-01T12:00:08Z, and from 1 other nodes", flips[0].Message)

	// Out of range values are clamped: 0 is the default 1, more than the nodes remembered
	// per pod is what can be remembered.
	assert.Equal(t, 1, NewGate(Config{}).Config().MinReachingNodes)
	assert.Equal(t, maxReachNodes, NewGate(Config{MinReachingNodes: 99}).Config().MinReachingNodes)
}
