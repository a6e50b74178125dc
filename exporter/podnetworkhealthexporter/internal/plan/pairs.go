// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// Priority orders writes (the write queue's priorities).
type Priority = writequeue.Priority

// Priorities, most urgent first.
const (
	PriorityVerdict   = writequeue.Verdict   // verdict changes, objects of newly failing pairs, condition changes
	PriorityEvent     = writequeue.Event     // Events
	PriorityUpdate    = writequeue.Update    // first writes of stable pairs, latency/loss changes
	PriorityHeartbeat = writequeue.Heartbeat // unchanged status rewritten so staleness shows
	PriorityCleanup   = writequeue.Cleanup   // deletes
)

// DegradedMTU is the record of an object written Degraded for a path-MTU black hole
// (families take precedence in the condition).
const DegradedMTU = "mtu"

// ObjectWrite is one PodNetworkHealth object to write (or delete).
type ObjectWrite struct {
	Key observation.PairKey
	// Summary is what to write; unset for deletes.
	Summary observation.Summary
	// BadObserverNode: the pair is Unreachable because its observer's node cannot reach
	// the pod network; the object says Unknown / ObserverUnhealthy instead.
	BadObserverNode string
	// SilentObserver: the pair's observer stopped reporting (Unknown / ObserverSilent);
	// it names the observer pod ("namespace/name").
	SilentObserver string
	// Disruption: the pair is Unreachable towards a target the cluster reported going away
	// or down first; the object says Unknown with the disruption as its reason.
	Disruption string
	// Restate: the pair was resumed from the API and this replica has no summary of its
	// own yet; only the existing object's Reachable condition changes (SilentObserver).
	Restate bool
	// DegradedFamilies: address families that fail while another answers (sorted; empty
	// when every probed family answers).
	DegradedFamilies []string
	// DegradedSince: the first failed round of the earliest failing family.
	DegradedSince time.Time
	// Gray: the pair's gray verdict (PacketLoss, HighLatency) and where it is blamed.
	Gray verdict.PairGray
	// enteredGray: this write begins a gray episode on an existing object (one Event).
	enteredGray bool
	Delete      bool
	Reason      string // Reason* or "observer", "family", "disruption", "delete"
	// Heartbeat is the heartbeat interval in force: an unchanged status is rewritten
	// within it (status.freshUntil promises twice that). 0 with Policy.LeaseFreshness: no
	// heartbeat, no freshUntil.
	Heartbeat time.Duration
	Priority  Priority

	// record is what the verdict stage keeps of this write (Engine.Record).
	record verdict.ObjectRecord
}

// PairObjects is the PodNetworkHealth objects' controller: from the verdict stage's
// judgement it decides which objects to write, restate or delete, why, and how urgently.
// Pure: it keeps no state (what was written comes with each PairState).
type PairObjects struct {
	// Policy is the per-object write policy; its HeartbeatInterval is replaced by the
	// judgement's (the configured one stretched to the budget).
	Policy Policy
}

// Plan returns the object writes due at now: the deletes of dropped pairs, then for every
// pair that may need one, a write when Decide says so or when what the object says of
// its observer (ObserverUnhealthy, ObserverSilent) or of its address families changed.
func (c PairObjects) Plan(j verdict.Judgement, now time.Time) []ObjectWrite {
	out := make([]ObjectWrite, 0, len(j.Deletes))
	for _, k := range j.Deletes {
		out = append(out, ObjectWrite{Key: k, Delete: true, Reason: "delete", Priority: PriorityCleanup})
	}
	policy := c.Policy
	policy.HeartbeatInterval = j.Heartbeat
	for _, st := range j.Pairs {
		if w, ok := c.planPair(st, now, policy); ok {
			if !policy.LeaseFreshness {
				w.Heartbeat = j.Heartbeat
			}
			out = append(out, w)
		}
	}
	return out
}

// planPair decides the write of one pair.
func (PairObjects) planPair(st verdict.PairState, now time.Time, policy Policy) (ObjectWrite, bool) {
	s := st.Summary
	if !st.HasObject && !st.Stable && s.Verdict != observation.VerdictUnreachable {
		return ObjectWrite{}, false // a candidate without a verdict against it: no object
	}
	if !st.HasObject && st.ProblemsOnly && !pairProblem(st) {
		return ObjectWrite{}, false // pair_objects: problems; the summary stands for it
	}
	if st.Seeded {
		// Resumed from the API: it says nothing new yet, unless its observer fell silent;
		// then only the object's Reachable condition is restated.
		if st.HasObject && st.SilentObserver != "" && !st.Last.Silent {
			rec := st.Last
			rec.Silent = true
			return ObjectWrite{Key: st.Key, SilentObserver: st.SilentObserver, Restate: true, Reason: "observer", Priority: PriorityUpdate, record: rec}, true
		}
		return ObjectWrite{}, false
	}
	degradedText := strings.Join(st.DegradedFamilies, ",")
	switch {
	case len(st.DegradedFamilies) > 0:
	case st.Gray.Reason != "":
		degradedText = st.Gray.Reason + "/" + st.Gray.Side // a change of blame is news too
	case s.MTUBlackHole:
		degradedText = DegradedMTU // what the object's Degraded condition says changes with it
	case s.Verdict != observation.VerdictReachable && isGray(st.Last.Degraded):
		// Not judged while not Reachable (the condition reads Unknown): the episode goes on
		// in the record, so coming back to the same gray verdict is no new episode (no
		// second Event).
		degradedText = st.Last.Degraded
	}
	write, reason := Decide(st.Last.Written, s, now, policy)
	prio := Priority(0)
	switch {
	case write:
		prio = priorityOf(reason, st.Stable && !st.ProblemsOnly)
		if reason == ReasonVerdict && !alarming(st.Last.Written.Verdict, s.Verdict) {
			// Towards or between Unknowns (an observer silent, a target going away): no
			// outage begins or ends, so it goes behind those that do. In a DaemonSet roll
			// at 5,000 nodes such writes queued by the ten thousand and held a real
			// outage's write back by 15 minutes (the scale bench, docs/figures.md).
			prio = PriorityUpdate
		}
		if reason == ReasonVerdict && st.ZoneCut {
			// Its zone pair's ZoneNetworkHealth carries the outage, at verdict priority:
			// one write per zone pair. The pairs across it follow behind the verdicts, so
			// that a zone cut's thousands of pair writes (4/9 of the stable pairs when a
			// zone of three is isolated) do not hold back a node's outage at the write goal
			// (found in the shard simulation).
			prio = PriorityUpdate
		}
	case (st.BadObserverNode != "") != st.Last.BadObserver:
		// The attribution of failures to the observer's node changes what the object
		// accuses: as urgent as a verdict.
		write, reason, prio = true, "observer", PriorityVerdict
	case st.HasObject && degradedText != st.Last.Degraded:
		write, reason, prio = true, "family", PriorityVerdict
		if isGray(degradedText) || isGray(st.Last.Degraded) && degradedText == "" {
			// Loss or latency judged, or cleared: news, but no outage begins or ends, so
			// it goes behind those that do (and ahead of heartbeats).
			reason, prio = "gray", PriorityUpdate
		}
	case st.HasObject && (st.SilentObserver != "") != st.Last.Silent:
		write, reason, prio = true, "observer", PriorityUpdate
	case st.Disruption != st.Last.Disruption:
		write, reason, prio = true, "disruption", PriorityUpdate
		if st.Last.Written.Verdict == observation.VerdictUnreachable {
			prio = PriorityVerdict // a written outage turns out to be an expected disruption
		}
	}
	if !write {
		return ObjectWrite{}, false
	}
	// A gray verdict back within the flap window of its end is the episode that ended
	// (found on real nodes: a target's window that had not judged the episode was set on
	// its echoes 5 s after the pair's verdict cleared; a second Event for one loss).
	grayEnded := st.Last.GrayEnded
	if isGray(st.Last.Degraded) && !isGray(degradedText) {
		grayEnded = now
	}
	sameEpisode := !grayEnded.IsZero() && policy.FlapWindow > 0 && now.Sub(grayEnded) <= policy.FlapWindow
	if !sameEpisode {
		grayEnded = time.Time{}
	}
	return ObjectWrite{
		enteredGray: (st.HasObject || st.ProblemsOnly) && isGray(degradedText) && !isGray(st.Last.Degraded) && !sameEpisode,
		Key:         st.Key, Summary: s, BadObserverNode: st.BadObserverNode, SilentObserver: st.SilentObserver, Disruption: st.Disruption,
		DegradedFamilies: st.DegradedFamilies, DegradedSince: st.DegradedSince, Gray: st.Gray, Reason: reason,
		Priority: prio,
		record: verdict.ObjectRecord{Written: observation.WrittenFrom(s, now), BadObserver: st.BadObserverNode != "",
			Degraded: degradedText, Silent: st.SilentObserver != "", Disruption: st.Disruption, GrayEnded: grayEnded},
	}, true
}

// pairProblem reports whether a pair without an object has something to say that
// pair_objects: problems writes: Unreachable, or Reachable and Degraded (a family
// failing, an MTU black hole, a gray verdict).
func pairProblem(st verdict.PairState) bool {
	return st.Summary.Verdict == observation.VerdictUnreachable || len(st.DegradedFamilies) > 0 || st.Summary.MTUBlackHole || st.Gray.Reason != ""
}

// Degraded records of gray verdicts (ObjectRecord.Degraded): the condition's reason.
const (
	DegradedPacketLoss  = v1alpha1.ReasonPacketLoss
	DegradedHighLatency = v1alpha1.ReasonHighLatency
)

// isGray reports whether an ObjectRecord.Degraded is a gray verdict ("PacketLoss/target",
// "HighLatency/observer", ...).
func isGray(degraded string) bool {
	r, _, _ := strings.Cut(degraded, "/")
	return r == DegradedPacketLoss || r == DegradedHighLatency
}

// GrayRecord is the ObjectRecord.Degraded of a Degraded condition written for a gray
// verdict (reason and message: GrayMessage), so a takeover resumes it without a rewrite.
func GrayRecord(reason, message string) string {
	side := verdict.SideTarget
	switch {
	case strings.Contains(message, "at the observer's own node"):
		side = verdict.SideObserver
	case strings.Contains(message, "on this path alone"):
		side = verdict.SidePath
	case strings.Contains(message, "packet loss between zones"), strings.Contains(message, "high latency between zones"):
		side = verdict.SideZone
	}
	return reason + "/" + side
}

// alarming reports whether a verdict change from old to new begins or ends an outage (to
// or from Unreachable) or first says a pair is Reachable: what readers act on.
func alarming(old, new observation.Verdict) bool {
	return old == observation.VerdictUnreachable || new == observation.VerdictUnreachable ||
		new == observation.VerdictReachable && old != observation.VerdictReachable
}

// priorityOf maps a write reason to its priority: a verdict (or its attribution) first; the
// first write of a non-stable pair is a newly failing pair, so it is urgent too.
func priorityOf(reason string, stable bool) Priority {
	switch reason {
	case ReasonVerdict, "observer", "family", "disruption":
		return PriorityVerdict
	case ReasonInitial:
		if !stable {
			return PriorityVerdict
		}
		return PriorityUpdate
	case ReasonHeartbeat:
		return PriorityHeartbeat
	case "delete":
		return PriorityCleanup
	}
	return PriorityUpdate
}

// Result is what one Reconcile decided.
type Result struct {
	// Objects to write, most urgent first.
	Objects []ObjectWrite
	// Events: verdict changes of pairs that have objects, ordered by time.
	Events []observation.Transition
	// Degraded: one Event per object whose Degraded condition turns to PacketLoss or
	// HighLatency (an episode begins); its end is in the object, not an Event.
	Degraded []Event
	// TargetChanges: per-target verdict changes, for logs and metrics.
	TargetChanges []verdict.TargetStatus
	// ObserverChanges: observers that fell silent or reported again.
	ObserverChanges []verdict.ObserverStatus
	// GrayChanges: targets whose loss or latency verdict changed, for logs.
	GrayChanges []verdict.GrayTarget
	// Heartbeat is the heartbeat interval in force.
	Heartbeat time.Duration
}

// Engine is the verdict stage's Engine with the objects' controller: what the exporter's
// leader runs every second (Reconcile). The verdict methods (Observe, Resume, Targets, ...)
// are the embedded Engine's.
type Engine struct {
	*verdict.Engine
	Pairs PairObjects
	// targetChanges counts the per-target verdict changes Reconcile has returned.
	targetChanges atomic.Uint64
}

// TargetChanges is how many per-target verdict changes Reconcile has returned so far: the
// node and pod conditions follow a change at once.
func (e *Engine) TargetChanges() uint64 { return e.targetChanges.Load() }

// New returns an Engine with the default write policy (WithPolicy changes it).
// The heartbeats stretch under the write budget (HeartbeatRule) unless cfg sets its own
// rule.
func New(cfg verdict.Config) *Engine {
	if cfg.HeartbeatInterval == nil {
		cfg.HeartbeatInterval = HeartbeatRule(cfg)
	}
	return &Engine{Engine: verdict.New(cfg), Pairs: PairObjects{Policy: Policy{HeartbeatInterval: cfg.Heartbeat}}}
}

// WithPolicy sets the per-object write policy.
func (e *Engine) WithPolicy(p Policy) *Engine {
	e.Pairs.Policy = p
	return e
}

// Reconcile judges (verdict stage), plans the object writes (PairObjects), records what is
// written, and collects the Events of pairs that have objects.
func (e *Engine) Reconcile(now time.Time) Result {
	j := e.Judge(now)
	res := Result{TargetChanges: j.TargetChanges, ObserverChanges: j.ObserverChanges, GrayChanges: j.GrayChanges, Heartbeat: j.Heartbeat}
	e.targetChanges.Add(uint64(len(j.TargetChanges)))
	for _, w := range e.Pairs.Plan(j, now) {
		if w.Delete || e.Record(w.Key, w.record) {
			res.Objects = append(res.Objects, w)
		}
	}
	res.Events = e.Events()
	res.Degraded = degradedEvents(res.Objects)
	slices.SortStableFunc(res.Objects, func(a, b ObjectWrite) int { return int(a.Priority) - int(b.Priority) })
	return res
}
