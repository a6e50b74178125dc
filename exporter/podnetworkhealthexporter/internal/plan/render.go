// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

// Rendering: a pair's object write (ObjectWrite) as the PodNetworkHealth the writer
// applies, and back: what a new leader reads from the objects the API holds.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/internal/contract"
)

// ObjectNameOf is the PodNetworkHealth name of a pair (v1alpha1.ExternalObjectName).
func ObjectNameOf(k observation.PairKey) string {
	return v1alpha1.ExternalObjectName(k.SourceNamespace, k.SourcePod, string(k.TargetKind), k.TargetNamespace, k.TargetName, k.TargetAddress, k.TargetPort, k.TargetEndpoint)
}

// specOf is the immutable identity of a pair's object.
func specOf(k observation.PairKey) v1alpha1.PodNetworkHealthSpec {
	spec := v1alpha1.PodNetworkHealthSpec{
		SourcePodRef: v1alpha1.PodReference{Namespace: k.SourceNamespace, Name: k.SourcePod, UID: types.UID(k.SourceUID)},
	}
	switch {
	case k.TargetKind == observation.TargetPod:
		spec.TargetKind = v1alpha1.TargetKindPod
		spec.TargetPodRef = &v1alpha1.PodReference{Namespace: k.TargetNamespace, Name: k.TargetName, UID: types.UID(k.TargetUID)}
	case k.TargetKind == observation.TargetNode && k.TargetName != "":
		spec.TargetKind = v1alpha1.TargetKindNode
		spec.TargetNodeRef = &v1alpha1.NodeReference{Name: k.TargetName}
	default:
		spec.TargetKind = v1alpha1.TargetKindExternal
		spec.TargetEndpoint = &v1alpha1.EndpointReference{Address: k.TargetAddress, Port: int32(k.TargetPort), Endpoint: k.TargetEndpoint}
	}
	return spec
}

// Desired is the latest state a pair's object should have, rendered from an ObjectWrite
// (DesiredOf) for the apply stage's writer, which keeps only the newest per object.
type Desired struct {
	Obj    *v1alpha1.PodNetworkHealth
	Reason string
	Delete bool
	// Restate, when set, changes the existing object's status in place (Obj names it; its
	// spec and status are not used); nothing is written when the object does not exist.
	Restate func(*v1alpha1.PodNetworkHealthStatus)
}

// DesiredOf renders one object write of the plan as the writer's desired state: the object
// to create or update, a delete, or an in-place restate of the existing object.
func DesiredOf(w ObjectWrite, now time.Time) *Desired {
	named := &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: w.Key.SourceNamespace, Name: ObjectNameOf(w.Key)}}
	switch {
	case w.Delete:
		// The pair's identity: the writer deletes the object of the name only if it is
		// still this pair's (a same-named pod's object is another pair's).
		named.Spec = specOf(w.Key)
		return &Desired{Obj: named, Reason: w.Reason, Delete: true}
	case w.Restate:
		silent := w.SilentObserver
		return &Desired{Obj: named, Reason: w.Reason,
			Restate: func(st *v1alpha1.PodNetworkHealthStatus) { markObserverSilent(st, silent, now) }}
	}
	obj := objectOf(w.Summary)
	setDegraded(&obj.Status, w.Summary, w.DegradedFamilies, w.DegradedSince, w.Gray)
	switch {
	case w.BadObserverNode != "":
		markObserverUnhealthy(&obj.Status, w.BadObserverNode)
	case w.Disruption != "":
		markDisrupted(&obj.Status, w.Disruption)
	case w.SilentObserver != "":
		markObserverSilent(&obj.Status, w.SilentObserver, now)
	}
	if w.Heartbeat > 0 && obj.Status.LastObservedTime != nil {
		// The writer rewrites an unchanged status within the heartbeat in force; twice that
		// leaves room for a full write queue. Past it, the status is stale.
		obj.Status.FreshUntil = timePtr(obj.Status.LastObservedTime.Add(2 * w.Heartbeat))
	}
	return &Desired{Obj: obj, Reason: w.Reason}
}

// objectOf renders a pair's summary as the object the API should hold: in the source pod's
// namespace, owned by the source pod (garbage-collected with it).
func objectOf(s observation.Summary) *v1alpha1.PodNetworkHealth {
	k := s.Key
	obj := &v1alpha1.PodNetworkHealth{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ObjectNameOf(k),
			Namespace: k.SourceNamespace,
			Labels:    map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: k.SourcePod, UID: types.UID(k.SourceUID),
			}},
		},
		Spec:   specOf(k),
		Status: statusOf(s),
	}
	if len(validation.IsValidLabelValue(k.SourcePod)) == 0 {
		obj.Labels[v1alpha1.LabelSourcePod] = k.SourcePod
	}
	return obj
}

func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

func latencyOf(l observation.Latency) *v1alpha1.LatencySummary {
	if l.Count == 0 {
		return nil
	}
	return v1alpha1.NewLatencySummary(l.P50, l.P90, l.P99, l.Max)
}

func clampInt32(v uint64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(v)
}

// statusOf maps a summary onto the API's status. Times are truncated to seconds (what the
// API stores), so an unchanged summary renders an identical status.
func statusOf(s observation.Summary) v1alpha1.PodNetworkHealthStatus {
	st := v1alpha1.PodNetworkHealthStatus{
		Reachability:     v1alpha1.Reachability(s.Verdict),
		Latency:          latencyOf(s.RTT),
		LastObservedTime: timePtr(s.LastObserved),
		ObservedFromNode: s.ObservedFromNode,
		ObserverCount:    int32(min(s.Observers, math.MaxInt32)),
	}
	if s.HasLoss {
		st.LossRatio = v1alpha1.RatioFromFloat(s.LossRatio)
	}
	if !s.WindowStart.IsZero() {
		st.Window = v1alpha1.DurationOf(s.WindowEnd.Sub(s.WindowStart).Truncate(time.Second))
	}
	for _, p := range s.Probes {
		pr := v1alpha1.ProbeResult{
			Type:            v1alpha1.ProbeType(p.Type),
			Sent:            clampInt32(p.Sent),
			Lost:            clampInt32(min(p.Lost, p.Sent)),
			Latency:         latencyOf(p.RTT),
			LastSuccessTime: timePtr(p.LastSuccess),
		}
		if f := p.LastFailure; f != nil {
			reason := f.Reason
			if reason == "" {
				reason = v1alpha1.FailureReasonError
			}
			pr.LastFailure = &v1alpha1.ProbeFailure{
				Time:    metav1.NewTime(f.Time.Truncate(time.Second)),
				Reason:  reason,
				Message: v1alpha1.TruncateMessage(f.Message, v1alpha1.MaxMessageLength),
			}
		}
		st.Probes = append(st.Probes, pr)
	}
	for i, o := range s.Outages {
		if i == v1alpha1.MaxOutages {
			break
		}
		st.Outages = append(st.Outages, v1alpha1.Outage{
			Start:   metav1.NewTime(o.Start.Truncate(time.Second)),
			End:     timePtr(o.End),
			Reason:  o.Reason,
			Message: v1alpha1.TruncateMessage(o.Message, v1alpha1.MaxMessageLength),
			Flaps:   clampInt32(uint64(o.Flaps)),
		})
	}
	cond := metav1.Condition{
		Type:               v1alpha1.ConditionReachable,
		LastTransitionTime: metav1.NewTime(s.VerdictSince.Truncate(time.Second)),
	}
	switch s.Verdict {
	case observation.VerdictReachable:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonProbesSucceeded
		cond.Message = "the target answered the last probe rounds"
	case observation.VerdictUnreachable:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonProbesFailed
		cond.Message = "the target did not answer the last probe rounds"
		if len(s.Outages) > 0 && s.Outages[0].Ongoing() && s.Outages[0].Message != "" {
			cond.Message = v1alpha1.TruncateMessage(s.Outages[0].Message, v1alpha1.MaxMessageLength)
		}
	default:
		cond.Status, cond.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNoRecentObservations
		cond.Message = "not enough probe rounds for a verdict yet"
	}
	if cond.LastTransitionTime.IsZero() {
		cond.LastTransitionTime = metav1.NewTime(s.LastObserved.Truncate(time.Second))
	}
	st.Conditions = []metav1.Condition{cond}
	return st
}

// setDegraded adds the Degraded condition: True when an address family of a reachable pair
// fails while another answers, on judged packet loss or high latency (verdict.PairGray,
// with its figures and the side it is blamed on), or on a path-MTU black hole, in that
// order; False when none holds, Unknown while the pair is not Reachable.
func setDegraded(st *v1alpha1.PodNetworkHealthStatus, s observation.Summary, families []string, since time.Time, g verdict.PairGray) {
	cond := metav1.Condition{Type: v1alpha1.ConditionDegraded, LastTransitionTime: metav1.NewTime(s.VerdictSince.Truncate(time.Second))}
	switch {
	case s.Verdict != observation.VerdictReachable:
		cond.Status, cond.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNotReachable
		cond.Message = "degradation is judged only while the target is reachable"
	case len(families) > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonAddressFamilyUnreachable
		cond.Message = strings.Join(families, " and ") + " probes fail while the target answers on another address family"
		if !since.IsZero() {
			cond.LastTransitionTime = metav1.NewTime(since.Truncate(time.Second))
		}
	case g.Reason != "":
		// Before MTUBlackHole: a congested or lossy path loses large packets more often than
		// small ones (a byte-limited queue has room for a small echo before a full-size
		// one), which the path-MTU probes cannot tell from a black hole. Found end to end:
		// a node whose uplink was shaped and kept full read MTUBlackHole on its pairs
		// instead of HighLatency. A real black hole loses no small echo and adds no delay,
		// so it is judged on a path without a gray verdict.
		cond.Status, cond.Reason = metav1.ConditionTrue, g.Reason
		cond.Message = GrayMessage(g)
		since := g.Status.LossSince
		if g.Reason == v1alpha1.ReasonHighLatency {
			since = g.Status.LatencySince
		}
		if !since.IsZero() {
			cond.LastTransitionTime = metav1.NewTime(since.Truncate(time.Second))
		}
	case s.MTUBlackHole:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonMTUBlackHole
		cond.Message = fmt.Sprintf("%d-byte packets pass; full-size don't-fragment packets vanish without an ICMP error (a path-MTU black hole: a hop with a smaller MTU drops them, and its fragmentation-needed/packet-too-big replies are lost)", s.MTUPasses)
		if !s.MTUSince.IsZero() {
			cond.LastTransitionTime = metav1.NewTime(s.MTUSince.Truncate(time.Second))
		}
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonWithinThresholds
		cond.Message = "every probed address family answers, without judged packet loss or latency"
	}
	if cond.LastTransitionTime.IsZero() {
		cond.LastTransitionTime = metav1.NewTime(s.LastObserved.Truncate(time.Second))
	}
	st.Conditions = append(st.Conditions, cond)
}

// KeyOfObject recovers the pair of an existing object (to resume after a restart or a
// leadership change without rewriting what the API already has).
func KeyOfObject(o *v1alpha1.PodNetworkHealth) observation.PairKey {
	k := observation.PairKey{
		SourceNamespace: o.Spec.SourcePodRef.Namespace,
		SourcePod:       o.Spec.SourcePodRef.Name,
		SourceUID:       string(o.Spec.SourcePodRef.UID),
	}
	switch o.Spec.TargetKind {
	case v1alpha1.TargetKindPod:
		k.TargetKind = observation.TargetPod
		if r := o.Spec.TargetPodRef; r != nil {
			k.TargetNamespace, k.TargetName, k.TargetUID = r.Namespace, r.Name, string(r.UID)
		}
	case v1alpha1.TargetKindNode:
		k.TargetKind = observation.TargetNode
		if r := o.Spec.TargetNodeRef; r != nil {
			k.TargetName = r.Name
		}
	default:
		k.TargetKind = observation.TargetExternal
		if r := o.Spec.TargetEndpoint; r != nil {
			k.TargetAddress, k.TargetPort, k.TargetEndpoint = r.Address, int64(r.Port), r.Endpoint
		}
	}
	return k
}

// writtenOf approximates what was written for an existing object, so the write budget
// carries on across restarts: the heartbeat counts from its last observed time.
func writtenOf(o *v1alpha1.PodNetworkHealth) observation.Written {
	w := observation.Written{Verdict: observation.Verdict(o.Status.Reachability), Fingerprint: 1}
	if o.Status.LastObservedTime != nil {
		w.At = o.Status.LastObservedTime.Time
	} else {
		w.At = o.CreationTimestamp.Time
	}
	if l := o.Status.Latency; l != nil {
		if d, err := l.P50.Duration(); err == nil {
			w.HasRTT, w.RTTP50 = true, d
		}
	}
	if o.Status.LossRatio != "" {
		if f, err := o.Status.LossRatio.Float64(); err == nil {
			w.HasLoss, w.LossRatio = true, f
		}
	}
	return w
}

// PersistedOf reads back what a previous writer left in an object, for verdict.Resume: the
// pair's verdict (Unreachable also when written as ObserverUnhealthy), since when, the
// outage history and the attribution.
func PersistedOf(o *v1alpha1.PodNetworkHealth) verdict.Persisted {
	k := KeyOfObject(o)
	st := &o.Status
	p := verdict.Persisted{
		Key:     k,
		Written: writtenOf(o),
		Source:  observation.Source{Namespace: k.SourceNamespace, Name: k.SourcePod, UID: k.SourceUID, Node: st.ObservedFromNode},
		Target:  observation.Target{Kind: k.TargetKind, Namespace: k.TargetNamespace, Name: k.TargetName, UID: k.TargetUID, Address: k.TargetAddress, Port: k.TargetPort, Endpoint: k.TargetEndpoint},
		Verdict: observation.Verdict(st.Reachability),
	}
	if st.LastObservedTime != nil {
		p.LastObserved = st.LastObservedTime.Time
	}
	for _, c := range st.Conditions {
		switch c.Type {
		case v1alpha1.ConditionReachable:
			p.Since = c.LastTransitionTime.Time
			switch {
			case c.Reason == v1alpha1.ReasonObserverUnhealthy:
				p.Verdict, p.BadObserverNode = observation.VerdictUnreachable, st.ObservedFromNode
			case slices.Contains(contract.Disruptions[:], c.Reason):
				// A disruption (markDisrupted): the pair's own verdict; the target is judged
				// again from the next rounds.
				p.Verdict = observation.VerdictUnreachable
			case c.Reason == v1alpha1.ReasonObserverSilent:
				// Nothing is known of the path; the object waits for its observer.
				p.Verdict, p.SilentObserver = "", true
			}
		case v1alpha1.ConditionDegraded:
			switch {
			case c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonMTUBlackHole:
				if _, err := fmt.Sscanf(c.Message, "%d-byte", &p.MTUPasses); err != nil || p.MTUPasses <= 0 {
					p.MTUPasses = 1 // a black hole of unknown size is still one
				}
				p.DegradedFamilies = DegradedMTU
			case c.Status == metav1.ConditionTrue && (c.Reason == v1alpha1.ReasonPacketLoss || c.Reason == v1alpha1.ReasonHighLatency):
				p.DegradedFamilies = GrayRecord(c.Reason, c.Message) // resumed as written, judged again
			case c.Status == metav1.ConditionTrue:
				p.DegradedFamilies = degradedFamiliesOf(c.Message)
			}
		}
	}
	for _, out := range st.Outages {
		so := observation.Outage{Start: out.Start.Time, Reason: out.Reason, Message: out.Message, Flaps: int(out.Flaps)}
		if out.End != nil {
			so.End = out.End.Time
		}
		p.Outages = append(p.Outages, so)
	}
	return p
}

// degradedFamiliesOf recovers the families a Degraded message names (setDegraded).
func degradedFamiliesOf(msg string) string {
	var fs []string
	for _, f := range []string{observation.FamilyIPv4, observation.FamilyIPv6} {
		if strings.Contains(msg, f) {
			fs = append(fs, f)
		}
	}
	return strings.Join(fs, ",")
}

// markObserverUnhealthy re-states an Unreachable pair whose observer's own node was found
// (by the quorum of other observers) to have a pod-network problem: the failures say
// nothing about the target, so reachability is Unknown with reason ObserverUnhealthy.
// The outage history is kept: the pair did see an outage, whoever caused it.
func markObserverUnhealthy(st *v1alpha1.PodNetworkHealthStatus, node string) {
	st.Reachability = v1alpha1.ReachabilityUnknown
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1alpha1.ConditionReachable {
			st.Conditions[i].Status = metav1.ConditionUnknown
			st.Conditions[i].Reason = v1alpha1.ReasonObserverUnhealthy
			st.Conditions[i].Message = v1alpha1.TruncateMessage("the observing node "+node+
				" cannot reach the pod network (other nodes fail to reach it too); these failures are attributed to the observer, not the target", v1alpha1.MaxMessageLength)
		}
	}
}

// disruptionMessages says why for each contract.Disruptions value (the API's reasons of
// the same words); a test checks every disruption has one.
var disruptionMessages = map[string]string{
	contract.DisruptionPodTerminating: "the target pod is terminating or deleted",
	contract.DisruptionNodeDraining:   "the target's node is cordoned (drained)",
	contract.DisruptionNodeNotReady:   "the target's node is NotReady",
	contract.DisruptionNotReady:       "the target pod has not started",
}

// markDisrupted re-states an Unreachable pair whose target the cluster reported going away
// or down before the failures began (a drain, a pod terminating, a node NotReady, a pod not
// started): the failures are expected and blame no network, so reachability is Unknown with
// the disruption as the reason. The outage history is kept.
func markDisrupted(st *v1alpha1.PodNetworkHealthStatus, disruption string) {
	st.Reachability = v1alpha1.ReachabilityUnknown
	why := disruptionMessages[disruption]
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1alpha1.ConditionReachable {
			st.Conditions[i].Status = metav1.ConditionUnknown
			st.Conditions[i].Reason = disruption
			st.Conditions[i].Message = v1alpha1.TruncateMessage(why+
				" (the cluster said so before the probes failed); the failures are expected and blamed on no network", v1alpha1.MaxMessageLength)
		}
	}
}

// markObserverSilent re-states a pair whose observing agent stopped reporting (its pod
// still exists): nothing says the path still works or still fails, so reachability is
// Unknown with reason ObserverSilent; the last figures and the outage history are kept.
// It is a transition of the condition, so its LastTransitionTime moves to now.
func markObserverSilent(st *v1alpha1.PodNetworkHealthStatus, observer string, now time.Time) {
	st.Reachability = v1alpha1.ReachabilityUnknown
	since := "its last report"
	if st.LastObservedTime != nil {
		since = st.LastObservedTime.UTC().Format(time.RFC3339)
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != v1alpha1.ConditionReachable {
			continue
		}
		if c.Status != metav1.ConditionUnknown {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status = metav1.ConditionUnknown
		c.Reason = v1alpha1.ReasonObserverSilent
		c.Message = v1alpha1.TruncateMessage("the observing agent "+observer+" has not reported since "+since+
			"; the figures are its last, and say nothing of the path now", v1alpha1.MaxMessageLength)
	}
}
