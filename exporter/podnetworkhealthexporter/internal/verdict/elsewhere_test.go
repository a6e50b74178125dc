// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// ReachedElsewhere keeps one time per observer node, from successes towards a pod or node
// on another node only, whatever a sender claims: many claims of one source make one
// entry, its own node, and its own node as a target, failures and External targets make
// none. Entries past TargetTTL are forgotten, and only those within the edges' age count.
func TestReachedElsewhereKeepsOneTimePerObserverNode(t *testing.T) {
	e := New(Config{})
	now := time.Now().Truncate(time.Second)
	src := standbyAgent(1) // node-1
	succ := func(node string, kind observation.TargetKind, ok bool, at time.Time) observation.Observation {
		return observation.Observation{Source: src, Timestamp: at, Success: ok,
			Target: observation.Target{Kind: kind, Namespace: "netpulse", Name: "agent-x", UID: "uid-x-" + node, Node: node}}
	}
	var claims []observation.Observation
	for i := range 1000 {
		claims = append(claims, succ(fmt.Sprintf("node-%d", 100+i), observation.TargetPod, true, now.Add(-time.Duration(i)*time.Millisecond)))
	}
	require.Zero(t, e.ReachedElsewhere(claims, now))
	require.Len(t, e.reachedElsewhere, 1, "one entry per observer node, not per claim")
	assert.Equal(t, now, e.reachedElsewhere["node-1"], "the newest")

	e2 := New(Config{})
	ignored := e2.ReachedElsewhere([]observation.Observation{
		succ("node-1", observation.TargetPod, true, now),                // its own node
		succ("node-2", observation.TargetPod, false, now),               // a failure
		succ("", observation.TargetExternal, true, now),                 // External
		succ("", observation.TargetPod, true, now),                      // no target node: unusable
		succ("node-2", observation.TargetPod, true, now.Add(time.Hour)), // from the future: unusable
	}, now)
	assert.Equal(t, 2, ignored)
	assert.Empty(t, e2.reachedElsewhere)
	assert.Empty(t, e2.workingElsewhere(now, time.Hour))

	assert.Equal(t, []string{"node-1"}, e.workingElsewhere(now.Add(time.Minute), 2*time.Minute))
	assert.Empty(t, e.workingElsewhere(now.Add(3*time.Minute), 2*time.Minute), "older than the edges: no evidence about now")
	assert.Len(t, e.reachedElsewhere, 1, "kept until TargetTTL")
	e.workingElsewhere(now.Add(e.cfg.TargetTTL+time.Second), 0)
	assert.Empty(t, e.reachedElsewhere, "forgotten after TargetTTL")
}
