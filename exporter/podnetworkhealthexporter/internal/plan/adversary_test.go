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

// flood is what one compromised agent (its own token, its own name: source liar) sends
// about target victim at now: n points, one per timestamp, dated from ahead-n+1 to ahead
// after now (ahead <= 0: in the past), all ok or all failing.
func (r *ring) flood(liar, victim, n int, now time.Time, ahead time.Duration, ok bool) []observation.Observation {
	var obs []observation.Observation
	for i := range n {
		o := observation.Observation{Source: r.src(liar), Target: r.tgt(victim), ProbeType: "icmp", Success: ok, Sent: 3,
			Timestamp: now.Add(ahead - time.Duration(n-1-i)*time.Millisecond)}
		if !ok {
			o.Lost, o.ErrorType = 3, "timeout"
		}
		obs = append(obs, o)
	}
	return obs
}

func nodesOf(r *ring) map[string]*verdict.NodeCondition {
	cur := map[string]*verdict.NodeCondition{}
	for i := 0; i < r.n; i++ {
		cur[fmt.Sprintf("node-%d", i)] = nil
	}
	return cur
}

// The first attack: one agent sends 16 rotating failures about a healthy pod,
// dated in the future (44-59 s ahead) or just now. The per-target evidence is one vote per
// observer node, so they are one failing node against the pod's other observers: the pod
// stays Reachable and its node unmarked.
func TestOneNodeCannotMakeAHealthyTargetUnreachable(t *testing.T) {
	for _, ahead := range []time.Duration{59 * time.Second, time.Second, 0} {
		t.Run(ahead.String(), func(t *testing.T) {
			r := newRing(12, 3)
			e := New(verdict.Config{})
			liar, victim := 0, 6
			cur := nodesOf(r)
			for round := range 12 {
				now := r.at(round).Add(time.Second)
				e.Observe(r.round(round, healthy), r.at(round))
				// 16 rotating points, 1 ms apart, each newer than the others' rounds.
				e.Observe(r.flood(liar, victim, 16, now, ahead, false), now)
				res := e.Reconcile(now)
				for _, c := range res.TargetChanges {
					assert.NotEqual(t, observation.VerdictUnreachable, c.Verdict, "round %d: %s", round, c.Key)
				}
				d := e.ReconcileNodes(now, cur, verdict.NodeConfig{})
				assert.Empty(t, d.Marked, "round %d", round)
			}
			ts, ok := e.Target(verdict.TargetKeyOf(&observation.Observation{Target: r.tgt(victim)}))
			require.True(t, ok)
			assert.Equal(t, observation.VerdictReachable, ts.Verdict)
			assert.LessOrEqual(t, ts.Failing, 1, "one failing observer node at most")
		})
	}
}

// The second attack: during a real partition of one node, one agent floods
// successes about the cut-off pod. One vote per node: the partition is still seen, the pod
// judged Unreachable and its node marked.
func TestOneNodeCannotHideAPartition(t *testing.T) {
	for _, ahead := range []time.Duration{59 * time.Second, time.Second, 0} {
		t.Run(ahead.String(), func(t *testing.T) {
			r := newRing(12, 3)
			e := New(verdict.Config{})
			liar, cut := 0, 6
			cur := nodesOf(r)
			partition := func(s, d int) bool { return s != cut && d != cut }
			var marked []string
			for round := range 12 {
				now := r.at(round).Add(time.Second)
				ok := healthy
				if round >= 4 {
					ok = partition
				}
				e.Observe(r.round(round, ok), r.at(round))
				e.Observe(r.flood(liar, cut, 16, now, ahead, true), now)
				e.Reconcile(now)
				d := e.ReconcileNodes(now, cur, verdict.NodeConfig{})
				marked = d.Marked
			}
			ts, ok := e.Target(verdict.TargetKeyOf(&observation.Observation{Target: r.tgt(cut)}))
			require.True(t, ok)
			assert.Equal(t, observation.VerdictUnreachable, ts.Verdict, "the partition is not hidden")
			assert.Equal(t, []string{"node-6"}, marked)
		})
	}
}

// Points dated beyond the skew are refused by the engine as well (the decoder refuses
// them first, counted as future_timestamp): they reach neither the target judgement nor the
// pair summaries.
func TestFutureObservationsAreRefused(t *testing.T) {
	r := newRing(6, 3)
	e := New(verdict.Config{})
	now := r.at(0)
	obs := r.flood(1, 3, 4, now, verdict.DefaultMaxFutureSkew+time.Second, false)
	assert.Equal(t, 4, e.Observe(obs, now), "all refused")
	assert.Zero(t, e.Stats().Targets)
	obs = r.flood(1, 3, 1, now, verdict.DefaultMaxFutureSkew, false)
	assert.Zero(t, e.Observe(obs, now), "within the skew")
	assert.Equal(t, 1, e.Stats().Targets)
}
