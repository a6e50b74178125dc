// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"testing/quick"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/readiness"
)

// world is a small cluster for the property test: nodes node-0..node-(n-1), each with one
// agent (agent-i, the observer) and one workload pod (web-i). Every agent probes every pod
// on the other nodes each round, its ring successor's agent as its stable peer. Agent 0 is
// the compromised one: its own token, its own name and node (the binding holds), anything
// else it likes. What the honest agents see is unanimous: every pod is reachable, except
// that node cut is partitioned from the others during [cutFrom, cutTo) and web-dead is
// down from deadFrom on (-1: no such fault). The partitioned node's agent does not report
// meanwhile: its path to the gateway is the pod network too.
type world struct {
	n                   int
	cut, cutFrom, cutTo int
	dead, deadFrom      int
	t0                  time.Time
	iv                  time.Duration
}

const liar = 0

func (w *world) src(i int) observation.Source {
	return observation.Source{Namespace: "netpulse", Name: "agent-" + strconv.Itoa(i), UID: "a-" + strconv.Itoa(i), Node: "node-" + strconv.Itoa(i)}
}

// pod j: agents are 0..n-1, workload pods n..2n-1 (web-(j-n)); pods live on node j mod n.
func (w *world) pod(j int) observation.Target {
	node := j % w.n
	name, uid := "agent-"+strconv.Itoa(node), "a-"+strconv.Itoa(node)
	if j >= w.n {
		name, uid = "web-"+strconv.Itoa(node), "w-"+strconv.Itoa(node)
	}
	return observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: name, UID: uid, Node: "node-" + strconv.Itoa(node),
		Address: fmt.Sprintf("10.0.%d.%d", j/200, j%200+1)}
}

// truth: what agent i's probe of pod j in round shows.
func (w *world) truth(i, j, round int) bool {
	node := j % w.n
	if j >= w.n && node == w.dead && round >= w.deadFrom {
		return false
	}
	if w.cut >= 0 && round >= w.cutFrom && round < w.cutTo && (i == w.cut) != (node == w.cut) {
		return false
	}
	return true
}

func (w *world) at(round int) time.Time { return w.t0.Add(time.Duration(round) * w.iv) }

func observe(src observation.Source, tgt observation.Target, ok, stable bool, ts time.Time) observation.Observation {
	o := observation.Observation{Source: src, Target: tgt, ProbeType: "icmp", Timestamp: ts, Stable: stable, Sent: 3, Success: ok}
	if ok {
		o.RTT = observation.NewHistogram(8)
		o.RTT.Record(0.0003)
	} else {
		o.Lost, o.ErrorType, o.Message = 3, "timeout", "icmp: timeout"
	}
	return o
}

// honest is agent i's round: every pod on another node, as it is.
func (w *world) honest(i, round int) []observation.Observation {
	var obs []observation.Observation
	ts := w.at(round).Add(time.Duration(i) * time.Millisecond)
	for j := range 2 * w.n {
		if j%w.n == i {
			continue
		}
		obs = append(obs, observe(w.src(i), w.pod(j), w.truth(i, j, round), j == (i+1)%w.n, ts))
	}
	return obs
}

// lies is what the compromised agent sends in one round instead: any number of points
// (none, some rounds), about real pods (their identity is the admission's, from the pod
// index), invented pods on real nodes and external addresses; any outcome, any probe type,
// stable or not; dated anywhere from three rounds back to past the skew.
func (w *world) lies(rng *rand.Rand, now time.Time) []observation.Observation {
	if rng.IntN(5) == 0 {
		return nil
	}
	var obs []observation.Observation
	for range rng.IntN(40) {
		var tgt observation.Target
		switch x := rng.IntN(10); {
		case x < 7:
			tgt = w.pod(rng.IntN(2 * w.n))
		case x < 9:
			k := rng.IntN(8)
			tgt = observation.Target{Kind: observation.TargetPod, Namespace: "victims", Name: "ghost-" + strconv.Itoa(k), UID: "g-" + strconv.Itoa(k),
				Node: "node-" + strconv.Itoa(rng.IntN(w.n)), Address: "10.9.0." + strconv.Itoa(k+1)}
		default:
			tgt = observation.Target{Kind: observation.TargetExternal, Address: "198.51.100." + strconv.Itoa(rng.IntN(4)+1), Port: int64(rng.IntN(3)) + 443}
		}
		var ts time.Time
		switch rng.IntN(6) {
		case 0:
			ts = now.Add(verdict.DefaultMaxFutureSkew)
		case 1:
			ts = now.Add(time.Duration(rng.Int64N(int64(time.Hour)))) // refused (or within the skew)
		default:
			ts = now.Add(-time.Duration(rng.Int64N(int64(3 * w.iv))))
		}
		o := observe(w.src(liar), tgt, rng.IntN(2) == 0, rng.IntN(3) == 0, ts)
		o.ProbeType = []string{"icmp", "tcp", "http", "dns"}[rng.IntN(4)]
		obs = append(obs, o)
	}
	return obs
}

// outcome is everything decided about others in one round.
type outcome struct {
	targets map[verdict.TargetKey]observation.Verdict
	pairs   map[observation.PairKey]string
	nodes   map[string]string
	ready   map[string]string
}

type sim struct {
	e    *Engine
	gate *readiness.Gate
	cur  map[string]*verdict.NodeCondition
	pods []readiness.PodInfo
}

func (w *world) newSim() *sim {
	s := &sim{e: New(verdict.Config{}), gate: readiness.NewGate(readiness.Config{MinReachingNodes: 2}), cur: map[string]*verdict.NodeCondition{}}
	for i := range w.n {
		s.cur["node-"+strconv.Itoa(i)] = nil
	}
	for j := range 2 * w.n {
		p := w.pod(j)
		s.pods = append(s.pods, readiness.PodInfo{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Node: p.Node, Created: w.t0, HasGate: true})
	}
	return s
}

// step feeds one round (the honest agents' points, then agent 0's) and records what was
// decided about everything agent 0 does not own: targets the honest agents observe, pairs
// of other sources, the conditions of other nodes, readiness of every pod.
func (s *sim) step(w *world, round int, liars []observation.Observation) outcome {
	now := w.at(round).Add(time.Second)
	var obs []observation.Observation
	for i := 1; i < w.n; i++ {
		if i == w.cut && round >= w.cutFrom && round < w.cutTo {
			continue
		}
		obs = append(obs, w.honest(i, round)...)
	}
	s.e.Observe(obs, now)
	s.e.Observe(liars, now)
	s.gate.Observe(append(obs, liars...)...)
	s.e.Reconcile(now)
	for _, wr := range s.e.ReconcileNodes(now, s.cur, verdict.NodeConfig{MinHold: 20 * time.Second}).Writes {
		c := wr.Condition
		s.cur[wr.Node] = &c
	}
	out := outcome{targets: map[verdict.TargetKey]observation.Verdict{}, pairs: map[observation.PairKey]string{}, nodes: map[string]string{}, ready: map[string]string{}}
	for j := range 2 * w.n {
		tgt := w.pod(j)
		k := verdict.TargetKeyOf(&observation.Observation{Target: tgt})
		if ts, ok := s.e.Target(k); ok {
			out.targets[k] = ts.Verdict
		}
	}
	for _, sm := range s.e.Summaries() {
		if sm.Key.SourceUID == w.src(liar).UID {
			continue
		}
		// Verdicts and outage times; messages carry counts of observer nodes, which count
		// every vote (agent 0's too).
		desc := fmt.Sprintf("%s since %s", sm.Verdict, sm.VerdictSince.Format(time.RFC3339Nano))
		for _, o := range sm.Outages {
			desc += fmt.Sprintf(" [%s,%s)", o.Start.Format(time.RFC3339Nano), o.End.Format(time.RFC3339Nano))
		}
		out.pairs[sm.Key] = desc
	}
	for n, c := range s.cur {
		if n == w.src(liar).Node || c == nil {
			continue
		}
		out.nodes[n] = c.Status + "/" + c.Reason
	}
	for _, f := range s.gate.Decide(s.pods, now) {
		out.ready[f.Namespace+"/"+f.Name] = f.Status + "/" + f.Reason
		for i := range s.pods {
			if s.pods[i].UID == f.UID {
				s.pods[i].Condition = f.Status
			}
		}
	}
	return out
}

// TestPropertyOneNodeMovesNothingOthersObserve: for any sequence of points from one
// observer node (the binding holds: its own pod, its own node), no pair of another source,
// no target verdict, no other node's condition and no pod's readiness differs from what
// the same cluster decides when that node reports the truth. The honest agents are at
// least target_quorum for every pod, and agree. NETPULSE_PROPERTY_COUNT sets the number of random
// worlds (default 40).
func TestPropertyOneNodeMovesNothingOthersObserve(t *testing.T) {
	count := 40
	if v, err := strconv.Atoi(os.Getenv("NETPULSE_PROPERTY_COUNT")); err == nil && v > 0 {
		count = v
	}
	check := func(seed uint64) bool {
		rng := rand.New(rand.NewPCG(seed, 28))
		// At least 6 nodes: every pod keeps target_quorum (3) honest, trusted observer
		// nodes even with its own node, agent 0's and a partitioned one left out.
		w := &world{n: 6 + rng.IntN(4), cut: -1, dead: -1, t0: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC), iv: 10 * time.Second}
		const rounds = 24
		if rng.IntN(3) > 0 {
			w.cut, w.cutFrom = 1+rng.IntN(w.n-1), rng.IntN(rounds/2)
			w.cutTo = w.cutFrom + 1 + rng.IntN(rounds)
		}
		if rng.IntN(2) == 0 {
			// Not on agent 0's node: what happens there is its node's own condition (a
			// compromised node can break its pod network for real), and agent 0 falling
			// silent takes its own pod out of the evidence about it.
			w.dead, w.deadFrom = 1+rng.IntN(w.n-1), rng.IntN(rounds)
		}
		truthful, lying := w.newSim(), w.newSim()
		for round := range rounds {
			now := w.at(round).Add(time.Second)
			want := truthful.step(w, round, w.honest(liar, round))
			got := lying.step(w, round, w.lies(rng, now))
			if diff := diffOutcomes(want, got); diff != "" {
				t.Logf("seed %d, world %+v, round %d: %s", seed, *w, round, diff)
				return false
			}
		}
		return true
	}
	if err := quick.Check(check, &quick.Config{MaxCount: count}); err != nil {
		t.Fatal(err)
	}
}

func diffOutcomes(want, got outcome) string {
	for k, v := range want.targets {
		if got.targets[k] != v {
			return fmt.Sprintf("target %s: %s, want %s", k, got.targets[k], v)
		}
	}
	for _, m := range []struct {
		what      string
		want, got map[string]string
	}{{"node", want.nodes, got.nodes}, {"readiness", want.ready, got.ready}} {
		keys := slices.Sorted(func(yield func(string) bool) {
			seen := map[string]bool{}
			for _, mm := range []map[string]string{m.want, m.got} {
				for k := range mm {
					if !seen[k] {
						seen[k] = true
						if !yield(k) {
							return
						}
					}
				}
			}
		})
		for _, k := range keys {
			if m.want[k] != m.got[k] {
				return fmt.Sprintf("%s %s: %q, want %q", m.what, k, m.got[k], m.want[k])
			}
		}
	}
	for k, v := range want.pairs {
		if got.pairs[k] != v {
			return fmt.Sprintf("pair %s: %q, want %q", k, got.pairs[k], v)
		}
	}
	for k, v := range got.pairs {
		if _, ok := want.pairs[k]; !ok {
			return fmt.Sprintf("pair %s: %q, not summarised when the node tells the truth", k, v)
		}
	}
	return ""
}
