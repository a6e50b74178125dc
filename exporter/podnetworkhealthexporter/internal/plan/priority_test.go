// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// Writes that begin or end an outage go first; writes towards Unknown (an observer silent,
// a target going away, as in a DaemonSet roll) go behind them, however many there are,
// unless they take back a written outage.
func TestOutagesAreWrittenBeforeUnknowns(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	written := func(v observation.Verdict) observation.Written {
		return observation.WrittenFrom(observation.Summary{Verdict: v}, now.Add(-time.Minute))
	}
	pair := func(i int) observation.PairKey {
		return observation.PairKey{SourceNamespace: "netpulse", SourcePod: fmt.Sprintf("agent-%d", i), TargetKind: observation.TargetPod, TargetName: "t"}
	}
	state := func(i int, last, cur observation.Verdict) verdict.PairState {
		return verdict.PairState{Key: pair(i), Stable: true, HasObject: true, Summary: observation.Summary{Key: pair(i), Verdict: cur},
			Last: verdict.ObjectRecord{Written: written(last)}}
	}
	var c PairObjects
	cases := []struct {
		name string
		st   verdict.PairState
		want Priority
	}{
		{"outage begins", state(1, observation.VerdictReachable, observation.VerdictUnreachable), PriorityVerdict},
		{"outage ends", state(2, observation.VerdictUnreachable, observation.VerdictReachable), PriorityVerdict},
		{"a silent observer's pair turns Unknown", func() verdict.PairState {
			st := state(3, observation.VerdictReachable, observation.VerdictReachable)
			st.SilentObserver = "netpulse/agent-3"
			return st
		}(), PriorityUpdate},
		{"verdict Reachable -> Unknown", state(4, observation.VerdictReachable, observation.VerdictUnknown), PriorityUpdate},
		{"an outage was a disruption", func() verdict.PairState {
			st := state(5, observation.VerdictUnreachable, observation.VerdictUnreachable)
			st.Disruption = "PodTerminating"
			return st
		}(), PriorityVerdict},
		{"a healthy pair's target goes away", func() verdict.PairState {
			st := state(6, observation.VerdictReachable, observation.VerdictReachable)
			st.Disruption = "PodTerminating"
			return st
		}(), PriorityUpdate},
		{"the observer's node is blamed", func() verdict.PairState {
			st := state(7, observation.VerdictUnreachable, observation.VerdictUnreachable)
			st.BadObserverNode = "node-7"
			return st
		}(), PriorityVerdict},
	}
	for _, tc := range cases {
		w, ok := c.planPair(tc.st, now, DefaultPolicy())
		require.True(t, ok, tc.name)
		assert.Equal(t, tc.want, w.Priority, tc.name)
	}
}

// A writer that starts on a cluster without conditions writes only the failing node's:
// a node found fine is no news (at 65,000 nodes a first False on every node was hours of
// the write budget), and the failing node's condition goes with the verdicts.
func TestOnlyAFailingNodeGetsAFirstCondition(t *testing.T) {
	r := newRing(12, 3)
	e := New(verdict.Config{})
	down := func(src, dst int) bool { return src != 4 && dst != 4 }
	cur := map[string]*verdict.NodeCondition{}
	for i := range r.n {
		cur[fmt.Sprintf("node-%d", i)] = nil
	}
	prio := map[string]Priority{}
	for round := range 8 {
		e.Observe(r.round(round, down), r.at(round))
		e.Reconcile(r.at(round).Add(time.Second))
		d := e.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{})
		for _, w := range d.Writes {
			c := w.Condition
			cur[w.Node] = &c
			if _, seen := prio[w.Node]; !seen {
				prio[w.Node] = NodeWritePriority(w, d.Gray)
			}
		}
	}
	assert.Equal(t, map[string]Priority{"node-4": PriorityVerdict}, prio, "only the failing node's condition, with the verdicts")
	assert.Equal(t, verdict.StatusTrue, cur["node-4"].Status)
}
