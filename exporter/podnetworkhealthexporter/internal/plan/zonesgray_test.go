// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

func lossyLink(from, to string, lost uint64) verdict.GrayZonePair {
	return verdict.GrayZonePair{FromZone: from, ToZone: to, Reason: DegradedPacketLoss, TargetNodes: 3,
		Status: verdict.GrayStatus{Lossy: true, Sent: 1440, Lost: lost, Span: 2 * time.Minute, Contributors: 3}}
}

func zoneCondition(t *testing.T, o *v1alpha1.ZoneNetworkHealth, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(o.Status.Conditions, typ)
	require.NotNil(t, c, "%s: no %s condition in %+v", o.Name, typ, o.Status.Conditions)
	return *c
}

// A zone pair judged lossy gets an object (Reachable, Degraded=True/PacketLoss with the
// figures) at once, at Verdict priority; unchanged it is rewritten at the heartbeat only
// (with the newest figures); cleared, Degraded=False at Verdict priority; deleted after the
// retention. A cut pair that is not lossy carries no Degraded condition.
func TestZoneObjectsGrayLoss(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	c := NewZoneObjects(time.Minute, 30*time.Minute, 10*time.Minute)
	res := zones.Result{Pairs: []zones.Pair{
		{From: "a", To: "b", Reason: zones.ReasonReachable, Message: "zone a reaches zone b", NodePairs: 9},
		{From: "b", To: "a", Reason: zones.ReasonReachable, Message: "zone b reaches zone a", NodePairs: 9},
	}}
	var existing []*v1alpha1.ZoneNetworkHealth
	plan := func(at time.Duration, gray ...verdict.GrayZonePair) []ZoneWrite {
		ws := c.Plan(res, gray, existing, t0.Add(at))
		for _, w := range ws {
			existing = applyZoneWrite(existing, w)
		}
		return ws
	}
	assert.Empty(t, plan(0), "a healthy cluster has no object")

	ws := plan(10*time.Second, lossyLink("a", "b", 75))
	require.Len(t, ws, 1)
	w := ws[0]
	assert.Equal(t, writequeue.Update, w.Priority, "loss judged: behind the outages' writes")
	assert.Nil(t, w.Event, "the pairs' objects carry the Events")
	assert.Equal(t, "a.b", w.Object.Name)
	assert.Equal(t, v1alpha1.Reachable, w.Object.Status.Reachability)
	assert.Equal(t, metav1.ConditionTrue, zoneCondition(t, w.Object, v1alpha1.ConditionReachable).Status)
	d := zoneCondition(t, w.Object, v1alpha1.ConditionDegraded)
	assert.Equal(t, []string{"True", v1alpha1.ReasonPacketLoss}, []string{string(d.Status), d.Reason})
	assert.True(t, strings.HasPrefix(d.Message, "packet loss between zones a and b: 5.2 % (95 % CI "), d.Message)
	assert.Contains(t, d.Message, "of 1440 echoes over 2m0s, from 3 observer nodes in a towards 3 target nodes in b")
	assert.Equal(t, t0.Add(10*time.Second), d.LastTransitionTime.Time)

	assert.Empty(t, plan(20*time.Second, lossyLink("a", "b", 90)), "new figures wait for the heartbeat")
	assert.Empty(t, plan(9*time.Minute, lossyLink("a", "b", 90)))
	ws = plan(10*time.Minute+10*time.Second, lossyLink("a", "b", 90))
	require.Len(t, ws, 1, "the heartbeat")
	assert.Equal(t, writequeue.Heartbeat, ws[0].Priority)
	d = zoneCondition(t, ws[0].Object, v1alpha1.ConditionDegraded)
	assert.True(t, strings.HasPrefix(d.Message, "packet loss between zones a and b: 6.2 %"), d.Message)
	assert.Equal(t, t0.Add(10*time.Second), d.LastTransitionTime.Time, "no transition")

	ws = plan(11 * time.Minute)
	require.Len(t, ws, 1, "cleared")
	assert.Equal(t, writequeue.Update, ws[0].Priority)
	d = zoneCondition(t, ws[0].Object, v1alpha1.ConditionDegraded)
	assert.Equal(t, []string{"False", v1alpha1.ReasonWithinThresholds}, []string{string(d.Status), d.Reason})
	assert.Equal(t, "no packet loss judged between zones a and b any more", d.Message)
	assert.Equal(t, v1alpha1.Reachable, ws[0].Object.Status.Reachability)

	assert.Empty(t, plan(40*time.Minute), "kept for the retention after the loss cleared")
	ws = plan(41 * time.Minute)
	require.Len(t, ws, 1)
	assert.True(t, ws[0].Delete)
	assert.Equal(t, writequeue.Cleanup, ws[0].Priority)
	assert.Empty(t, existing)
	assert.Empty(t, plan(42*time.Minute), "forgotten")
}

// A new writer resumes a lossy zone pair from its object: no second transition while the
// loss holds, Degraded=False once it clears. A cut pair's object gains the Degraded
// condition only when the link is judged lossy too, and keeps its Unreachable verdict.
func TestZoneObjectsGrayResumeAndCut(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	a := NewZoneObjects(time.Minute, 30*time.Minute, 10*time.Minute)
	ws := a.Plan(zones.Result{}, []verdict.GrayZonePair{lossyLink("a", "b", 75)}, nil, t0)
	require.Len(t, ws, 1)
	existing := []*v1alpha1.ZoneNetworkHealth{ws[0].Object}
	assert.Contains(t, zoneCondition(t, ws[0].Object, v1alpha1.ConditionReachable).Message, "zone a reaches zone b",
		"not in the zone judgement: the echoes are answered")

	b := NewZoneObjects(time.Minute, 30*time.Minute, 10*time.Minute)
	assert.Empty(t, b.Plan(zones.Result{}, []verdict.GrayZonePair{lossyLink("a", "b", 80)}, existing, t0.Add(time.Minute)), "resumed: no transition")
	ws = b.Plan(zones.Result{}, nil, existing, t0.Add(2*time.Minute))
	require.Len(t, ws, 1)
	assert.Equal(t, metav1.ConditionFalse, zoneCondition(t, ws[0].Object, v1alpha1.ConditionDegraded).Status)

	cut := zones.Result{Pairs: []zones.Pair{{From: "c", To: "d", Cut: true, Reason: zones.ReasonCut, Message: "cut", NodePairs: 4, FailingNodePairs: 4}}}
	c := NewZoneObjects(time.Minute, 30*time.Minute, 10*time.Minute)
	assert.Empty(t, c.Plan(cut, nil, nil, t0))
	ws = c.Plan(cut, nil, nil, t0.Add(10*time.Second))
	require.Len(t, ws, 1)
	assert.Len(t, ws[0].Object.Status.Conditions, 1, "a cut alone: no Degraded condition")
	ws = c.Plan(cut, []verdict.GrayZonePair{lossyLink("c", "d", 75)}, []*v1alpha1.ZoneNetworkHealth{ws[0].Object}, t0.Add(20*time.Second))
	require.Len(t, ws, 1)
	assert.Equal(t, v1alpha1.Unreachable, ws[0].Object.Status.Reachability)
	assert.Equal(t, metav1.ConditionTrue, zoneCondition(t, ws[0].Object, v1alpha1.ConditionDegraded).Status)
}

// A slow zone pair (HighLatency) gets Degraded=True/HighLatency with its share of slow
// rounds; its loss judged later takes over the reason (a write), and back.
func TestZoneObjectsGrayLatency(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := NewZoneObjects(time.Minute, 30*time.Minute, 10*time.Minute)
	res := zones.Result{Pairs: []zones.Pair{{From: "a", To: "b", Reason: zones.ReasonReachable, Message: "zone a reaches zone b", NodePairs: 9}}}
	var existing []*v1alpha1.ZoneNetworkHealth
	plan := func(at time.Duration, gray ...verdict.GrayZonePair) []ZoneWrite {
		ws := c.Plan(res, gray, existing, t0.Add(at))
		for _, w := range ws {
			existing = applyZoneWrite(existing, w)
		}
		return ws
	}
	slow := verdict.GrayZonePair{FromZone: "a", ToZone: "b", Reason: DegradedHighLatency, TargetNodes: 3,
		Status: verdict.GrayStatus{HighLatency: true, Exceeding: 92, Voters: 40, Contributors: 3}}
	ws := plan(10*time.Second, slow)
	require.Len(t, ws, 1)
	d := zoneCondition(t, ws[0].Object, v1alpha1.ConditionDegraded)
	assert.Equal(t, []string{"True", v1alpha1.ReasonHighLatency}, []string{string(d.Status), d.Reason})
	assert.Equal(t, "high latency between zones a and b: 92 % of the recent rounds slow against their targets' baselines, from 3 observer nodes in a towards 3 target nodes in b", d.Message)
	ws = plan(20*time.Second, lossyLink("a", "b", 75))
	require.Len(t, ws, 1, "the reason changed")
	d = zoneCondition(t, ws[0].Object, v1alpha1.ConditionDegraded)
	assert.Equal(t, v1alpha1.ReasonPacketLoss, d.Reason)
	// A takeover reads the reason back.
	c2 := NewZoneObjects(time.Minute, 30*time.Minute, 10*time.Minute)
	ws = c2.Plan(res, []verdict.GrayZonePair{lossyLink("a", "b", 75)}, existing, t0.Add(30*time.Second))
	assert.Empty(t, ws, "nothing new after the takeover")
}
