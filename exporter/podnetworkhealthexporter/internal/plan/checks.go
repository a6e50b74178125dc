// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"time"

	"github.com/netpulse/netpulse/internal/checkstatus"
)

// The declared checks' write policy: when a check's status is worth a write to the API,
// and when a check may be pruned. Pure: no I/O, no clock (callers pass `now`).
//
// Why: OpenShift's checker writes every check's status once per run, i.e. once a minute
// per check: 60 writes an hour per check, each a new object revision that the API server
// stores in etcd and sends to every watcher, although a healthy check's status changes
// only in its routine log entries. CheckPolicy.Due writes what a reader acts on at once -
// the first status, a change of the condition's status or reason, an outage starting or
// ending, a new failure mode in an ongoing outage - and coalesces the rest (routine
// successes, repeated identical failures) into a heartbeat write at most every
// CheckPolicy.Heartbeat (DefaultCheckHeartbeat, 10 minutes). A healthy check is thus
// written 6 times an hour instead of 60; an outage costs two immediate writes (start and
// end) plus one per change of failure mode. What the status in the API may lag behind by,
// at most one heartbeat, is the routine content of the Successes and Failures logs; the
// writer's in-memory status is always complete and is what the next write carries. The
// figures are measured, against OpenShift's write-per-run model on the same inputs, by
// TestBenchDeclaredCheckWrites (hack/bench.d/50-checks.sh).

// Defaults of the checks' write policy and pruning.
const (
	// DefaultCheckHeartbeat is CheckPolicy.Heartbeat when unset.
	DefaultCheckHeartbeat = 10 * time.Minute
	// DefaultCheckStaleAfter is CheckStale's after when unset.
	DefaultCheckStaleAfter = 48 * time.Hour
)

// Reasons CheckPolicy gives for a write.
const (
	CheckWriteCreated     = "created"      // the first write of the status
	CheckWriteCondition   = "condition"    // the condition's status or reason changed
	CheckWriteOutage      = "outage"       // an outage started or ended
	CheckWriteFailureMode = "failure-mode" // an ongoing outage's StartLogs grew
	CheckWriteHeartbeat   = "heartbeat"    // Heartbeat passed and something else changed
	CheckWritePlacement   = "placement"    // a NetworkCheck's placement changed
)

// CheckPolicy is the write policy of the single writer of a check's status: write
// significant changes at once and coalesce the rest into a heartbeat.
type CheckPolicy struct {
	// Heartbeat is the least time between two writes of routine changes (new log entries,
	// a changed condition message); DefaultCheckHeartbeat when zero or negative.
	Heartbeat time.Duration
}

func (p CheckPolicy) heartbeat() time.Duration {
	if p.Heartbeat <= 0 {
		return DefaultCheckHeartbeat
	}
	return p.Heartbeat
}

// Due says whether current must be written now, given the status written last (written)
// and when (lastWrite, zero if never), and why (a CheckWrite* reason). It is due
//
//   - at once when nothing was written yet (CheckWriteCreated; unless current is empty),
//     the condition's status or reason changed (CheckWriteCondition), the newest outage is
//     another one or has ended (CheckWriteOutage), or the ongoing outage's StartLogs
//     changed (CheckWriteFailureMode), in this order of precedence;
//   - otherwise when Heartbeat has passed since lastWrite and current differs from
//     written (CheckWriteHeartbeat): routine successes, repeated identical failures and
//     changed messages wait for it. An unchanged status is never written again.
func (p CheckPolicy) Due(written checkstatus.Status, lastWrite time.Time, current checkstatus.Status, now time.Time) (bool, string) {
	if lastWrite.IsZero() {
		if current.Equal(checkstatus.Status{}) {
			return false, ""
		}
		return true, CheckWriteCreated
	}
	if written.Reachable.Status != current.Reachable.Status || written.Reachable.Reason != current.Reachable.Reason {
		return true, CheckWriteCondition
	}
	if r := outageChange(written.Outages, current.Outages); r != "" {
		return true, r
	}
	if now.Sub(lastWrite) >= p.heartbeat() && !written.Equal(current) {
		return true, CheckWriteHeartbeat
	}
	return false, ""
}

// CheckWrite is one check's state as the write decision sees it.
type CheckWrite struct {
	Written   checkstatus.Status // the status written last
	LastWrite time.Time          // when (zero: never)
	Current   checkstatus.Status // the status now
	// PlacementChanged: a NetworkCheck's placement (vantage point, target, Accepted)
	// differs from the one written. SourceChanged: its source address does.
	PlacementChanged, SourceChanged bool
	// RejectedAsIs: the API refused (4xx) a write of exactly this state.
	RejectedAsIs bool
}

// DueWrite is Due for a whole check: a NetworkCheck also records its placement, written at
// once when it changes (CheckWritePlacement), and the address its probes leave from,
// written with the heartbeat; a state the API refused as it is is not written again until
// it changes.
func (p CheckPolicy) DueWrite(w CheckWrite, now time.Time) (bool, string) {
	due, why := p.Due(w.Written, w.LastWrite, w.Current, now)
	if w.PlacementChanged {
		due, why = true, CheckWritePlacement
	} else if !due && w.SourceChanged && now.Sub(w.LastWrite) >= p.heartbeat() {
		due, why = true, CheckWriteHeartbeat
	}
	if due && w.RejectedAsIs {
		return false, ""
	}
	return due, why
}

// CheckWriteSignificant says whether a write for this reason is one a reader acts on (it
// goes ahead of the checks' routine writes): a first status, a condition change, an
// outage starting or ending, a new placement.
func CheckWriteSignificant(why string) bool {
	switch why {
	case CheckWriteCondition, CheckWriteOutage, CheckWritePlacement, CheckWriteCreated:
		return true
	}
	return false
}

// outageChange compares the newest outages of two histories.
func outageChange(w, c []checkstatus.Outage) string {
	switch {
	case len(c) == 0 && len(w) == 0:
		return ""
	case len(c) == 0 || len(w) == 0 || !c[0].Start.Equal(w[0].Start) || !c[0].End.Equal(w[0].End):
		return CheckWriteOutage
	case len(c[0].StartLogs) != len(w[0].StartLogs):
		return CheckWriteFailureMode
	}
	return ""
}

// CheckStale reports whether a check may be pruned (OpenShift removes checks whose source
// is gone): its source pod has been gone since sourceGoneSince (zero: the source exists,
// never stale) and neither that nor the check's last result (lastResult, zero if none) is
// less than `after` (DefaultCheckStaleAfter when zero or negative) before now. A result
// after the source went away restarts the wait.
func CheckStale(lastResult, sourceGoneSince, now time.Time, after time.Duration) bool {
	if sourceGoneSince.IsZero() {
		return false
	}
	if after <= 0 {
		after = DefaultCheckStaleAfter
	}
	ref := sourceGoneSince
	if lastResult.After(ref) {
		ref = lastResult
	}
	return now.Sub(ref) >= after
}
