// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
)

// Conversions between the API's check statuses and checkstatus.Status, both ways (pure): a
// new leader resumes each check from what the API holds, so a takeover leaves no trace.

func entriesOfNC(in []v1alpha1.CheckLogEntry) []checkstatus.Entry {
	out := make([]checkstatus.Entry, 0, len(in))
	for _, e := range in {
		d, _ := e.Latency.Duration()
		out = append(out, checkstatus.Entry{Time: e.Time.Time, Success: e.Success, Reason: e.Reason, Message: e.Message, Latency: d})
	}
	return out
}

func ncEntries(in []checkstatus.Entry) []v1alpha1.CheckLogEntry {
	if len(in) == 0 {
		return nil
	}
	out := make([]v1alpha1.CheckLogEntry, 0, len(in))
	for _, e := range in {
		le := v1alpha1.CheckLogEntry{Time: metav1.NewTime(e.Time), Success: e.Success, Reason: e.Reason, Message: e.Message}
		if e.Latency > 0 {
			le.Latency = v1alpha1.DurationOf(e.Latency)
		}
		out = append(out, le)
	}
	return out
}

func entriesOfPNCC(in []ocv1alpha1.LogEntry) []checkstatus.Entry {
	out := make([]checkstatus.Entry, 0, len(in))
	for _, e := range in {
		out = append(out, checkstatus.Entry{Time: e.Start.Time, Success: e.Success, Reason: e.Reason, Message: e.Message, Latency: e.Latency.Duration})
	}
	return out
}

func pnccEntries(in []checkstatus.Entry) []ocv1alpha1.LogEntry {
	if len(in) == 0 {
		return nil
	}
	out := make([]ocv1alpha1.LogEntry, 0, len(in))
	for _, e := range in {
		out = append(out, ocv1alpha1.LogEntry{Start: metav1.NewTime(e.Time), Success: e.Success, Reason: e.Reason, Message: e.Message,
			Latency: metav1.Duration{Duration: e.Latency}})
	}
	return out
}

func newest(t time.Time, es []checkstatus.Entry) time.Time {
	for _, e := range es {
		if e.Time.After(t) {
			t = e.Time
		}
	}
	return t
}

// statusOfNC is the checkstatus view of a NetworkCheck's status.
func statusOfNC(s *v1alpha1.NetworkCheckStatus) checkstatus.Status {
	st := checkstatus.Status{Successes: entriesOfNC(s.Successes), Failures: entriesOfNC(s.Failures)}
	for _, o := range s.Outages {
		out := checkstatus.Outage{Start: o.Start.Time, StartLogs: entriesOfNC(o.StartLogs), EndLogs: entriesOfNC(o.EndLogs), Message: o.Message}
		if o.End != nil {
			out.End = o.End.Time
		}
		st.Outages = append(st.Outages, out)
	}
	for _, c := range s.Conditions {
		if c.Type == v1alpha1.ConditionReachable {
			st.Reachable = checkstatus.Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime.Time}
		}
	}
	st.LastResultTime = newest(newest(time.Time{}, st.Successes), st.Failures)
	if s.LastProbeTime != nil && s.LastProbeTime.After(st.LastResultTime) {
		st.LastResultTime = s.LastProbeTime.Time
	}
	return st
}

// statusOfPNCC is the checkstatus view of a PodNetworkConnectivityCheck's status.
func statusOfPNCC(s *ocv1alpha1.PodNetworkConnectivityCheckStatus) checkstatus.Status {
	st := checkstatus.Status{Successes: entriesOfPNCC(s.Successes), Failures: entriesOfPNCC(s.Failures)}
	for _, o := range s.Outages {
		st.Outages = append(st.Outages, checkstatus.Outage{Start: o.Start.Time, End: o.End.Time,
			StartLogs: entriesOfPNCC(o.StartLogs), EndLogs: entriesOfPNCC(o.EndLogs), Message: o.Message})
	}
	for _, c := range s.Conditions {
		if c.Type == ocv1alpha1.Reachable {
			st.Reachable = checkstatus.Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime.Time}
		}
	}
	st.LastResultTime = newest(newest(time.Time{}, st.Successes), st.Failures)
	return st
}

// pnccStatus is the PodNetworkConnectivityCheck status of st, as OpenShift writes it.
func pnccStatus(st checkstatus.Status) ocv1alpha1.PodNetworkConnectivityCheckStatus {
	out := ocv1alpha1.PodNetworkConnectivityCheckStatus{Successes: pnccEntries(st.Successes), Failures: pnccEntries(st.Failures)}
	for _, o := range st.Outages {
		out.Outages = append(out.Outages, ocv1alpha1.OutageEntry{Start: metav1.NewTime(o.Start), End: metav1.NewTime(o.End),
			StartLogs: pnccEntries(o.StartLogs), EndLogs: pnccEntries(o.EndLogs), Message: o.Message})
	}
	if st.Reachable.Status != "" {
		out.Conditions = []ocv1alpha1.PodNetworkConnectivityCheckCondition{{
			Type: ocv1alpha1.Reachable, Status: metav1.ConditionStatus(st.Reachable.Status), Reason: st.Reachable.Reason,
			Message: st.Reachable.Message, LastTransitionTime: metav1.NewTime(st.Reachable.LastTransitionTime),
		}}
	}
	return out
}

// ncStatus is the NetworkCheck status of a check: its placement and st.
func ncStatus(cs *checkState) v1alpha1.NetworkCheckStatus {
	st, p := cs.st, cs.place
	out := v1alpha1.NetworkCheckStatus{ObservedGeneration: cs.generation,
		Successes: ncEntries(st.Successes), Failures: ncEntries(st.Failures)}
	if p.sourcePod != "" {
		out.Vantage = &v1alpha1.CheckVantage{Mode: p.mode, SourcePod: p.sourcePod, Node: p.node,
			ObserverPod: cs.observerPod, SourceAddress: cs.sourceAddress}
	}
	if p.endpoint != "" {
		out.Target = &v1alpha1.CheckResolvedTarget{Endpoint: p.endpoint, Kind: p.targetKind}
	}
	for _, o := range st.Outages {
		out.Outages = append(out.Outages, v1alpha1.CheckOutage{Start: metav1.NewTime(o.Start),
			StartLogs: ncEntries(o.StartLogs), EndLogs: ncEntries(o.EndLogs), Message: v1alpha1.TruncateMessage(o.Message, v1alpha1.MaxMessageLength)})
		if !o.End.IsZero() {
			end := metav1.NewTime(o.End)
			out.Outages[len(out.Outages)-1].End = &end
		}
	}
	if !st.LastResultTime.IsZero() {
		t := metav1.NewTime(st.LastResultTime)
		out.LastProbeTime = &t
	}
	if p50, p90, p99, mx, ok := checkstatus.LatencySummary(st.Successes); ok {
		out.Latency = v1alpha1.NewLatencySummary(p50, p90, p99, mx)
	}
	accepted := metav1.Condition{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCheckAccepted,
		Message: p.message, ObservedGeneration: cs.generation, LastTransitionTime: metav1.NewTime(cs.placeSince)}
	if !p.accepted {
		accepted.Status = metav1.ConditionFalse
		accepted.Reason = p.reason
	}
	out.Conditions = []metav1.Condition{accepted}
	switch {
	case !p.accepted:
		out.Reachability = v1alpha1.ReachabilityUnknown
	case st.Reachable.Status != "":
		out.Conditions = append(out.Conditions, metav1.Condition{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionStatus(st.Reachable.Status),
			Reason: st.Reachable.Reason, Message: st.Reachable.Message, ObservedGeneration: cs.generation,
			LastTransitionTime: metav1.NewTime(st.Reachable.LastTransitionTime)})
		switch st.Reachable.Status {
		case checkstatus.ConditionTrue:
			out.Reachability = v1alpha1.Reachable
		case checkstatus.ConditionFalse:
			out.Reachability = v1alpha1.Unreachable
		default:
			out.Reachability = v1alpha1.ReachabilityUnknown
		}
	default:
		out.Reachability = v1alpha1.ReachabilityUnknown
	}
	return out
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// recordedOfNC reads back the placement a previous writer recorded in a NetworkCheck's
// status.
func recordedOfNC(s *v1alpha1.NetworkCheckStatus) *recorded {
	r := &recorded{}
	p := &r.place
	if a := findCondition(s.Conditions, v1alpha1.ConditionAccepted); a != nil {
		p.accepted, p.reason, p.message = a.Status == metav1.ConditionTrue, a.Reason, a.Message
		if p.accepted {
			p.reason = ""
		}
		r.since, r.sinceKnown = a.LastTransitionTime.Time, true
	}
	if s.Vantage != nil {
		p.mode, p.sourcePod, p.node = s.Vantage.Mode, s.Vantage.SourcePod, s.Vantage.Node
		r.observerPod, r.sourceAddress = s.Vantage.ObserverPod, s.Vantage.SourceAddress
	}
	if s.Target != nil {
		p.endpoint, p.targetKind = s.Target.Endpoint, s.Target.Kind
	}
	return r
}
