// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// A node's agent pod is replaced (new name, UID), then the node is partitioned: the old
// pod's target, which nobody probes any more, must not speak for the node with its last
// successes. Its evidence is stale within the settle time, so the partition is marked
// (found end to end: it read as a wide outage until the old target expired).
func TestReplacedPodsOldSuccessesDoNotHideAPartition(t *testing.T) {
	r := newRing(10, 3)
	e := New(verdict.Config{})
	cur := map[string]*verdict.NodeCondition{}
	for i := 0; i < r.n; i++ {
		cur[fmt.Sprintf("node-%d", i)] = nil
	}
	const node = 5
	replaced := func(obs []observation.Observation) []observation.Observation {
		for i := range obs {
			if obs[i].Source.Node == "node-5" {
				obs[i].Source.Name, obs[i].Source.UID = "agent-5b", "uid-5b"
			}
			if obs[i].Target.Node == "node-5" {
				obs[i].Target.Name, obs[i].Target.UID = "agent-5b", "uid-5b"
			}
		}
		return obs
	}
	var marked []string
	for round := 0; round < 20; round++ {
		obs := r.round(round, healthy)
		switch {
		case round >= 12:
			obs = replaced(r.round(round, func(s, d int) bool { return s != node && d != node }))
		case round >= 4:
			obs = replaced(obs)
		}
		e.Observe(obs, r.at(round))
		now := r.at(round).Add(time.Second)
		e.Reconcile(now)
		d := e.ReconcileNodes(now, cur, verdict.NodeConfig{})
		for _, w := range d.Writes {
			c := w.Condition
			cur[w.Node] = &c
		}
		if round >= 12 {
			assert.False(t, d.Suppressed, "round %d: %s", round, d.SuppressedReason)
			marked = d.Marked
		}
	}
	assert.Equal(t, []string{"node-5"}, marked)
}
