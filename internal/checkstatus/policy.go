// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checkstatus

import (
	"slices"
	"time"
)

// Defaults of the write policy, silence and pruning.
const (
	// DefaultHeartbeat is Policy.Heartbeat when unset.
	DefaultHeartbeat = 10 * time.Minute
	// DefaultStaleAfter is Stale's after when unset.
	DefaultStaleAfter = 48 * time.Hour
	// SilentIntervals is how many check intervals without a result SilentAfter allows.
	SilentIntervals = 3
)

// Reasons Policy.Due gives for a write.
const (
	WriteCreated     = "created"      // the first write of the status
	WriteCondition   = "condition"    // the condition's status or reason changed
	WriteOutage      = "outage"       // an outage started or ended
	WriteFailureMode = "failure-mode" // an ongoing outage's StartLogs grew
	WriteHeartbeat   = "heartbeat"    // Heartbeat passed and something else changed
)

// Policy is the write policy of the single writer of a check's status: write significant
// changes at once and coalesce the rest into a heartbeat.
type Policy struct {
	// Heartbeat is the least time between two writes of routine changes (new log entries,
	// a changed condition message); DefaultHeartbeat when zero or negative.
	Heartbeat time.Duration
}

// Due says whether current must be written now, given the status written last (written)
// and when (lastWrite, zero if never), and why (a Write* reason). It is due
//
//   - at once when nothing was written yet (WriteCreated; unless current is empty), the
//     condition's status or reason changed (WriteCondition), the newest outage is another
//     one or has ended (WriteOutage), or the ongoing outage's StartLogs changed
//     (WriteFailureMode), in this order of precedence;
//   - otherwise when Heartbeat has passed since lastWrite and current differs from
//     written (WriteHeartbeat): routine successes, repeated identical failures and changed
//     messages wait for it. An unchanged status is never written again.
func (p Policy) Due(written Status, lastWrite time.Time, current Status, now time.Time) (bool, string) {
	if lastWrite.IsZero() {
		if current.Equal(Status{}) {
			return false, ""
		}
		return true, WriteCreated
	}
	if written.Reachable.Status != current.Reachable.Status || written.Reachable.Reason != current.Reachable.Reason {
		return true, WriteCondition
	}
	if r := outageChange(written.Outages, current.Outages); r != "" {
		return true, r
	}
	hb := p.Heartbeat
	if hb <= 0 {
		hb = DefaultHeartbeat
	}
	if now.Sub(lastWrite) >= hb && !written.Equal(current) {
		return true, WriteHeartbeat
	}
	return false, ""
}

// outageChange compares the newest outages of two histories.
func outageChange(w, c []Outage) string {
	switch {
	case len(c) == 0 && len(w) == 0:
		return ""
	case len(c) == 0 || len(w) == 0 || !c[0].Start.Equal(w[0].Start) || !c[0].End.Equal(w[0].End):
		return WriteOutage
	case len(c[0].StartLogs) != len(w[0].StartLogs):
		return WriteFailureMode
	}
	return ""
}

// SilentAfter is how long a check declared with the given interval may go without a
// result before Silence turns its condition Unknown: SilentIntervals intervals (the
// interval raised to MinInterval; DefaultInterval when zero).
func SilentAfter(interval time.Duration) time.Duration {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return SilentIntervals * max(interval, MinInterval)
}

// Silence turns the Reachable condition Unknown with ReasonNoResults when more than
// silentAfter (SilentAfter(DefaultInterval) when zero or negative) has passed without a
// result: since the last result if one was ever applied, otherwise since `since` (when the
// check started waiting for its first result; zero: never silent before a first result).
// The logs and the outage history are kept. It returns the new status (a copy sharing
// nothing with st) and true, or st itself and false when nothing changed - a check that
// stays silent is changed once.
func Silence(st Status, now time.Time, silentAfter time.Duration, since time.Time) (Status, bool) {
	if silentAfter <= 0 {
		silentAfter = SilentAfter(DefaultInterval)
	}
	var msg string
	switch {
	case !st.LastResultTime.IsZero():
		if now.Sub(st.LastResultTime) <= silentAfter {
			return st, false
		}
		msg = "No check result since " + st.LastResultTime.Format(time.RFC3339) + " (silent for more than " + silentAfter.String() + ")"
	case !since.IsZero():
		if now.Sub(since) <= silentAfter {
			return st, false
		}
		msg = "No check result received yet (waiting since " + since.Format(time.RFC3339) + ")"
	default:
		return st, false
	}
	msg = Truncate(msg, MaxMessageLength)
	if st.Reachable.Status == ConditionUnknown && st.Reachable.Reason == ReasonNoResults && st.Reachable.Message == msg {
		return st, false
	}
	out := st.DeepCopy()
	c := Condition{Status: ConditionUnknown, Reason: ReasonNoResults, Message: msg, LastTransitionTime: st.Reachable.LastTransitionTime}
	if st.Reachable.Status != ConditionUnknown {
		c.LastTransitionTime = now
	}
	out.Reachable = c
	return out, true
}

// LatencySummary summarises the latencies of the successes among entries (normally a
// Status's Successes): the nearest-rank 50th, 90th and 99th percentiles and the maximum.
// ok is false when there is no success.
func LatencySummary(successes []Entry) (p50, p90, p99, maxLatency time.Duration, ok bool) {
	var buf [MaxLogEntries]time.Duration
	ls := buf[:0]
	for _, e := range successes {
		if e.Success {
			ls = append(ls, e.Latency)
		}
	}
	if len(ls) == 0 {
		return 0, 0, 0, 0, false
	}
	slices.Sort(ls)
	rank := func(p int) time.Duration {
		// The smallest value with at least p% of the values at or below it.
		r := (p*len(ls) + 99) / 100
		return ls[max(r, 1)-1]
	}
	return rank(50), rank(90), rank(99), ls[len(ls)-1], true
}

// Stale reports whether a check may be pruned: its source pod has been gone since
// sourceGoneSince (zero: the source exists, never stale) and neither that nor the check's
// last result (lastResult, zero if none) is less than `after` (DefaultStaleAfter when zero
// or negative) before now. A result after the source went away restarts the wait.
func Stale(lastResult, sourceGoneSince, now time.Time, after time.Duration) bool {
	if sourceGoneSince.IsZero() {
		return false
	}
	if after <= 0 {
		after = DefaultStaleAfter
	}
	ref := sourceGoneSince
	if lastResult.After(ref) {
		ref = lastResult
	}
	return now.Sub(ref) >= after
}
