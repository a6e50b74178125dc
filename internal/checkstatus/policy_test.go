// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checkstatus

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDue(t *testing.T) {
	apply := func(st Status, f Flavour, es ...Entry) Status { st, _ = Apply(st, f, es...); return st }
	healthy := apply(Status{}, FlavourOpenShift, success(at(0)))
	down := apply(healthy, FlavourOpenShift, failure(at(1), ReasonTCPConnectError))
	ended := down.DeepCopy()
	ended.Outages[0].End = at(2) // by hand: the outage ended, the condition did not change

	for _, tc := range []struct {
		name      string
		written   Status
		lastWrite time.Time
		current   Status
		now       time.Time
		policy    Policy
		want      string // "" = not due
	}{
		{"created", Status{}, time.Time{}, healthy, at(0), Policy{}, WriteCreated},
		{"nothing to create", Status{}, time.Time{}, Status{}, at(0), Policy{}, ""},
		{"condition status", healthy, at(0), down, at(1), Policy{}, WriteCondition},
		{"condition reason (openshift)", down, at(1), apply(down, FlavourOpenShift, failure(at(2), ReasonDNSError)), at(2), Policy{}, WriteCondition},
		{"condition reason (netpulse)", apply(down, FlavourNetpulse, failure(at(2), ReasonHTTPError)), at(2),
			apply(down, FlavourNetpulse, failure(at(2), ReasonHTTPError), failure(at(3), ReasonTargetRefused)), at(3), Policy{}, WriteCondition},
		{"condition unknown", healthy, at(0), func() Status { s, _ := Silence(healthy, at(5), 3*time.Minute, time.Time{}); return s }(), at(5), Policy{}, WriteCondition},
		{"outage ended", down, at(1), ended, at(2), Policy{}, WriteOutage},
		{"another outage started", down, at(1), apply(down, FlavourOpenShift, success(at(2)), failure(at(3), ReasonTCPConnectError)), at(3), Policy{}, WriteOutage},
		{"failure mode", down, at(1), apply(down, FlavourOpenShift, failure(at(2), ReasonICMPError)), at(2), Policy{}, WriteFailureMode},
		{"repeated failure coalesced", down, at(1), apply(down, FlavourOpenShift, failure(at(2), ReasonTCPConnectError)), at(2), Policy{}, ""},
		{"routine success coalesced", healthy, at(0), apply(healthy, FlavourOpenShift, success(at(9))), at(9), Policy{}, ""},
		{"heartbeat just before", healthy, at(0), apply(healthy, FlavourOpenShift, success(at(10))), at(10).Add(-time.Nanosecond), Policy{}, ""},
		{"heartbeat (default 10m)", healthy, at(0), apply(healthy, FlavourOpenShift, success(at(10))), at(10), Policy{}, WriteHeartbeat},
		{"heartbeat during an outage", down, at(1), apply(down, FlavourOpenShift, failure(at(11), ReasonTCPConnectError)), at(11), Policy{}, WriteHeartbeat},
		{"heartbeat 5m", healthy, at(0), apply(healthy, FlavourOpenShift, success(at(5))), at(5), Policy{Heartbeat: 5 * time.Minute}, WriteHeartbeat},
		{"heartbeat 20m not yet", healthy, at(0), apply(healthy, FlavourOpenShift, success(at(10))), at(10), Policy{Heartbeat: 20 * time.Minute}, ""},
		{"unchanged never rewritten", healthy, at(0), healthy, at(600), Policy{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, why := tc.policy.Due(tc.written, tc.lastWrite, tc.current, tc.now)
			assert.Equal(t, tc.want != "", due)
			assert.Equal(t, tc.want, why)
		})
	}
}

// TestWriteBudget: one check, one hour at the default 60 s interval, under the default
// policy.
func TestWriteBudget(t *testing.T) {
	pol := Policy{}
	const d, interval = time.Hour, DefaultInterval

	h := simulate(d, interval, healthy, pol.Due)
	heartbeats := int((d - interval) / DefaultHeartbeat) // the last run is at 59m
	assert.Equal(t, map[string]int{WriteCreated: 1, WriteHeartbeat: heartbeats}, h.reasons,
		"healthy: one create, then heartbeats only")
	assert.Equal(t, 6, h.writes)
	for i := 1; i < len(h.writeTimes); i++ {
		assert.Equal(t, DefaultHeartbeat, h.writeTimes[i].Sub(h.writeTimes[i-1]))
	}
	assert.Empty(t, h.events)

	// One 5-minute outage: its start and end are written when they happen, and cost a
	// bounded handful of writes more.
	o := simulate(d, interval, outageAt(30, 35, ReasonTCPConnectError), pol.Due)
	assert.Equal(t, 2, o.reasons[WriteCondition], "%v", o.reasons)
	assert.Contains(t, o.writeTimes, at(30), "the start is written at once")
	assert.Contains(t, o.writeTimes, at(35), "the end is written at once")
	assert.LessOrEqual(t, o.writes, h.writes+3, "%v", o.reasons)
	assert.Greater(t, o.writes, h.writes)
	require.Len(t, o.events, 2)
	require.Len(t, o.final.Outages, 1)
	assert.Equal(t, "Connectivity restored after 5m0s", o.final.Outages[0].Message)

	// The same outage changing failure mode once (ICMPError is TCPConnectError to
	// OpenShift: the condition stays): one more write, at once.
	m := simulate(d, interval, func(off time.Duration, ts time.Time) Entry {
		if off >= 32*time.Minute && off < 35*time.Minute {
			return failure(ts, ReasonICMPError)
		}
		return outageAt(30, 35, ReasonTCPConnectError)(off, ts)
	}, pol.Due)
	assert.Equal(t, 1, m.reasons[WriteFailureMode], "%v", m.reasons)
	assert.Contains(t, m.writeTimes, at(32))
	assert.LessOrEqual(t, m.writes, o.writes+1)

	// The reference model writes after every run.
	ref := simulate(d, interval, healthy, writeEveryResult)
	assert.Equal(t, 60, ref.writes)
}

func TestSilence(t *testing.T) {
	seen, _ := Apply(Status{}, FlavourOpenShift, success(at(0)))
	const after = 3 * time.Minute
	for _, tc := range []struct {
		name  string
		st    Status
		now   time.Time
		after time.Duration
		since time.Time
		want  bool
		msg   string
	}{
		{"never seen, no since", Status{}, at(100), after, time.Time{}, false, ""},
		{"never seen, waiting briefly", Status{}, at(3), after, at(0), false, ""},
		{"never seen, waiting long", Status{}, at(3).Add(time.Second), after, at(0), true, "No check result received yet (waiting since 2026-01-01T00:00:00Z)"},
		{"recent result", seen, at(2), after, time.Time{}, false, ""},
		{"exactly silentAfter", seen, at(3), after, time.Time{}, false, ""},
		{"silent", seen, at(4), after, at(-100), true, "No check result since 2026-01-01T00:00:00Z (silent for more than 3m0s)"},
		{"default silentAfter: 3 intervals", seen, at(3).Add(time.Second), 0, time.Time{}, true, "No check result since 2026-01-01T00:00:00Z (silent for more than 3m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snapshot := tc.st.DeepCopy()
			got, changed := Silence(tc.st, tc.now, tc.after, tc.since)
			require.Equal(t, tc.want, changed)
			assert.True(t, tc.st.Equal(snapshot), "the input is not modified")
			if !tc.want {
				assert.True(t, got.Equal(tc.st))
				return
			}
			assert.Equal(t, Condition{Status: ConditionUnknown, Reason: ReasonNoResults, Message: tc.msg, LastTransitionTime: tc.now}, got.Reachable)
			assert.Equal(t, tc.st.Successes, got.Successes, "the logs are kept")
			// Silent later still: no further change.
			again, changed := Silence(got, tc.now.Add(time.Hour), tc.after, tc.since)
			assert.False(t, changed)
			assert.True(t, again.Equal(got))
		})
	}

	// A result after the silence: the condition follows it, with a transition.
	silent, _ := Silence(seen, at(10), after, time.Time{})
	// Still Unknown with another message (silentAfter reconfigured): no transition.
	resilent, changed := Silence(silent, at(20), 5*time.Minute, time.Time{})
	require.True(t, changed)
	assert.Equal(t, Condition{Status: ConditionUnknown, Reason: ReasonNoResults, LastTransitionTime: at(10),
		Message: "No check result since 2026-01-01T00:00:00Z (silent for more than 5m0s)"}, resilent.Reachable)
	back, _ := Apply(silent, FlavourOpenShift, success(at(11)))
	assert.Equal(t, Condition{Status: ConditionTrue, Reason: ReasonTCPConnectSuccess, Message: success(at(11)).Message, LastTransitionTime: at(11)}, back.Reachable)
	// An ongoing outage survives silence and continues with the next failure.
	down, _ := Apply(seen, FlavourOpenShift, failure(at(1), ReasonTCPConnectError))
	silent, _ = Silence(down, at(10), after, time.Time{})
	cont, evs := Apply(silent, FlavourOpenShift, failure(at(11), ReasonTCPConnectError))
	assert.Len(t, cont.Outages, 1)
	assert.Empty(t, evs)
}

func TestSilentAfter(t *testing.T) {
	assert.Equal(t, 3*time.Minute, SilentAfter(0))
	assert.Equal(t, 3*time.Minute, SilentAfter(DefaultInterval))
	assert.Equal(t, 30*time.Second, SilentAfter(time.Second), "the interval is at least MinInterval")
	assert.Equal(t, 15*time.Minute, SilentAfter(5*time.Minute))
}

func TestLatencySummary(t *testing.T) {
	_, _, _, _, ok := LatencySummary(nil)
	assert.False(t, ok)
	_, _, _, _, ok = LatencySummary([]Entry{failure(at(0), ReasonTCPConnectError)})
	assert.False(t, ok, "failures do not count")

	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name               string
		latencies          []int
		p50, p90, p99, max int
	}{
		{"one", []int{7}, 7, 7, 7, 7},
		{"two", []int{9, 1}, 1, 9, 9, 9},
		{"ten", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 5, 9, 10, 10},
		{"ten with outlier", []int{3, 3, 3, 3, 3, 3, 3, 3, 3, 300}, 3, 3, 300, 300},
		{"four", []int{40, 10, 30, 20}, 20, 40, 40, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var es []Entry
			for i, l := range tc.latencies {
				es = append(es, Entry{Time: at(i), Success: true, Latency: ms(l)})
			}
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
			es = append(es, Entry{Time: at(99), Latency: time.Hour}) // a failure: ignored
			keep := append([]Entry(nil), es...)
			p50, p90, p99, mx, ok := LatencySummary(es)
			require.True(t, ok)
			assert.Equal(t, []time.Duration{ms(tc.p50), ms(tc.p90), ms(tc.p99), ms(tc.max)}, []time.Duration{p50, p90, p99, mx})
			assert.Equal(t, keep, es, "the input is not reordered")
		})
	}
}

func TestStale(t *testing.T) {
	for _, tc := range []struct {
		name            string
		last, gone, now time.Time
		after           time.Duration
		want            bool
	}{
		{"source exists", at(0), time.Time{}, at(100000), 0, false},
		{"gone briefly", at(0), at(0), at(0).Add(47 * time.Hour), 0, false},
		{"gone 48h", at(0), at(0), at(0).Add(48 * time.Hour), 0, true},
		{"never a result, gone 48h", time.Time{}, at(0), at(0).Add(48 * time.Hour), 0, true},
		{"a result after the source went", at(0).Add(24 * time.Hour), at(0), at(0).Add(48 * time.Hour), 0, false},
		{"custom after", at(0), at(0), at(61), time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Stale(tc.last, tc.gone, tc.now, tc.after))
		})
	}
}

func TestValidReason(t *testing.T) {
	for _, ok := range []string{"", "TCPConnect", "a", "Some_reason,with:colons_1", ReasonTCPConnectError} {
		if !ValidReason(ok) {
			t.Errorf("ValidReason(%q) = false", ok)
		}
	}
	for _, bad := range []string{"1abc", "has space", "Trailing:", "Trailing,", "ünïcode", "bad\nline", "x-y", string(make([]byte, 65))} {
		if ValidReason(bad) {
			t.Errorf("ValidReason(%q) = true", bad)
		}
	}
	long := "A"
	for len(long) < MaxReasonLength+1 {
		long += "b"
	}
	if ValidReason(long) || !ValidReason(long[:MaxReasonLength]) {
		t.Error("length bound")
	}
}
