// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checkstatus

import (
	"fmt"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is epoch plus m minutes.
func at(m int) time.Time { return epoch.Add(time.Duration(m) * time.Minute) }

func success(ts time.Time) Entry {
	return Entry{Time: ts, Success: true, Reason: ReasonTCPConnect, Message: "tcp connection to 10.0.2.10:443 succeeded", Latency: 2 * time.Millisecond}
}

func failure(ts time.Time, reason string) Entry {
	return Entry{Time: ts, Reason: reason, Message: fmt.Sprintf("%s: dial tcp 10.0.2.10:443: i/o timeout", reason), Latency: 10 * time.Second}
}

// applyAll applies the results one call each and returns the final status and all events.
func applyAll(f Flavour, results ...Entry) (Status, []Event) {
	var st Status
	var all []Event
	for _, r := range results {
		var evs []Event
		st, evs = Apply(st, f, r)
		all = append(all, evs...)
	}
	return st, all
}

func times(es []Entry) []time.Time {
	out := make([]time.Time, len(es))
	for i, e := range es {
		out[i] = e.Time
	}
	return out
}

// decider is the signature of Policy.Due, for simulations against other write models.
type decider func(written Status, lastWrite time.Time, current Status, now time.Time) (bool, string)

// writeEveryResult is OpenShift's checker's model: it writes the status after every run.
func writeEveryResult(written Status, lastWrite time.Time, current Status, _ time.Time) (bool, string) {
	if lastWrite.IsZero() || !current.LastResultTime.Equal(written.LastResultTime) {
		return true, "result"
	}
	return false, ""
}

type simRun struct {
	runs       int
	writes     int
	reasons    map[string]int
	writeTimes []time.Time
	events     []Event
	final      Status
}

// simulate runs one check every interval for d from epoch, its result at offset off given
// by result, feeding Apply and writing whenever due says so.
func simulate(d, interval time.Duration, result func(off time.Duration, ts time.Time) Entry, due decider) simRun {
	r := simRun{reasons: map[string]int{}}
	var st, written Status
	var lastWrite time.Time
	for off := time.Duration(0); off < d; off += interval {
		now := epoch.Add(off)
		var evs []Event
		st, evs = Apply(st, FlavourOpenShift, result(off, now))
		r.runs++
		r.events = append(r.events, evs...)
		if ok, why := due(written, lastWrite, st, now); ok {
			r.writes++
			r.reasons[why]++
			r.writeTimes = append(r.writeTimes, now)
			written, lastWrite = st, now // Apply never modifies st: keeping it is safe
		}
	}
	r.final = st
	return r
}

func healthy(_ time.Duration, ts time.Time) Entry { return success(ts) }

// outageAt fails from minute from (inclusive) to minute to (exclusive) of every hour.
func outageAt(from, to int, reason string) func(time.Duration, time.Time) Entry {
	return func(off time.Duration, ts time.Time) Entry {
		m := int((off % time.Hour) / time.Minute)
		if m >= from && m < to {
			return failure(ts, reason)
		}
		return success(ts)
	}
}
