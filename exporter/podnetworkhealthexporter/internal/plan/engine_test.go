// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ring is a small stand-in for the sampling planner (internal/planner is exercised by the
// scale simulation): member i probes i+1 every round (its stable peer, M=1) and k rotating
// offsets 2..n-1, a block of k per round.
type ring struct {
	n, k int
	t0   time.Time
	iv   time.Duration
}

func newRing(n, k int) *ring {
	return &ring{n: n, k: k, t0: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC), iv: 10 * time.Second}
}

func (r *ring) src(i int) observation.Source {
	return observation.Source{Namespace: "netpulse", Name: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-%d", i), Node: fmt.Sprintf("node-%d", i)}
}

func (r *ring) tgt(i int) observation.Target {
	return observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-%d", i),
		Node: fmt.Sprintf("node-%d", i), Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)}
}

// targets of source i in round: the stable peer first.
func (r *ring) targets(i, round int) (out []int, stable []bool) {
	out = append(out, (i+1)%r.n)
	stable = append(stable, true)
	rot := r.n - 2
	for j := 0; j < r.k && j < rot; j++ {
		off := 2 + (round*r.k+j)%rot
		out = append(out, (i+off)%r.n)
		stable = append(stable, false)
	}
	return out, stable
}

// round builds the observations of one round; ok(src, dst) says whether a probe succeeds.
// Every source reports at the round's time plus a jitter of i ms.
func (r *ring) round(round int, ok func(src, dst int) bool) []observation.Observation {
	var obs []observation.Observation
	for i := 0; i < r.n; i++ {
		ts := r.at(round).Add(time.Duration(i) * time.Millisecond)
		dsts, stable := r.targets(i, round)
		for j, d := range dsts {
			o := observation.Observation{Source: r.src(i), Target: r.tgt(d), ProbeType: "icmp", Timestamp: ts, Stable: stable[j], Sent: 3}
			o.Success = ok(i, d)
			if o.Success {
				o.RTT = observation.NewHistogram(8)
				o.RTT.Record(0.0002)
			} else {
				o.Lost, o.ErrorType, o.Message = 3, "timeout", "icmp: timeout"
			}
			obs = append(obs, o)
		}
	}
	return obs
}

func (r *ring) at(round int) time.Time { return r.t0.Add(time.Duration(round) * r.iv) }

func healthy(int, int) bool { return true }

// withoutSource drops the observations of the agent named source (it stopped reporting).
func withoutSource(obs []observation.Observation, source string) []observation.Observation {
	var out []observation.Observation
	for _, o := range obs {
		if o.Source.Name != source {
			out = append(out, o)
		}
	}
	return out
}

// firstWriter runs an engine over rounds healthy rounds and returns the last write of each
// object: what a writer that is about to be replaced leaves in the API.
func (r *ring) firstWriter(rounds int) map[observation.PairKey]ObjectWrite {
	a := New(verdict.Config{})
	last := map[observation.PairKey]ObjectWrite{}
	for round := 0; round < rounds; round++ {
		a.Observe(r.round(round, healthy), r.at(round))
		for _, w := range a.Reconcile(r.at(round).Add(time.Second)).Objects {
			last[w.Key] = w
		}
	}
	return last
}

func TestHealthyObjectsAreTheStablePairs(t *testing.T) {
	r := newRing(20, 3)
	e := New(verdict.Config{})
	objects := map[observation.PairKey]bool{}
	for round := 0; round < 30; round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		res := e.Reconcile(r.at(round).Add(time.Second))
		for _, w := range res.Objects {
			require.False(t, w.Delete)
			objects[w.Key] = true
			assert.Equal(t, observation.VerdictReachable, w.Summary.Verdict)
		}
		assert.Empty(t, res.Events, "no verdict change in a healthy cluster: round %d", round)
	}
	assert.Len(t, objects, r.n, "one object per source: its stable peer")
	st := e.Stats()
	assert.Equal(t, r.n, st.StablePairs)
	assert.Zero(t, st.CandidatePairs)
	assert.Equal(t, r.n, st.Targets, "one target per pod and family")
	for _, ts := range e.Targets() {
		assert.Equal(t, observation.VerdictReachable, ts.Verdict, ts.Key.String())
	}
}

func TestDeadTargetUnreachableWithinOneRound(t *testing.T) {
	r := newRing(50, 3)
	e := New(verdict.Config{})
	dead := 7
	for round := 0; round < 5; round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	fault := func(_, d int) bool { return d != dead }
	e.Observe(r.round(5, fault), r.at(5))
	res := e.Reconcile(r.at(5).Add(time.Second))

	tk := verdict.TargetKeyOf(&observation.Observation{Target: r.tgt(dead)})
	ts, ok := e.Target(tk)
	require.True(t, ok)
	assert.Equal(t, observation.VerdictUnreachable, ts.Verdict, "all %d observers of the round failed", 4)
	assert.Equal(t, 4, ts.Failing)
	// The stable pair towards it is escalated in the same round, and written first.
	stableKey := observation.KeyOf(&observation.Observation{Source: r.src(dead - 1), Target: r.tgt(dead)})
	require.NotEmpty(t, res.Objects)
	assert.Equal(t, stableKey, res.Objects[0].Key)
	assert.Equal(t, observation.VerdictUnreachable, res.Objects[0].Summary.Verdict)
	assert.Equal(t, PriorityVerdict, res.Objects[0].Priority)
	require.Len(t, res.Events, 1)
	assert.Equal(t, observation.VerdictUnreachable, res.Events[0].New)
	// The outage starts at the first failed round.
	require.NotEmpty(t, res.Objects[0].Summary.Outages)
	assert.Equal(t, r.at(5).Add(time.Duration(dead-1)*time.Millisecond), res.Objects[0].Summary.Outages[0].Start)

	// Rotating pairs that failed towards an unreachable target are explained by it: no
	// candidates, no further objects.
	e.Observe(r.round(6, fault), r.at(6))
	res = e.Reconcile(r.at(6).Add(time.Second))
	for _, w := range res.Objects {
		assert.Equal(t, stableKey, w.Key, "only the stable pair towards the dead target is written")
	}

	// Recovery: Reachable again after two successful observers, the pair after two rounds.
	for round := 7; round < 10; round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	ts, _ = e.Target(tk)
	assert.Equal(t, observation.VerdictReachable, ts.Verdict)
	s, _ := e.Summary(stableKey)
	assert.Equal(t, observation.VerdictReachable, s.Verdict)
	require.Len(t, s.Outages, 1)
	assert.False(t, s.Outages[0].Ongoing())
}

func TestBrokenObserverNeverMakesATargetUnreachable(t *testing.T) {
	r := newRing(30, 3)
	e := New(verdict.Config{})
	broken := 4
	fault := func(s, _ int) bool { return s != broken }
	for round := 0; round < 60; round++ {
		e.Observe(r.round(round, fault), r.at(round))
		res := e.Reconcile(r.at(round).Add(time.Second))
		for _, c := range res.TargetChanges {
			assert.NotEqual(t, observation.VerdictUnreachable, c.Verdict, "round %d: %s", round, c.Key)
		}
		if round%5 == 0 {
			cur := map[string]*verdict.NodeCondition{}
			for i := 0; i < r.n; i++ {
				cur[fmt.Sprintf("node-%d", i)] = nil
			}
			d := e.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{})
			assert.Empty(t, d.Marked, "an observer that fails everything marks no node")
		}
	}
	// Its own stable pair is Unreachable by the pair's own rounds (three failed rounds): a
	// pair verdict, not a target verdict.
	s, ok := e.Summary(observation.KeyOf(&observation.Observation{Source: r.src(broken), Target: r.tgt(broken + 1)}))
	require.True(t, ok)
	assert.Equal(t, observation.VerdictUnreachable, s.Verdict)
	st := e.Stats()
	assert.LessOrEqual(t, st.Objects, 2*r.n, "objects stay within (M+1)·N")
}

func TestPathSpecificFailureBecomesAnObjectOnlyWhenRepeated(t *testing.T) {
	r := newRing(12, 3) // rotating period (12-2)/3 -> 4 rounds
	e := New(verdict.Config{})
	a, b := 2, 8 // a never reaches b; everyone else does
	fault := func(s, d int) bool { return s != a || d != b }
	var failingWrites []ObjectWrite
	for round := 0; round < 20; round++ {
		e.Observe(r.round(round, fault), r.at(round))
		res := e.Reconcile(r.at(round).Add(time.Second))
		for _, w := range res.Objects {
			if w.Key.SourcePod == "agent-2" && w.Key.TargetName == "agent-8" {
				failingWrites = append(failingWrites, w)
			}
		}
	}
	require.NotEmpty(t, failingWrites, "a path that fails on consecutive visits gets an object")
	assert.Equal(t, observation.VerdictUnreachable, failingWrites[0].Summary.Verdict)
	assert.Equal(t, PriorityVerdict, failingWrites[0].Priority)
	tk := verdict.TargetKeyOf(&observation.Observation{Target: r.tgt(b)})
	ts, _ := e.Target(tk)
	assert.Equal(t, observation.VerdictReachable, ts.Verdict, "the target itself is reachable")
	assert.Equal(t, 1, e.Stats().CandidatePairs)
}

func TestNodePartitionMarkedHeldAndCleared(t *testing.T) {
	r := newRing(20, 3)
	e := New(verdict.Config{})
	cur := map[string]*verdict.NodeCondition{}
	for i := 0; i < r.n; i++ {
		cur[fmt.Sprintf("node-%d", i)] = nil
	}
	apply := func(d verdict.NodeDecision) {
		for _, w := range d.Writes {
			c := w.Condition
			cur[w.Node] = &c
		}
	}
	cut := 5
	partition := func(s, d int) bool { return s != cut && d != cut }
	round := 0
	step := func(ok func(int, int) bool) verdict.NodeDecision {
		e.Observe(r.round(round, ok), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
		d := e.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{MinHold: 30 * time.Second})
		apply(d)
		round++
		return d
	}
	for range 5 {
		step(healthy)
	}
	for n, c := range cur {
		assert.Nil(t, c, "%s: a node found fine is not written (no problem is no news)", n)
	}
	d := step(partition)
	assert.Equal(t, []string{"node-5"}, d.Marked)
	assert.Equal(t, verdict.StatusTrue, cur["node-5"].Status)
	assert.Equal(t, []string{"node-5"}, e.BadNodes(), "the cut-off node's observers are distrusted")
	writes := 0
	for range 5 {
		d := step(partition)
		writes += len(d.Writes)
		for _, w := range d.Writes {
			t.Logf("write during the partition: %s %+v", w.Node, w.Condition)
		}
	}
	assert.Zero(t, writes, "nothing changes while the partition lasts")
	// Its own stable pair reads ObserverUnhealthy, not a verdict against its peer.
	e.RejudgeAll()
	res := e.Reconcile(r.at(round))
	for _, w := range res.Objects {
		if w.Key.SourcePod == "agent-5" {
			assert.Equal(t, "node-5", w.BadObserverNode)
		}
	}
	// Heal: the condition holds for MinHold (30 s = 3 rounds), then clears, once.
	var clearedAt int
	for i := 0; i < 8; i++ {
		d := step(healthy)
		for _, w := range d.Writes {
			if w.Node == "node-5" {
				assert.Equal(t, verdict.StatusFalse, w.Condition.Status)
				clearedAt = i
			}
		}
	}
	assert.GreaterOrEqual(t, clearedAt, 2, "held for MinHold after the last evidence")
	assert.Equal(t, verdict.StatusFalse, cur["node-5"].Status)
	// Cleared once: an hour of healthy rounds rewrites no condition (no heartbeat of a
	// False one, none written for the nodes never marked).
	for range 360 {
		d := step(healthy)
		assert.Empty(t, d.Writes)
	}
	assert.Nil(t, cur["node-4"])
}

func TestFlappingNodeConditionIsDamped(t *testing.T) {
	r := newRing(20, 3)
	e := New(verdict.Config{})
	cur := map[string]*verdict.NodeCondition{}
	for i := 0; i < r.n; i++ {
		cur[fmt.Sprintf("node-%d", i)] = nil
	}
	cut := 9
	writes := 0
	for round := 0; round < 40; round++ {
		ok := healthy
		if round >= 5 && round%2 == 0 { // 10 s down, 10 s up
			ok = func(s, d int) bool { return s != cut && d != cut }
		}
		e.Observe(r.round(round, ok), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
		d := e.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{})
		for _, w := range d.Writes {
			c := w.Condition
			cur[w.Node] = &c
			if w.Node == "node-9" && round >= 5 {
				writes++
			}
		}
	}
	assert.LessOrEqual(t, writes, 1, "a 10 s on / 10 s off link sets the condition once and holds it")
}

func TestSuppressionNeverClaimsReachable(t *testing.T) {
	r := newRing(20, 3)
	e := New(verdict.Config{})
	// Half the nodes carry a condition (a previous writer cleared them), half never had one.
	cur := map[string]*verdict.NodeCondition{}
	for i := 0; i < r.n; i++ {
		cur[fmt.Sprintf("node-%d", i)] = nil
		if i%2 == 0 {
			cur[fmt.Sprintf("node-%d", i)] = &verdict.NodeCondition{Status: verdict.StatusFalse, Reason: verdict.NodeReasonReachable, LastHeartbeat: r.at(0)}
		}
	}
	for round := 0; round < 10; round++ {
		ok := healthy
		if round >= 4 {
			ok = func(int, int) bool { return false } // probe traffic dropped everywhere
		}
		e.Observe(r.round(round, ok), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
		d := e.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{})
		for _, w := range d.Writes {
			c := w.Condition
			cur[w.Node] = &c
		}
		if round >= 5 {
			assert.True(t, d.Suppressed)
			assert.Empty(t, d.Marked)
		}
	}
	for n, c := range cur {
		if c == nil {
			continue // never marked: nothing claims anything about it
		}
		assert.Equal(t, verdict.StatusUnknown, c.Status, n)
		assert.Equal(t, verdict.NodeReasonSuppressed, c.Reason, n)
	}
	assert.Nil(t, cur["node-1"], "a node without a condition gets none for the suppression")
}

func TestResumeDoesNotRewriteOrLoseObjects(t *testing.T) {
	r := newRing(10, 3)
	e := New(verdict.Config{})
	for round := 0; round < 3; round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	require.Equal(t, 10, e.Objects())
	e.EndTerm()
	assert.Zero(t, e.Objects())
	// An object of a pair that its observer (reporting again) no longer observes is deleted
	// after TargetTTL.
	gone := observation.PairKey{SourceNamespace: "netpulse", SourcePod: "agent-0", SourceUID: "uid-0", TargetKind: observation.TargetPod,
		TargetNamespace: "netpulse", TargetName: "old", TargetUID: "uid-old"}
	e.Resume([]verdict.Persisted{{Key: gone, Written: observation.Written{At: r.at(2), Verdict: observation.VerdictReachable, Fingerprint: 1}}}, r.at(2))
	res := e.Reconcile(r.at(3))
	assert.Equal(t, 11, e.Objects(), "the existing object is part of the object set")
	for _, w := range res.Objects {
		assert.NotEqual(t, gone, w.Key)
	}
	var deleted []observation.PairKey
	for round := 3; r.at(round).Before(r.at(2).Add(verdict.DefaultTargetTTL + 2*r.iv)); round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		for _, w := range e.Reconcile(r.at(round).Add(time.Second)).Objects {
			if w.Delete {
				deleted = append(deleted, w.Key)
				assert.Equal(t, PriorityCleanup, w.Priority)
			}
		}
	}
	assert.Equal(t, []observation.PairKey{gone}, deleted, "deleted TargetTTL after it was last written, and nothing else")
}

// An agent whose process stops (its pod stays): within three of its rounds its objects read
// Unknown / ObserverSilent, the telemetry names it, nothing is deleted while its pod exists,
// and when it reports again its objects say so.
func TestSilentObserverReadsAsSilence(t *testing.T) {
	r := newRing(10, 3)
	e := New(verdict.Config{})
	const mute = 3
	muted := func(round int) []observation.Observation {
		return withoutSource(r.round(round, healthy), fmt.Sprintf("agent-%d", mute))
	}
	objects := map[observation.PairKey]ObjectWrite{}
	apply := func(res Result) {
		for _, w := range res.Objects {
			if w.Delete {
				delete(objects, w.Key)
			} else {
				objects[w.Key] = w
			}
		}
	}
	for round := 0; round < 5; round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		apply(e.Reconcile(r.at(round).Add(time.Second)))
	}
	require.Len(t, objects, 10)
	silentAt := -1
	for round := 5; round < 5+int((verdict.DefaultTargetTTL+time.Minute)/r.iv); round++ {
		e.Observe(muted(round), r.at(round))
		res := e.Reconcile(r.at(round).Add(time.Second))
		apply(res)
		for _, c := range res.ObserverChanges {
			require.Equal(t, fmt.Sprintf("agent-%d", mute), c.Name)
			require.True(t, c.Silent)
			require.Equal(t, -1, silentAt, "one change")
			silentAt = round
		}
		for _, w := range res.Objects {
			assert.False(t, w.Delete, "round %d: nothing is deleted while the pods exist", round)
		}
	}
	require.NotEqual(t, -1, silentAt, "the observer fell silent")
	assert.LessOrEqual(t, silentAt-4, 4, "silent within three of its rounds (and the 10 s floor) after its last report")
	require.Len(t, objects, 10, "its objects are kept")
	for k, w := range objects {
		if k.SourcePod == fmt.Sprintf("agent-%d", mute) {
			assert.Equal(t, "netpulse/agent-3", w.SilentObserver, "%s", k)
		} else {
			assert.Empty(t, w.SilentObserver, "%s", k)
		}
	}
	var silent []string
	for _, o := range e.Observers() {
		if o.Silent {
			silent = append(silent, o.Name)
		}
	}
	assert.Equal(t, []string{"agent-3"}, silent)

	// It reports again.
	round := 5 + int((verdict.DefaultTargetTTL+time.Minute)/r.iv)
	e.Observe(r.round(round, healthy), r.at(round))
	res := e.Reconcile(r.at(round).Add(time.Second))
	apply(res)
	require.Len(t, res.ObserverChanges, 1)
	assert.False(t, res.ObserverChanges[0].Silent)
	for _, w := range objects {
		assert.Empty(t, w.SilentObserver, "%s", w.Key)
	}
}

// A writer that takes over while an agent is silent keeps that agent's objects, and says
// ObserverSilent, rather than deleting them at TargetTTL.
func TestTakeoverKeepsASilentObserversObjects(t *testing.T) {
	r := newRing(8, 3)
	last := r.firstWriter(3)
	b := New(verdict.Config{})
	b.Resume(persistedOf(last), r.at(3))
	var silentWrites int
	for round := 3; round < 3+int((verdict.DefaultTargetTTL+time.Minute)/r.iv); round++ {
		b.Observe(withoutSource(r.round(round, healthy), "agent-2"), r.at(round))
		for _, w := range b.Reconcile(r.at(round).Add(time.Second)).Objects {
			require.False(t, w.Delete, "%s", w.Key)
			if w.Reason == "heartbeat" {
				continue
			}
			require.Equal(t, "agent-2", w.Key.SourcePod, "only the silent observer's object is rewritten")
			require.Equal(t, "netpulse/agent-2", w.SilentObserver)
			require.True(t, w.Restate, "resumed pairs restate the object they found")
			silentWrites++
		}
	}
	assert.Equal(t, 1, silentWrites, "its one object is marked once")
	assert.Equal(t, 8, b.Objects())
}

// dualStack adds an IPv6 twin of every observation; ok6 says whether the IPv6 probe of
// (src, dst) succeeds.
func dualStack(obs []observation.Observation, ok6 func(src, dst string) bool) []observation.Observation {
	out := obs
	for _, o := range obs {
		o6 := o
		o6.Target.Address = "fd00::" + o.Target.Address[len("10.0.0."):]
		o6.Success = o.Success && ok6(o.Source.Name, o.Target.Name)
		if !o6.Success {
			o6.Lost, o6.ErrorType, o6.RTT = 3, "timeout", observation.Histogram{}
		}
		out = append(out, o6)
	}
	return out
}

// IPv6 broken on one path (or towards one target) while IPv4 works: the pair stays
// Reachable and its object says which family fails.
func TestOneAddressFamilyFailing(t *testing.T) {
	r := newRing(10, 3)
	e := New(verdict.Config{})
	stableKey := observation.KeyOf(&observation.Observation{Source: r.src(3), Target: r.tgt(4)})
	var last *ObjectWrite
	run := func(from, to int, ok6 func(src, dst string) bool) {
		for round := from; round < to; round++ {
			e.Observe(dualStack(r.round(round, healthy), ok6), r.at(round))
			for _, w := range e.Reconcile(r.at(round).Add(time.Second)).Objects {
				if w.Key == stableKey {
					w := w
					last = &w
				}
			}
		}
	}
	run(0, 3, func(string, string) bool { return true })
	require.NotNil(t, last)
	assert.Empty(t, last.DegradedFamilies)

	// Only the path agent-3 -> agent-4 drops IPv6: after failures_to_unreachable rounds.
	run(3, 7, func(s, d string) bool { return s != "agent-3" || d != "agent-4" })
	assert.Equal(t, observation.VerdictReachable, last.Summary.Verdict)
	assert.Equal(t, []string{"ipv6"}, last.DegradedFamilies)
	assert.Equal(t, PriorityVerdict, last.Priority)
	ts6, _ := e.Target(verdict.TargetKey{Kind: observation.TargetPod, Namespace: "netpulse", Name: "agent-4", UID: "uid-4", Family: "ipv6"})
	assert.Equal(t, observation.VerdictReachable, ts6.Verdict, "the others reach agent-4 over IPv6")

	// Healed, then agent-4's IPv6 fails for everyone: the target's IPv6 is judged
	// Unreachable and the stable pair says so in the same round.
	run(7, 10, func(string, string) bool { return true })
	assert.Empty(t, last.DegradedFamilies)
	run(10, 11, func(_, d string) bool { return d != "agent-4" })
	ts6, _ = e.Target(verdict.TargetKey{Kind: observation.TargetPod, Namespace: "netpulse", Name: "agent-4", UID: "uid-4", Family: "ipv6"})
	assert.Equal(t, observation.VerdictUnreachable, ts6.Verdict)
	ts4, _ := e.Target(verdict.TargetKey{Kind: observation.TargetPod, Namespace: "netpulse", Name: "agent-4", UID: "uid-4", Family: "ipv4"})
	assert.Equal(t, observation.VerdictReachable, ts4.Verdict)
	assert.Equal(t, observation.VerdictReachable, last.Summary.Verdict)
	assert.Equal(t, []string{"ipv6"}, last.DegradedFamilies)
}

// persistedOf renders what a writer's last writes left in the API (as the exporter reads it
// back from its objects).
func persistedOf(ws map[observation.PairKey]ObjectWrite) []verdict.Persisted {
	var out []verdict.Persisted
	for k, w := range ws {
		if w.Delete {
			continue
		}
		s := w.Summary
		out = append(out, verdict.Persisted{Key: k, Written: observation.WrittenFrom(s, s.LastObserved), Source: s.Source, Target: s.Target,
			Verdict: s.Verdict, Since: s.VerdictSince, LastObserved: s.LastObserved, Outages: s.Outages,
			BadObserverNode: w.BadObserverNode})
	}
	return out
}

// A new writer taking over during a partition (the old one killed) resumes from what the
// API holds: no Event re-emitted, no verdict or attribution flip, the outage keeps its start,
// and the node condition is not rewritten; after the heal the same outage ends.
func TestTakeoverDuringPartitionLeavesNoTrace(t *testing.T) {
	testTakeoverDuringPartition(t, false, false)
}

// The same takeover by a writer whose first round holds only part of the agents' reports
// (they reconnect one by one after a gateway restart, each with part of a round): only the
// failures towards the partitioned node, without the successes that show those observers
// healthy. Every observer in that view fails towards a node that is no candidate (yet),
// which alone would read as broken probers. The node conditions are neither suppressed nor
// cleared on that partial view.
func TestTakeoverWithAPartialFirstViewLeavesNoTrace(t *testing.T) {
	testTakeoverDuringPartition(t, false, true)
}

// The same takeover by a standby replica that summarised the observations of the last
// rounds before it took over (its own outage would start at its first failed round): the
// record still stands.
func TestStandbyTakeoverDuringPartitionLeavesNoTrace(t *testing.T) {
	testTakeoverDuringPartition(t, true, false)
}

func testTakeoverDuringPartition(t *testing.T, standby, partialFirst bool) {
	r := newRing(12, 3)
	cut := 5
	partition := func(s, d int) bool { return s != cut && d != cut }
	nodes := func() map[string]*verdict.NodeCondition {
		m := map[string]*verdict.NodeCondition{}
		for i := 0; i < r.n; i++ {
			m[fmt.Sprintf("node-%d", i)] = nil
		}
		return m
	}
	a := New(verdict.Config{})
	cur := nodes()
	last := map[observation.PairKey]ObjectWrite{}
	round := 0
	drive := func(e *Engine, ok func(int, int) bool, rounds int) (events []observation.Transition, writes []ObjectWrite, nodeWrites []verdict.NodeWrite) {
		for range rounds {
			e.Observe(r.round(round, ok), r.at(round))
			res := e.Reconcile(r.at(round).Add(time.Second))
			for _, w := range res.Objects {
				last[w.Key] = w
			}
			events = append(events, res.Events...)
			writes = append(writes, res.Objects...)
			d := e.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{})
			for _, w := range d.Writes {
				c := w.Condition
				cur[w.Node] = &c
			}
			nodeWrites = append(nodeWrites, d.Writes...)
			round++
		}
		return
	}
	b := New(verdict.Config{})
	drive(a, healthy, 4)
	faultRound := round
	ev, _, _ := drive(a, partition, 3)
	if standby { // the standby starts with the fault already under way
		for i := round; i < round+3; i++ {
			b.Observe(r.round(i, partition), r.at(i))
		}
	}
	ev2, _, _ := drive(a, partition, 3)
	ev = append(ev, ev2...)
	require.NotEmpty(t, ev, "the first writer reported the outage")
	towards := observation.KeyOf(&observation.Observation{Source: r.src(cut - 1), Target: r.tgt(cut)})
	from := observation.KeyOf(&observation.Observation{Source: r.src(cut), Target: r.tgt(cut + 1)})
	require.Equal(t, observation.VerdictUnreachable, last[towards].Summary.Verdict)
	require.Equal(t, "node-5", last[from].BadObserverNode, "the cut-off observer's pair reads ObserverUnhealthy")
	start := last[towards].Summary.Outages[0].Start
	require.Equal(t, verdict.StatusTrue, cur["node-5"].Status)

	b.Resume(persistedOf(last), r.at(round))
	var partialNodeWrites []verdict.NodeWrite
	if partialFirst {
		for range 1 {
			var one []observation.Observation
			for _, o := range r.round(round, partition) {
				if o.Target.Node == r.tgt(cut).Node {
					one = append(one, o)
				}
			}
			require.NotEmpty(t, one)
			b.Observe(one, r.at(round))
			b.Reconcile(r.at(round).Add(time.Second))
			d := b.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{MinHold: time.Second})
			partialNodeWrites = append(partialNodeWrites, d.Writes...)
			round++
		}
	}
	assert.Empty(t, partialNodeWrites, "a partial first view rewrites no node condition")
	ev, writes, nodeWrites := drive(b, partition, 8)
	assert.Empty(t, ev, "no Event re-emitted for the outage already reported")
	for _, w := range writes {
		if w.Key == towards {
			assert.Equal(t, observation.VerdictUnreachable, w.Summary.Verdict)
		}
		if w.Key == from {
			assert.Equal(t, "node-5", w.BadObserverNode, "attribution never flips to blaming the target")
		}
	}
	assert.Empty(t, nodeWrites, "the node conditions already say it")
	s, _ := b.Summary(towards)
	require.NotEmpty(t, s.Outages)
	assert.Equal(t, start, s.Outages[0].Start, "the outage keeps its start")
	assert.True(t, start.After(r.at(faultRound-1)))

	ev, _, _ = drive(b, healthy, 4)
	require.NotEmpty(t, ev)
	s, _ = b.Summary(towards)
	assert.Equal(t, start, s.Outages[0].Start)
	assert.False(t, s.Outages[0].Ongoing())
	assert.Len(t, s.Outages, 1, "one outage, not one per writer")
}

// A healthy takeover writes nothing until something changes or a heartbeat is due.
func TestHealthyTakeoverWritesNothing(t *testing.T) {
	r := newRing(12, 3)
	last := r.firstWriter(5)
	b := New(verdict.Config{})
	b.Resume(persistedOf(last), r.at(5))
	for round := 5; round < 11; round++ { // one minute
		b.Observe(r.round(round, healthy), r.at(round))
		res := b.Reconcile(r.at(round).Add(time.Second))
		assert.Empty(t, res.Objects, "round %d", round)
		assert.Empty(t, res.Events)
	}
}

// The pod of a silent observer is deleted: its objects are garbage-collected, the engine
// forgets its pairs, and the observer itself after TargetTTL; nothing is re-created.
func TestSilentObserversPodDeletedIsForgotten(t *testing.T) {
	r := newRing(8, 3)
	e := New(verdict.Config{})
	for round := 0; round < 3; round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	without := func(round int) []observation.Observation {
		return withoutSource(r.round(round, func(_, d int) bool { return d != 5 }), "agent-5")
	}
	round := 3
	for ; round < 8; round++ {
		e.Observe(without(round), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	require.Equal(t, 1, e.Stats().SilentObservers)
	for _, k := range e.ObjectKeys() {
		if k.SourcePod == "agent-5" {
			e.ObjectGone(k) // garbage collection
		}
	}
	for ; r.at(round).Before(r.at(3).Add(verdict.DefaultTargetTTL + time.Minute)); round++ {
		e.Observe(without(round), r.at(round))
		for _, w := range e.Reconcile(r.at(round).Add(time.Second)).Objects {
			require.NotEqual(t, "agent-5", w.Key.SourcePod, "round %d: nothing re-created for the deleted observer", round)
		}
	}
	assert.Zero(t, e.Stats().SilentObservers, "the observer is forgotten after TargetTTL")
	for _, o := range e.Observers() {
		assert.NotEqual(t, "agent-5", o.Name)
	}
}

// Membership moved the ring: a pair its observer now probes as a rotating peer loses its
// object at once while healthy, instead of lingering for TargetTTL next to the new stable
// pair's.
func TestRingMoveDeletesTheOldStablePairsObject(t *testing.T) {
	r := newRing(6, 3)
	e := New(verdict.Config{})
	obs := func(round, dst int, stable bool) observation.Observation {
		o := observation.Observation{Source: r.src(0), Target: r.tgt(dst), ProbeType: "icmp", Timestamp: r.at(round), Stable: stable, Sent: 3, Success: true}
		o.RTT = observation.NewHistogram(8)
		o.RTT.Record(0.0002)
		return o
	}
	for round := 0; round < 3; round++ {
		e.Observe([]observation.Observation{obs(round, 1, true), obs(round, 3, false)}, r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	require.Equal(t, 1, e.Objects())
	// A new member joined between 0 and 1: 2 is the stable peer now, 1 a rotating one.
	e.Observe([]observation.Observation{obs(3, 2, true), obs(3, 1, false)}, r.at(3))
	res := e.Reconcile(r.at(3).Add(time.Second))
	var deleted, written []int
	for _, w := range res.Objects {
		var dst int
		_, _ = fmt.Sscanf(w.Key.TargetName, "agent-%d", &dst)
		if w.Delete {
			deleted = append(deleted, dst)
		} else {
			written = append(written, dst)
		}
	}
	assert.Equal(t, []int{1}, deleted)
	assert.Equal(t, []int{2}, written)
	assert.Equal(t, 1, e.Objects())
}

// A source pod is deleted (roll): the garbage collector removes its objects before its
// observer reads silent. Nothing re-creates them; a pair whose observer still reports gets
// its object back with its next round.
func TestObjectGoneIsNotRecreatedForAGonePod(t *testing.T) {
	r := newRing(6, 3)
	e := New(verdict.Config{})
	for round := 0; round < 3; round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	var gone, userDeleted observation.PairKey
	for _, k := range e.ObjectKeys() {
		switch k.SourcePod {
		case "agent-2":
			gone = k
		case "agent-4":
			userDeleted = k
		}
	}
	e.ObjectGone(gone)
	e.ObjectGone(userDeleted)
	without2 := func(round int) []observation.Observation {
		return withoutSource(r.round(round, healthy), "agent-2")
	}
	res := e.Reconcile(r.at(2).Add(2 * time.Second)) // before its next round
	for _, w := range res.Objects {
		require.NotEqual(t, gone, w.Key, "no re-create before the observer's next round")
	}
	e.Observe(without2(3), r.at(3))
	res = e.Reconcile(r.at(3).Add(time.Second))
	var created []observation.PairKey
	for _, w := range res.Objects {
		created = append(created, w.Key)
	}
	assert.Equal(t, []observation.PairKey{userDeleted}, created, "only the pair whose observer still reports")
}

// After a roll, the deleted agents' last rounds (failing towards peers that went away with
// them) are no evidence once they are silent: a partition right after is marked, not
// suppressed as a wide outage.
func TestSilentObserversAreNoNodeEvidence(t *testing.T) {
	r := newRing(12, 3)
	e := New(verdict.Config{})
	cur := map[string]*verdict.NodeCondition{}
	for i := 0; i < r.n; i++ {
		cur[fmt.Sprintf("node-%d", i)] = nil
	}
	gone := func(i int) bool { return i >= 8 } // agents 8..11 were deleted
	round := 0
	for ; round < 4; round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	// The roll's last round: the deleted agents fail towards everyone (the peers are going
	// away too), and every probe of a deleted agent fails.
	last := r.round(round, func(s, d int) bool { return !gone(s) && !gone(d) })
	for i := range last {
		var dst int
		_, _ = fmt.Sscanf(last[i].Target.Name, "agent-%d", &dst)
		// The gateway's k8s_net_attributes found these pods terminating.
		last[i].TargetLeaving = gone(dst)
	}
	e.Observe(last, r.at(round))
	e.Reconcile(r.at(round).Add(time.Second))
	round++
	const cut = 3
	var d verdict.NodeDecision
	for ; round < 9; round++ {
		var obs []observation.Observation
		for _, o := range r.round(round, func(s, t int) bool { return s != cut && t != cut }) {
			var src int
			_, _ = fmt.Sscanf(o.Source.Name, "agent-%d", &src)
			var dst int
			_, _ = fmt.Sscanf(o.Target.Name, "agent-%d", &dst)
			if !gone(src) && !gone(dst) {
				obs = append(obs, o)
			}
		}
		e.Observe(obs, r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
		d = e.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{})
		for _, w := range d.Writes {
			c := w.Condition
			cur[w.Node] = &c
		}
	}
	require.False(t, d.Suppressed, d.SuppressedReason)
	assert.Equal(t, []string{"node-3"}, d.Marked)
}

// A healthy stable pair is rewritten only at the (stretched) heartbeat, so the
// lastObservedTime a new writer finds may be older than TargetTTL. It must not expire
// before its observer's next round: no object is deleted at a takeover.
func TestTakeoverKeepsObjectsOlderThanTargetTTL(t *testing.T) {
	r := newRing(8, 3)
	last := r.firstWriter(3)
	b := New(verdict.Config{})
	takeover := r.at(3).Add(verdict.DefaultTargetTTL + 5*time.Minute) // the objects were written 15 min ago
	b.Resume(persistedOf(last), takeover)
	for i := 0; i < 6; i++ {
		now := takeover.Add(time.Duration(i) * r.iv)
		if i > 0 {
			round := 3 + int(takeover.Sub(r.at(3))/r.iv) + i
			b.Observe(r.round(round, healthy), r.at(round))
		}
		for _, w := range b.Reconcile(now.Add(time.Second)).Objects {
			assert.False(t, w.Delete, "step %d: %s deleted at the takeover", i, w.Key)
		}
	}
	assert.Equal(t, 8, b.Objects())
}

// A partition cuts a node's agent off from the gateway too (on real nodes the gateway is a
// pod elsewhere): the agent goes silent while its pod lives on. Its peers' failures
// towards it stay evidence, and the node is marked, long after the agent reads silent.
func TestSilentAgentOfAPartitionedNodeIsMarked(t *testing.T) {
	r := newRing(6, 3)
	e := New(verdict.Config{})
	cur := map[string]*verdict.NodeCondition{}
	for i := 0; i < r.n; i++ {
		cur[fmt.Sprintf("node-%d", i)] = nil
	}
	round := 0
	for ; round < 4; round++ {
		e.Observe(r.round(round, healthy), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
	}
	const cut = 3
	var d verdict.NodeDecision
	for ; round < 20; round++ { // well past the cut agent's silentAfter
		var obs []observation.Observation
		for _, o := range r.round(round, func(s, t int) bool { return s != cut && t != cut }) {
			var src int
			_, _ = fmt.Sscanf(o.Source.Name, "agent-%d", &src)
			if src != cut { // the cut agent's reports never arrive
				obs = append(obs, o)
			}
		}
		e.Observe(obs, r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
		d = e.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{})
		for _, w := range d.Writes {
			c := w.Condition
			cur[w.Node] = &c
		}
	}
	require.False(t, d.Suppressed, d.SuppressedReason)
	assert.Equal(t, []string{"node-3"}, d.Marked, "the cut node stays marked while its agent is silent")
}

// After a takeover the agents reach the new writer only once the Service follows it and
// their reconnect backoff has run (found on real nodes): for verdict.TakeoverGrace no agent reads
// newly silent, so a takeover rewrites nothing; one still silent after it does.
func TestTakeoverGraceBeforeSilence(t *testing.T) {
	r := newRing(8, 3)
	last := r.firstWriter(3)
	b := New(verdict.Config{})
	resumed := r.at(3)
	b.Resume(persistedOf(last), resumed)
	silentAt := time.Duration(-1)
	for round := 3; r.at(round).Sub(resumed) < 2*verdict.TakeoverGrace; round++ {
		obs := r.round(round, healthy)
		if r.at(round).Sub(resumed) < 20*time.Second {
			obs = nil // every agent still reconnecting
		} else {
			obs = withoutSource(obs, "agent-2") // all back but agent-2
		}
		b.Observe(obs, r.at(round))
		res := b.Reconcile(r.at(round).Add(time.Second))
		for _, c := range res.ObserverChanges {
			require.True(t, c.Silent && c.Name == "agent-2", "only agent-2 goes silent, not %+v", c)
			if silentAt < 0 {
				silentAt = r.at(round).Add(time.Second).Sub(resumed)
			}
		}
	}
	require.GreaterOrEqual(t, silentAt, verdict.TakeoverGrace, "agent-2 reads silent only after the grace")
}

// A writer that takes over minutes after the objects' last write rewrites none of them in
// its first rounds: the first round after a restart carries no echo counts and no RTT
// (each agent's cumulative point only sets the decoder's baseline), and the missing
// figures wait MinChangeInterval from the takeover (Resume counts every object as written
// then), by which time ordinary rounds match what is written.
func TestTakeoverRewritesNoHealthyObject(t *testing.T) {
	r := newRing(8, 3)
	last := r.firstWriter(3)
	b := New(verdict.Config{})
	const takeover = 33 // 5 minutes after the last write: past MinChangeInterval, short of the heartbeat
	b.Resume(persistedOf(last), r.at(takeover))
	baseline := r.round(takeover, healthy)
	for i := range baseline {
		baseline[i].Sent, baseline[i].Lost, baseline[i].RTT = 0, 0, observation.Histogram{}
	}
	b.Observe(baseline, r.at(takeover))
	for _, w := range b.Reconcile(r.at(takeover).Add(time.Second)).Objects {
		t.Errorf("first round after the takeover: %s written (%s)", w.Key, w.Reason)
	}
	for round := takeover + 1; round < takeover+12; round++ {
		b.Observe(r.round(round, healthy), r.at(round))
		for _, w := range b.Reconcile(r.at(round).Add(time.Second)).Objects {
			t.Errorf("round %d after the takeover: %s written (%s)", round-takeover, w.Key, w.Reason)
		}
	}
}
