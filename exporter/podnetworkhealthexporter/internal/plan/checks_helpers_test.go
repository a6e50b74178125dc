// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"time"

	"github.com/netpulse/netpulse/internal/checkstatus"
)

var checkEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// checkMinute is checkEpoch plus m minutes.
func checkMinute(m int) time.Time { return checkEpoch.Add(time.Duration(m) * time.Minute) }

func checkSuccess(ts time.Time) checkstatus.Entry {
	return checkstatus.Entry{Time: ts, Success: true, Reason: checkstatus.ReasonTCPConnect, Message: "tcp connection to 10.0.2.10:443 succeeded", Latency: 2 * time.Millisecond}
}

func checkFailure(ts time.Time, reason string) checkstatus.Entry {
	return checkstatus.Entry{Time: ts, Reason: reason, Message: fmt.Sprintf("%s: dial tcp 10.0.2.10:443: i/o timeout", reason), Latency: 10 * time.Second}
}

// checkDecider is the signature of CheckPolicy.Due, for simulations against other write models.
type checkDecider func(written checkstatus.Status, lastWrite time.Time, current checkstatus.Status, now time.Time) (bool, string)

// writeEveryCheckResult is OpenShift's checker's model: it writes the status after every run.
func writeEveryCheckResult(written checkstatus.Status, lastWrite time.Time, current checkstatus.Status, _ time.Time) (bool, string) {
	if lastWrite.IsZero() || !current.LastResultTime.Equal(written.LastResultTime) {
		return true, "result"
	}
	return false, ""
}

type checkSimRun struct {
	runs       int
	writes     int
	reasons    map[string]int
	writeTimes []time.Time
	events     []checkstatus.Event
	final      checkstatus.Status
}

// simulateCheck runs one check every interval for d from checkEpoch, its result at offset off given
// by result, feeding checkstatus.Apply and writing whenever due says so.
func simulateCheck(d, interval time.Duration, result func(off time.Duration, ts time.Time) checkstatus.Entry, due checkDecider) checkSimRun {
	r := checkSimRun{reasons: map[string]int{}}
	var st, written checkstatus.Status
	var lastWrite time.Time
	for off := time.Duration(0); off < d; off += interval {
		now := checkEpoch.Add(off)
		var evs []checkstatus.Event
		st, evs = checkstatus.Apply(st, checkstatus.FlavourOpenShift, result(off, now))
		r.runs++
		r.events = append(r.events, evs...)
		if ok, why := due(written, lastWrite, st, now); ok {
			r.writes++
			r.reasons[why]++
			r.writeTimes = append(r.writeTimes, now)
			written, lastWrite = st, now // checkstatus.Apply never modifies st: keeping it is safe
		}
	}
	r.final = st
	return r
}

func checkHealthy(_ time.Duration, ts time.Time) checkstatus.Entry { return checkSuccess(ts) }

// checkOutageAt fails from minute from (inclusive) to minute to (exclusive) of every hour.
func checkOutageAt(from, to int, reason string) func(time.Duration, time.Time) checkstatus.Entry {
	return func(off time.Duration, ts time.Time) checkstatus.Entry {
		m := int((off % time.Hour) / time.Minute)
		if m >= from && m < to {
			return checkFailure(ts, reason)
		}
		return checkSuccess(ts)
	}
}
