// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// summaryTargets is n targets on nodes node-0..n-1, the first unreachable of them
// Unreachable and the last unknown Unknown.
func summaryTargets(n, unreachable, unknown int) []verdict.TargetStatus {
	out := make([]verdict.TargetStatus, n)
	for i := range out {
		v := observation.VerdictReachable
		switch {
		case i < unreachable:
			v = observation.VerdictUnreachable
		case i >= n-unknown:
			v = observation.VerdictUnknown
		}
		node := fmt.Sprintf("node-%02d", i)
		out[i] = verdict.TargetStatus{Key: verdict.TargetKey{Kind: observation.TargetNode, Name: node}, Target: observation.Target{Node: node}, Verdict: v}
	}
	return out
}

func complete(st *v1alpha1.NetworkHealthSummaryStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionComplete)
}

func TestSummaryCountsAndBoundsItsLists(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &Summary{MinInterval: 30 * time.Second, WarmUp: 30 * time.Second, Writer: SummaryWriter{LeaseName: "netpulse-gateway-1", Identity: "gw-1", Shard: 1, Shards: 8}}
	s.Lead(t0)
	gray := []verdict.GrayTarget{
		{Node: "node-30", Status: verdict.GrayStatus{Lossy: true}},
		{Node: "node-31", Status: verdict.GrayStatus{HighLatency: true}},
		{Node: "node-31", Status: verdict.GrayStatus{Lossy: true}}, // the node's other family
		{Node: "node-32"}, // echoes, no verdict
	}
	in := SummaryInput{Targets: summaryTargets(40, 12, 3), Gray: gray,
		Observers: []verdict.ObserverStatus{{UID: "a"}, {UID: "b", Silent: true}, {UID: "c"}}, PendingVerdict: 2, Pending: 500}

	st, write := s.Plan(in, t0.Add(5*time.Second))
	require.True(t, write, "a term's first judgement is written")
	require.Equal(t, int32(40), st.Targets)
	require.Equal(t, []int32{25, 12, 3}, []int32{st.ReachableTargets, st.UnreachableTargets, st.UnknownTargets})
	require.Equal(t, int32(12), st.UnreachableNodeCount)
	require.Len(t, st.UnreachableNodes, v1alpha1.MaxSummaryNodesListed, "at most 10 names; the count is complete")
	require.Equal(t, "node-00", st.UnreachableNodes[0])
	require.Equal(t, []string{"node-30", "node-31"}, st.DegradedNodes)
	require.Equal(t, int32(3), st.DegradedTargets)
	require.Equal(t, []int32{3, 1}, []int32{st.Observers, st.SilentObservers})
	require.Equal(t, []int32{2, 500}, []int32{st.PendingVerdictWrites, st.PendingWrites})
	require.Equal(t, "netpulse-gateway-1", st.LeaseName)
	require.Equal(t, []int32{1, 8}, []int32{st.Shard, st.Shards})
	require.Equal(t, t0, st.TermStartTime.Time)
	c := complete(st)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, v1alpha1.ReasonWarmingUp, c.Reason, "inside the warm-up the targets are not all judged")
}

func TestSummaryIsWrittenForNewsOnly(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &Summary{MinInterval: 30 * time.Second, WarmUp: 10 * time.Second, Writer: SummaryWriter{LeaseName: "netpulse-gateway", Identity: "gw-0"}}
	s.Lead(t0)
	in := SummaryInput{Targets: summaryTargets(100, 0, 0), PendingVerdict: 3, Pending: 8000}
	now := t0.Add(20 * time.Second)
	st, write := s.Plan(in, now)
	require.True(t, write)
	require.Equal(t, v1alpha1.ReasonVerdictWritesPending, complete(st).Reason)

	step := func(d time.Duration, in SummaryInput) (*v1alpha1.NetworkHealthSummaryStatus, bool) {
		now = now.Add(d)
		return s.Plan(in, now)
	}
	// The queue drains a little: no news, however long.
	in.Pending = 7000
	_, write = step(time.Hour, in)
	require.False(t, write, "a queue that moved by an eighth is no news")
	// It halves: news.
	in.Pending = 3900
	_, write = step(time.Minute, in)
	require.True(t, write, "a halved queue is news (log2(N) writes for a cold start)")

	// The verdicts are written: Complete turns True, once.
	in.PendingVerdict, in.Pending = 0, 3000
	st, write = step(time.Minute, in)
	require.True(t, write)
	c := complete(st)
	require.Equal(t, metav1.ConditionTrue, c.Status)
	require.Equal(t, v1alpha1.ReasonVerdictsWritten, c.Reason)
	since := c.LastTransitionTime
	_, write = step(time.Hour, in)
	require.False(t, write, "a steady cluster costs no write: the Lease says the summary is current")

	// A target turns Unreachable: news, written at once when the last write is older than
	// UrgentSummaryInterval; other news waits for MinInterval.
	in.Targets = summaryTargets(100, 1, 0)
	st, write = step(time.Second, in)
	require.True(t, write, "the last write was an hour ago")
	require.Equal(t, []string{"node-00"}, st.UnreachableNodes)
	require.Equal(t, since, complete(st).LastTransitionTime, "an unchanged condition keeps its transition time")
	in.Targets = summaryTargets(100, 2, 0)
	_, write = step(5*time.Second, in)
	require.False(t, write, "a node newly Unreachable, within UrgentSummaryInterval of the last write")
	st, write = step(5*time.Second, in)
	require.True(t, write, "a node newly Unreachable, UrgentSummaryInterval after the last write")
	require.Equal(t, int32(2), st.UnreachableTargets)
	in.Targets = summaryTargets(100, 1, 0)
	_, write = step(10*time.Second, in)
	require.False(t, write, "a node no longer Unreachable, within min_interval of the last write")
	st, write = step(25*time.Second, in)
	require.True(t, write, "past min_interval, the news is written")
	require.Equal(t, int32(1), st.UnreachableTargets)

	// A new term writes its first judgement whatever the last term wrote.
	s.Forget()
	s.Lead(now)
	st, write = step(time.Second, in)
	require.True(t, write)
	require.Equal(t, v1alpha1.ReasonWarmingUp, complete(st).Reason)
}

func TestSummaryQueueMoves(t *testing.T) {
	for _, c := range []struct {
		was, is int32
		news    bool
	}{{0, 0, false}, {0, 1, false}, {1, 0, false}, {40, 0, false}, {64, 0, true}, {0, 64, true}, {1000, 600, false}, {1000, 500, true}, {1000, 1900, false}, {1000, 2000, true}} {
		require.Equal(t, c.news, moved(c.was, c.is), "%d -> %d", c.was, c.is)
	}
}
