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
