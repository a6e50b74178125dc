// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// Events of zone pairs.
const (
	EventZonePairUnreachable = v1alpha1.EventZoneConnectivityLost
	EventZonePairRestored    = v1alpha1.EventZoneConnectivityRestored
)

// ZoneWrite is one ZoneNetworkHealth write for the apply stage: Object (spec and status
// as they should be) created or its status updated, or, with Delete, the object deleted.
type ZoneWrite struct {
	Object   *v1alpha1.ZoneNetworkHealth
	Delete   bool
	Priority Priority
	// Event, when set, is emitted about the object (after a transition).
	Event *ZoneEvent
}

// ZoneEvent is one Event about a ZoneNetworkHealth.
type ZoneEvent struct {
	Type, Reason, Message string
}

// ZoneObjects is the ZoneNetworkHealth controller: an object for each zone pair the zone
// judgement finds cut, written on a change and at the heartbeat, Reachable once the pair is
// no longer cut for MinHold, deleted Retention later. A zone pair the gray judgement finds
// lossy (verdict.GrayZonePair: a lossy link between the zones) gets, or keeps, its object
// with Degraded=True/PacketLoss and the figures, written on the transition and at the
// heartbeat (the figures change every judgement; the pairs' objects carry the newest),
// Degraded=False once the verdict clears (the gray judgement's own hysteresis: no hold
// here), deleted Retention after the later of the two transitions. At most one object per
// ordered zone pair, and none on a healthy cluster. Pure, with the state of the decisions
// it made (the API's objects seed it after a change of writer).
type ZoneObjects struct {
	// MinHold keeps a pair Unreachable this long after the last judgement that found it
	// cut (default 1m, the node conditions' hold).
	MinHold time.Duration
	// Retention: a Reachable object is deleted this long after its transition (default
	// 30m, the failing pairs' retention).
	Retention time.Duration
	// Heartbeat rewrites an unchanged Unreachable object this often (default 10m).
	Heartbeat time.Duration
	// ConfirmFor: a pair is written Unreachable only once judged cut this long without a
	// break (default 10s): the judgement reads each observer's newest round only, so that
	// it keeps a fresh cut out of the node quorum at once, and one round can be a blip.
	ConfirmFor time.Duration

	state map[zonePairKey]*zoneState
}

type zonePairKey struct{ from, to string }

type zoneState struct {
	reach       v1alpha1.Reachability
	since       time.Time // the current reachability's start
	lastFailure time.Time
	written     time.Time // last write decided
	// cutSince: the start of the current unbroken run of cut judgements (zero: not cut).
	cutSince time.Time
	// degraded: Degraded=True decided (a gray verdict on the zone pair); degradedSince the
	// Degraded condition's transition (zero: never Degraded); degradedMsg its message and
	// degradedReason its reason (PacketLoss or HighLatency).
	degraded       bool
	degradedSince  time.Time
	degradedMsg    string
	degradedReason string
}

// Defaults of ZoneObjects.
const (
	DefaultZoneMinHold   = time.Minute
	DefaultZoneRetention = 30 * time.Minute
	DefaultZoneHeartbeat = 10 * time.Minute
	DefaultZoneConfirm   = 10 * time.Second
	// zoneWriteInFlight: an object written this recently and not yet in the cache is not
	// created again.
	zoneWriteInFlight = 30 * time.Second
)

// NewZoneObjects returns the controller; zero durations take the defaults.
func NewZoneObjects(minHold, retention, heartbeat time.Duration) *ZoneObjects {
	return &ZoneObjects{MinHold: cmp.Or(minHold, DefaultZoneMinHold), Retention: cmp.Or(retention, DefaultZoneRetention),
		Heartbeat: cmp.Or(heartbeat, DefaultZoneHeartbeat), ConfirmFor: DefaultZoneConfirm, state: map[zonePairKey]*zoneState{}}
}

// Plan returns the writes of one zone judgement and of the gray zone pairs (those judged
// lossy now). existing is what the API holds (the cache); it seeds the state of pairs this
// controller has not decided yet.
func (c *ZoneObjects) Plan(r zones.Result, gray []verdict.GrayZonePair, existing []*v1alpha1.ZoneNetworkHealth, now time.Time) []ZoneWrite {
	cached := map[zonePairKey]*v1alpha1.ZoneNetworkHealth{}
	for _, o := range existing {
		k := zonePairKey{o.Spec.SourceZone, o.Spec.TargetZone}
		cached[k] = o
		if c.state[k] == nil {
			st := &zoneState{reach: o.Status.Reachability, written: now}
			if cond := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReachable); cond != nil {
				st.since = cond.LastTransitionTime.Time
			}
			if cond := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionDegraded); cond != nil {
				st.degraded = cond.Status == metav1.ConditionTrue
				st.degradedSince, st.degradedMsg = cond.LastTransitionTime.Time, cond.Message
				if st.degraded {
					st.degradedReason = cond.Reason
				}
			}
			if o.Status.LastFailureTime != nil {
				st.lastFailure = o.Status.LastFailureTime.Time
			}
			if o.Status.LastObservedTime != nil {
				st.written = o.Status.LastObservedTime.Time
			}
			c.state[k] = st
		}
	}
	judged := map[zonePairKey]zones.Pair{}
	for _, p := range r.Pairs {
		judged[zonePairKey{p.From, p.To}] = p
	}
	lossy := map[zonePairKey]verdict.GrayZonePair{}
	for _, g := range gray {
		lossy[zonePairKey{g.FromZone, g.ToZone}] = g
	}
	keys := make([]zonePairKey, 0, len(c.state)+len(judged)+len(lossy))
	for k := range c.state {
		keys = append(keys, k)
	}
	for k, p := range judged {
		if p.Cut && c.state[k] == nil {
			keys = append(keys, k)
		}
	}
	for k := range lossy {
		if c.state[k] == nil && !judged[k].Cut {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b zonePairKey) int { return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to)) })

	var out []ZoneWrite
	for _, k := range keys {
		st := c.state[k]
		if st == nil {
			st = &zoneState{}
			c.state[k] = st
		}
		var g *verdict.GrayZonePair
		if z, ok := lossy[k]; ok {
			g = &z
		}
		p, seen := judged[k]
		if w, ok := c.planPair(k, p, seen, g, st, cached[k], now); ok {
			out = append(out, w)
		}
	}
	return out
}

// planPair decides one zone pair's write (false: none): its reachability from the zone
// judgement p (seen: judged at all), its Degraded condition from the gray verdict g (nil:
// not lossy now), a heartbeat, or the delete once both have been quiet for Retention.
func (c *ZoneObjects) planPair(k zonePairKey, p zones.Pair, seen bool, g *verdict.GrayZonePair, st *zoneState,
	obj *v1alpha1.ZoneNetworkHealth, now time.Time) (ZoneWrite, bool) {
	w := ZoneWrite{Priority: writequeue.Heartbeat}
	write := false
	if p.Cut {
		if st.cutSince.IsZero() {
			st.cutSince = now
		}
		if st.reach == v1alpha1.Unreachable || now.Sub(st.cutSince) >= c.ConfirmFor {
			st.lastFailure = now
			if st.reach != v1alpha1.Unreachable {
				st.reach, st.since = v1alpha1.Unreachable, now
				w.Priority, write = writequeue.Verdict, true
				w.Event = &ZoneEvent{Type: corev1.EventTypeWarning, Reason: EventZonePairUnreachable, Message: p.Message}
			}
		}
	} else {
		st.cutSince = time.Time{}
		// Held MinHold: conditions others act on do not follow a flapping uplink round by round.
		if st.reach == v1alpha1.Unreachable && now.Sub(st.lastFailure) >= c.MinHold {
			st.reach, st.since = v1alpha1.Reachable, now
			if !seen {
				st.reach = v1alpha1.ReachabilityUnknown
				p = zones.Pair{From: k.from, To: k.to, Message: "no recent observation between the zones"}
			}
			w.Priority, write = writequeue.Verdict, true
			w.Event = &ZoneEvent{Type: corev1.EventTypeNormal, Reason: EventZonePairRestored,
				Message: fmt.Sprintf("zone %s reaches zone %s again (%s)", k.from, k.to, p.Message)}
		}
	}
	switch {
	case g != nil:
		st.degradedMsg = GrayMessage(verdict.PairGray{Reason: g.Reason, Side: verdict.SideZone, FromZone: g.FromZone, ToZone: g.ToZone,
			TargetNodes: g.TargetNodes, Status: g.Status})
		if st.degraded && st.degradedReason != g.Reason {
			w.Priority, write = min(w.Priority, writequeue.Update), true // loss became latency, or back
		}
		st.degradedReason = g.Reason
		if !st.degraded {
			// Loss judged: news, but no outage begins or ends, so behind those that do
			// (as the pairs' gray writes: plan.PairObjects).
			st.degraded, st.degradedSince = true, now
			w.Priority, write = min(w.Priority, writequeue.Update), true
			if st.reach == "" {
				// An object for the loss alone: the zones answer each other's echoes.
				st.reach, st.since = v1alpha1.Reachable, now
			}
		}
	case st.degraded:
		st.degraded, st.degradedSince = false, now
		st.degradedMsg = fmt.Sprintf("no packet loss judged between zones %s and %s any more", k.from, k.to)
		w.Priority, write = min(w.Priority, writequeue.Update), true
	}
	if st.reach == "" {
		if !p.Cut {
			delete(c.state, k) // a cut that was never confirmed
		}
		return ZoneWrite{}, false
	}
	live := st.reach == v1alpha1.Unreachable || st.degraded
	// A heartbeat, or an object gone from the API (not merely written and not yet cached).
	if !write && live && (obj == nil && now.Sub(st.written) >= zoneWriteInFlight || now.Sub(st.written) >= c.Heartbeat) {
		write = true
	}
	if write {
		st.written = now
		w.Object = zoneObject(k, p, st, now)
		return w, true
	}
	if !live && now.Sub(st.since) >= c.Retention && now.Sub(st.degradedSince) >= c.Retention {
		delete(c.state, k)
		if obj != nil {
			return ZoneWrite{Priority: writequeue.Cleanup, Delete: true, Object: zoneObject(k, p, st, now)}, true
		}
	}
	return ZoneWrite{}, false
}

// Forget drops the controller's state (a lost leadership: the next term seeds from the API).
func (c *ZoneObjects) Forget() { clear(c.state) }

func zoneObject(k zonePairKey, p zones.Pair, st *zoneState, now time.Time) *v1alpha1.ZoneNetworkHealth {
	o := &v1alpha1.ZoneNetworkHealth{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ZoneObjectName(k.from, k.to)},
		Spec:       v1alpha1.ZoneNetworkHealthSpec{SourceZone: k.from, TargetZone: k.to},
		Status: v1alpha1.ZoneNetworkHealthStatus{
			Reachability: st.reach, NodePairs: int32(p.NodePairs), FailingNodePairs: int32(p.FailingNodePairs),
			FailingObserverNodes: firstN(p.FailingObservers), FailingObserverNodeCount: int32(len(p.FailingObservers)),
			FailingTargetNodes: firstN(p.FailingTargets), FailingTargetNodeCount: int32(len(p.FailingTargets)),
			LastObservedTime: ptrTime(now),
		},
	}
	if !st.lastFailure.IsZero() {
		o.Status.LastFailureTime = ptrTime(st.lastFailure)
	}
	msg := p.Message
	if msg == "" {
		// Not in the zone judgement (an object for a loss alone, with too few nodes or
		// rounds for the zone quorum): the zones answer each other's echoes.
		msg = fmt.Sprintf("zone %s reaches zone %s (echoes between them are answered)", k.from, k.to)
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonZonePairReachable,
		Message: v1alpha1.TruncateMessage(msg, 256), LastTransitionTime: metav1.NewTime(st.since)}
	switch st.reach {
	case v1alpha1.Unreachable:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonZonePairUnreachable
	case v1alpha1.ReachabilityUnknown:
		cond.Status, cond.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNoRecentObservations
	}
	o.Status.Conditions = []metav1.Condition{cond}
	if st.degraded || !st.degradedSince.IsZero() {
		d := metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonWithinThresholds,
			Message: v1alpha1.TruncateMessage(st.degradedMsg, 256), LastTransitionTime: metav1.NewTime(st.degradedSince)}
		if st.degraded {
			d.Status, d.Reason = metav1.ConditionTrue, st.degradedReason
		}
		o.Status.Conditions = append(o.Status.Conditions, d)
	}
	return o
}

func firstN(s []string) []string {
	if len(s) > v1alpha1.MaxZoneNodesListed {
		return s[:v1alpha1.MaxZoneNodesListed]
	}
	return s
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
