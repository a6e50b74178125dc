// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// SummaryInput is what one judgement tells the writer's NetworkHealthSummary: the
// engine's targets, gray verdicts and observers, and the writer's queue.
type SummaryInput struct {
	Targets   []verdict.TargetStatus
	Gray      []verdict.GrayTarget
	Observers []verdict.ObserverStatus
	// PendingVerdict: verdict writes queued; Pending: every write queued.
	PendingVerdict, Pending int
}

// SummaryWriter names the writer in its summary.
type SummaryWriter struct {
	LeaseName, Identity string
	Shard, Shards       int
}

// Summary decides the writer's NetworkHealthSummary status and when to write it: at a
// term's first judgement, then only when a figure changes (targets by verdict, the
// nodes named, observers, Complete), at most once per MinInterval (UrgentSummaryInterval
// when it names a node newly Unreachable). The queue's length
// alone moves it only when it halves or doubles (by 64 writes at least), so a cold start's progress
// costs a few writes and a steady queue none. No heartbeat: the summary is current while
// its Lease is renewed. Pure: the controller feeds it and writes what it returns.
type Summary struct {
	MinInterval time.Duration
	// WarmUp: for this long after a term starts its targets' verdicts are not all in
	// (each needs its observers' rounds), so Complete reads False/WarmingUp.
	WarmUp time.Duration
	Writer SummaryWriter

	termStart time.Time
	last      *v1alpha1.NetworkHealthSummaryStatus // nil: nothing written this term
	lastAt    time.Time
}

// Lead starts a term at now: the next judgement is written.
func (s *Summary) Lead(now time.Time) { s.termStart, s.last, s.lastAt = now, nil, time.Time{} }

// Forget ends the term.
func (s *Summary) Forget() { s.last = nil }

// Plan returns the status judged from in at now, and whether to write it.
func (s *Summary) Plan(in SummaryInput, now time.Time) (*v1alpha1.NetworkHealthSummaryStatus, bool) {
	st := s.status(in, now)
	if s.last != nil {
		wait := s.MinInterval
		if newlyUnreachable(s.last, st) {
			// A node newly Unreachable is what a reader needs within the goal's 2 rounds:
			// the 30 s pace made it take up to 3 (the shard simulation: 2.09 intervals).
			wait = min(wait, UrgentSummaryInterval)
		}
		if !s.news(st) || now.Sub(s.lastAt) < wait {
			return st, false
		}
	}
	s.last, s.lastAt = st, now
	return st, true
}

func (s *Summary) status(in SummaryInput, now time.Time) *v1alpha1.NetworkHealthSummaryStatus {
	st := &v1alpha1.NetworkHealthSummaryStatus{
		LeaseName: s.Writer.LeaseName, Writer: s.Writer.Identity,
		Shard: int32(s.Writer.Shard), Shards: int32(max(s.Writer.Shards, 1)),
		TermStartTime: &metav1.Time{Time: s.termStart}, LastJudgedTime: &metav1.Time{Time: now},
		Targets:              int32(len(in.Targets)),
		PendingVerdictWrites: int32(in.PendingVerdict), PendingWrites: int32(in.Pending),
	}
	unreachable := map[string]bool{}
	for _, t := range in.Targets {
		switch t.Verdict {
		case observation.VerdictReachable:
			st.ReachableTargets++
		case observation.VerdictUnreachable:
			st.UnreachableTargets++
			if t.Target.Node != "" {
				unreachable[t.Target.Node] = true
			}
		default:
			st.UnknownTargets++
		}
	}
	degraded := map[string]bool{}
	for _, g := range in.Gray {
		if g.Status.Lossy || g.Status.HighLatency {
			st.DegradedTargets++
			if g.Node != "" {
				degraded[g.Node] = true
			}
		}
	}
	st.UnreachableNodes, st.UnreachableNodeCount = listed(unreachable)
	st.DegradedNodes, st.DegradedNodeCount = listed(degraded)
	st.Observers = int32(len(in.Observers))
	for _, o := range in.Observers {
		if o.Silent {
			st.SilentObservers++
		}
	}
	if s.last != nil {
		st.Conditions = slices.Clone(s.last.Conditions) // keeps lastTransitionTime
	}
	c := metav1.Condition{Type: v1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonVerdictsWritten,
		Message: fmt.Sprintf("every verdict of %d targets is written; %d other writes queued", st.Targets, st.PendingWrites)}
	switch {
	case now.Sub(s.termStart) < s.WarmUp:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonWarmingUp
		c.Message = fmt.Sprintf("the writer's term began at %s; its targets are judged from their observers' rounds since", s.termStart.UTC().Format(time.RFC3339))
	case in.PendingVerdict > 0:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonVerdictWritesPending
		c.Message = fmt.Sprintf("%d verdict writes and %d others wait for the write budget", in.PendingVerdict, in.Pending-in.PendingVerdict)
	}
	meta.SetStatusCondition(&st.Conditions, c)
	return st
}

// listed returns the sorted first MaxSummaryNodesListed names of set and its size.
func listed(set map[string]bool) ([]string, int32) {
	if len(set) == 0 {
		return nil, 0
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names[:min(len(names), v1alpha1.MaxSummaryNodesListed)], int32(len(set))
}

// UrgentSummaryInterval: a summary that names a node newly Unreachable is written this
// long after the last write at the earliest (MinInterval otherwise): at most one write per
// 10 s per writer while nodes keep failing.
const UrgentSummaryInterval = 10 * time.Second

// newlyUnreachable: st names an Unreachable node that the last written status did not
// (or counts more of them than it did, beyond the list's bound).
func newlyUnreachable(last, st *v1alpha1.NetworkHealthSummaryStatus) bool {
	if st.UnreachableNodeCount > last.UnreachableNodeCount {
		return true
	}
	for _, n := range st.UnreachableNodes {
		if !slices.Contains(last.UnreachableNodes, n) {
			return true
		}
	}
	return false
}

// news reports whether st differs from the last written status in a figure worth a
// write.
func (s *Summary) news(st *v1alpha1.NetworkHealthSummaryStatus) bool {
	l := s.last
	if l.Targets != st.Targets || l.ReachableTargets != st.ReachableTargets || l.UnreachableTargets != st.UnreachableTargets ||
		l.UnknownTargets != st.UnknownTargets || l.DegradedTargets != st.DegradedTargets ||
		l.UnreachableNodeCount != st.UnreachableNodeCount || l.DegradedNodeCount != st.DegradedNodeCount ||
		!slices.Equal(l.UnreachableNodes, st.UnreachableNodes) || !slices.Equal(l.DegradedNodes, st.DegradedNodes) ||
		l.Observers != st.Observers || l.SilentObservers != st.SilentObservers {
		return true
	}
	if !meta.IsStatusConditionPresentAndEqual(l.Conditions, v1alpha1.ConditionComplete, conditionStatus(st)) {
		return true
	}
	return moved(l.PendingWrites, st.PendingWrites)
}

func conditionStatus(st *v1alpha1.NetworkHealthSummaryStatus) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionComplete); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}

// moved: the queue halved or doubled by at least minQueueMove writes (a cold start's first
// writes drain in log2(N) summaries, not N; a queue of a few writes coming and going in a
// steady state is no news).
func moved(was, is int32) bool {
	if max(was, is)-min(was, is) < minQueueMove {
		return false
	}
	return is <= was/2 || is >= 2*was
}

// minQueueMove is the smallest change of the queue's length worth a summary.
const minQueueMove = 64
