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
