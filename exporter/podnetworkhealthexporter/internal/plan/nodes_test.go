// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// The gray condition's writes never go ahead of an outage's verdicts: a held mark that
// clears is Update, an unchanged condition is a heartbeat.
func TestGrayNodeConditionWritesGoBehindVerdicts(t *testing.T) {
	gray := NodeConditions{Type: "netpulse.io/PodNetworkDegraded"}
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}, {ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}}
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	e := New(verdict.Config{})
	// The previous writer's mark, 61 s old: past min_hold (1m), it clears.
	cur := map[string]*verdict.NodeCondition{
		"node-0": {Status: verdict.StatusTrue, Reason: verdict.NodeReasonHighLatency, LastHeartbeat: t0},
		"node-1": nil,
	}
	now := t0.Add(61 * time.Second)
	ws := gray.Plan(e.ReconcileGrayNodes(now, cur, verdict.GrayNodeConfig{}), nodes, now)
	require.Len(t, ws, 1)
	assert.Equal(t, "node-0", ws[0].Node.Name)
	assert.Equal(t, corev1.ConditionFalse, ws[0].Condition.Status)
	assert.Equal(t, PriorityUpdate, ws[0].Priority)

	// A cleared condition is not heartbeated; a mark is.
	e = New(verdict.Config{})
	cur = map[string]*verdict.NodeCondition{
		"node-0": {Status: verdict.StatusFalse, Reason: verdict.NodeReasonWithinThresholds, LastHeartbeat: t0},
		"node-1": {Status: verdict.StatusTrue, Reason: verdict.NodeReasonHighLatency, LastHeartbeat: t0},
	}
	now = t0.Add(11 * time.Minute)
	ws = gray.Plan(e.ReconcileGrayNodes(now, cur, verdict.GrayNodeConfig{}), nodes, now)
	require.Len(t, ws, 1)
	assert.Equal(t, "node-1", ws[0].Node.Name)
}

// The priorities of node condition writes, outage and gray: a gray change is Update where
// the outage condition's same change goes with the verdicts.
func TestNodeWritePriority(t *testing.T) {
	cond := func(status, reason string) *verdict.NodeCondition {
		return &verdict.NodeCondition{Status: status, Reason: reason}
	}
	write := func(replaces, want *verdict.NodeCondition) verdict.NodeWrite {
		changed := replaces == nil || replaces.Status != want.Status || replaces.Reason != want.Reason
		return verdict.NodeWrite{Node: "n", Condition: *want, Changed: changed, Replaces: replaces}
	}
	unreachable := cond(verdict.StatusTrue, verdict.NodeReasonUnreachable)
	reachable := cond(verdict.StatusFalse, verdict.NodeReasonReachable)
	suppressed := cond(verdict.StatusUnknown, verdict.NodeReasonSuppressed)
	loss := cond(verdict.StatusTrue, verdict.NodeReasonPacketLoss)
	within := cond(verdict.StatusFalse, verdict.NodeReasonWithinThresholds)
	for _, tc := range []struct {
		name string
		w    verdict.NodeWrite
		gray bool
		want Priority
	}{
		{"a node found failing", write(nil, unreachable), false, PriorityVerdict},
		{"a marked node clears", write(unreachable, reachable), false, PriorityVerdict},
		{"entering suppression", write(reachable, suppressed), false, PriorityUpdate},
		{"leaving suppression", write(suppressed, unreachable), false, PriorityUpdate},
		{"an unchanged condition", write(unreachable, unreachable), false, PriorityHeartbeat},
		{"gray: a blamed node, behind the outage verdicts", write(nil, loss), true, PriorityUpdate},
		{"gray: a mark clears", write(loss, within), true, PriorityUpdate},
		{"gray: suppressed", write(loss, cond(verdict.StatusUnknown, verdict.NodeReasonSuppressed)), true, PriorityUpdate},
		{"gray: an unchanged condition", write(loss, loss), true, PriorityHeartbeat},
	} {
		assert.Equal(t, tc.want, NodeWritePriority(tc.w, tc.gray), tc.name)
	}
}

// plan.New stretches the verdict stage's heartbeats under the write budget: with a budget
// too small for the ring's objects the heartbeat in force grows beyond the configured one;
// with the default budget it stays as configured.
func TestNewStretchesHeartbeatsUnderTheBudget(t *testing.T) {
	heartbeat := func(cfg verdict.Config) time.Duration {
		r := newRing(12, 3)
		e := New(cfg)
		var res Result
		for round := range 4 {
			e.Observe(r.round(round, func(int, int) bool { return true }), r.at(round))
			res = e.Reconcile(r.at(round).Add(time.Second))
		}
		return res.Heartbeat
	}
	assert.Equal(t, verdict.DefaultHeartbeat, heartbeat(verdict.Config{}))
	// 0.01 writes/s, half of it for heartbeats: 10 objects need 2,000 s.
	assert.Greater(t, heartbeat(verdict.Config{WritesPerSecond: 0.01}), 30*time.Minute)
}
