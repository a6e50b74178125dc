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
	"github.com/netpulse/netpulse/internal/contract"
)

// disrupt marks every observation towards the pods of node `node` with disruption d, as
// k8s_net_attributes does from the cluster's own state.
func disrupt(obs []observation.Observation, node int, d string) []observation.Observation {
	for i := range obs {
		if obs[i].Target.Node == fmt.Sprintf("node-%d", node) {
			obs[i].TargetDisruption = d
		}
	}
	return obs
}

// disruptionRun runs a ring where node `node`'s pod stops answering at round 5; the
// cluster reports disruption d from round `from` on. It returns the target's status, the
// writes of the stable pair towards it, the Events and the node conditions at the end.
func disruptionRun(t *testing.T, d string, from int) (verdict.TargetStatus, []ObjectWrite, int, map[string]*verdict.NodeCondition) {
	t.Helper()
	r := newRing(20, 3)
	e := New(verdict.Config{})
	const down = 7
	cur := map[string]*verdict.NodeCondition{}
	for i := 0; i < r.n; i++ {
		cur[fmt.Sprintf("node-%d", i)] = nil
	}
	stableKey := observation.KeyOf(&observation.Observation{Source: r.src(down - 1), Target: r.tgt(down)})
	var writes []ObjectWrite
	events := 0
	for round := 0; round < 14; round++ {
		ok := healthy
		if round >= 5 {
			ok = func(_, dst int) bool { return dst != down }
		}
		obs := r.round(round, ok)
		if round >= from {
			obs = disrupt(obs, down, d)
		}
		e.Observe(obs, r.at(round))
		res := e.Reconcile(r.at(round).Add(time.Second))
		for _, w := range res.Objects {
			if w.Key == stableKey {
				writes = append(writes, w)
			}
		}
		for _, ev := range res.Events {
			if ev.Key == stableKey {
				events++
			}
		}
		nd := e.ReconcileNodes(r.at(round).Add(time.Second), cur, verdict.NodeConfig{MinHold: 30 * time.Second})
		for _, w := range nd.Writes {
			c := w.Condition
			cur[w.Node] = &c
		}
	}
	ts, ok := e.Target(verdict.TargetKeyOf(&observation.Observation{Target: r.tgt(down)}))
	require.True(t, ok)
	return ts, writes, events, cur
}

// A target the cluster reported going away or down before it failed (a drain, a pod
// terminating, its node NotReady, a pod not started) is not blamed: the target reads
// Unknown with the disruption, its stable pair's object says Unknown with it as the
// reason, no Event, no node condition.
func TestDisruptionBeforeTheFailuresExcusesThem(t *testing.T) {
	for _, d := range []string{contract.DisruptionNodeDraining, contract.DisruptionPodTerminating, contract.DisruptionNodeNotReady, contract.DisruptionNotReady} {
		t.Run(d, func(t *testing.T) {
			ts, writes, events, cur := disruptionRun(t, d, 3) // reported two rounds before
			assert.Equal(t, observation.VerdictUnknown, ts.Verdict)
			assert.Equal(t, d, ts.Disruption)
			require.NotEmpty(t, writes)
			last := writes[len(writes)-1]
			assert.Equal(t, d, last.Disruption, "the object says why")
			assert.Zero(t, events, "no outage Event for an expected failure")
			assert.Nil(t, cur["node-7"], "no node condition: a node never marked is never written")
		})
	}
}

// A disruption the cluster reports after the failures began does not excuse them: a
// partitioned node goes NotReady some 40 s after its pods stop answering, and the
// partition is what netpulse reports.
func TestDisruptionAfterTheFailuresExcusesNothing(t *testing.T) {
	ts, writes, events, _ := disruptionRun(t, contract.DisruptionNodeNotReady, 8)
	assert.Equal(t, observation.VerdictUnreachable, ts.Verdict)
	assert.Empty(t, ts.Disruption)
	require.NotEmpty(t, writes)
	assert.Empty(t, writes[len(writes)-1].Disruption)
	assert.Equal(t, 1, events, "the outage's Event")
}
