// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checkstatus

import (
	"slices"
	"time"
)

// Flavour selects the reasons of the Reachable condition.
type Flavour int

const (
	// FlavourOpenShift uses OpenShift's condition reasons only: TCPConnectSuccess when
	// True; DNSError or TCPConnectError (every other failure) when False.
	FlavourOpenShift Flavour = iota
	// FlavourNetpulse uses ProbeSucceeded when True and the failure's own reason (e.g.
	// HTTPError, TargetRefused) when False.
	FlavourNetpulse
)

// String returns "openshift" or "netpulse".
func (f Flavour) String() string {
	switch f {
	case FlavourOpenShift:
		return "openshift"
	case FlavourNetpulse:
		return "netpulse"
	}
	return "unknown"
}

// ConditionReason is the reason of the Reachable condition after the result e, in the
// given flavour (see Flavour). An unknown flavour is treated as FlavourOpenShift.
func ConditionReason(f Flavour, e Entry) string {
	if f == FlavourNetpulse {
		switch {
		case e.Success:
			return ReasonProbeSucceeded
		case e.Reason == "":
			return ReasonProbeFailed
		}
		return truncateReason(e.Reason)
	}
	switch {
	case e.Success:
		return ReasonTCPConnectSuccess
	case e.Reason == ReasonDNSError:
		return ReasonDNSError
	}
	return ReasonTCPConnectError
}

// Apply folds results into a copy of st and returns it with the events to emit, in time
// order. The results may come in any order: they are applied by time, and every result not
// newer than st.LastResultTime (a duplicate, a replay, one older than the status; also one
// with a zero time) is ignored. Reasons are cut to MaxReasonLength and messages to
// MaxMessageLength characters. The returned status shares no memory with st or results;
// neither is modified.
func Apply(st Status, flavour Flavour, results ...Entry) (Status, []Event) {
	out := st.DeepCopy()
	if !slices.IsSortedFunc(results, byTime) {
		results = slices.Clone(results)
		slices.SortStableFunc(results, byTime)
	}
	var events []Event
	for _, e := range results {
		if !e.Time.After(out.LastResultTime) {
			continue
		}
		e.Reason = truncateReason(e.Reason)
		e.Message = Truncate(e.Message, MaxMessageLength)
		if ev, ok := out.apply(e, flavour); ok {
			events = append(events, ev)
		}
	}
	return out, events
}

func byTime(a, b Entry) int { return a.Time.Compare(b.Time) }

// apply applies one result newer than every result applied so far; s owns its slices.
func (s *Status) apply(e Entry, f Flavour) (ev Event, emit bool) {
	s.LastResultTime = e.Time

	status := ConditionFalse
	if e.Success {
		status = ConditionTrue
	}
	c := Condition{Status: status, Reason: ConditionReason(f, e), Message: e.Message, LastTransitionTime: s.Reachable.LastTransitionTime}
	if s.Reachable.Status != status {
		c.LastTransitionTime = e.Time
	}
	s.Reachable = c

	ongoing := len(s.Outages) > 0 && s.Outages[0].Ongoing()
	if e.Success {
		if ongoing {
			s.endOutage(e)
			ev, emit = Event{Type: EventNormal, Reason: EventRestored, Message: Truncate("Connectivity restored: "+e.Message, MaxMessageLength), Time: e.Time}, true
		}
		s.Successes = prepend(s.Successes, e, MaxLogEntries)
		return ev, emit
	}

	switch {
	case !ongoing:
		s.Outages = prepend(s.Outages, Outage{
			Start:     e.Time,
			StartLogs: []Entry{e},
			Message:   "Connectivity outage detected at " + e.Time.Format(time.RFC3339Nano),
		}, MaxOutages)
		ev, emit = Event{Type: EventWarning, Reason: EventOutageDetected, Message: Truncate("Connectivity outage detected: "+e.Message, MaxMessageLength), Time: e.Time}, true
	case len(s.Outages[0].StartLogs) < MaxOutageLogs &&
		(len(s.Outages[0].StartLogs) == 0 || s.Outages[0].StartLogs[0].Reason != e.Reason):
		// The failure mode changed.
		s.Outages[0].StartLogs = prepend(s.Outages[0].StartLogs, e, MaxOutageLogs)
	}
	s.Failures = prepend(s.Failures, e, MaxLogEntries)
	return ev, emit
}

// endOutage ends the ongoing newest outage with the success e. The EndLogs are e and then
// the outage's most recent failures (none before its start), newest first.
func (s *Status) endOutage(e Entry) {
	o := &s.Outages[0]
	o.End = e.Time
	logs := make([]Entry, 1, MaxOutageLogs)
	logs[0] = e
	for _, f := range s.Failures {
		if len(logs) == MaxOutageLogs || f.Time.Before(o.Start) {
			break
		}
		logs = append(logs, f)
	}
	o.EndLogs = logs
	o.Message = "Connectivity restored after " + o.End.Sub(o.Start).Round(time.Second).String()
}

// prepend inserts v at the front of s, which it owns, keeping at most limit elements (the
// last ones dropped).
func prepend[T any](s []T, v T, limit int) []T {
	if len(s) < limit {
		var zero T
		s = append(s, zero)
	} else {
		s = s[:limit]
	}
	copy(s[1:], s[:len(s)-1])
	s[0] = v
	return s
}
