// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checkstatus

import (
	"slices"
	"time"
)

// SilentIntervals is how many check intervals without a result SilentAfter allows.
const SilentIntervals = 3

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
