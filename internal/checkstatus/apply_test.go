// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checkstatus

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitValues(t *testing.T) {
	// OpenShift's limits, and those of a Kubernetes condition.
	assert.Equal(t, []int{10, 20, 5, 256, 64}, []int{MaxLogEntries, MaxOutages, MaxOutageLogs, MaxMessageLength, MaxReasonLength})
	assert.Equal(t, []time.Duration{time.Minute, 10 * time.Second}, []time.Duration{DefaultInterval, MinInterval})
}

func TestLogLimitsAndOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(time.Time) Entry
		logs func(Status) []Entry
	}{
		{"successes", success, func(s Status) []Entry { return s.Successes }},
		{"failures", func(ts time.Time) Entry { return failure(ts, ReasonTCPConnectError) }, func(s Status) []Entry { return s.Failures }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in []Entry
			for m := range MaxLogEntries {
				in = append(in, tc.make(at(m)))
			}
			st, _ := applyAll(FlavourOpenShift, in...)
			require.Len(t, tc.logs(st), MaxLogEntries)
			assert.Equal(t, at(MaxLogEntries-1), tc.logs(st)[0].Time, "newest first")
			assert.Equal(t, at(0), tc.logs(st)[MaxLogEntries-1].Time)

			// The 11th drops the oldest.
			st, _ = Apply(st, FlavourOpenShift, tc.make(at(MaxLogEntries)))
			logs := tc.logs(st)
			require.Len(t, logs, MaxLogEntries)
			var want []time.Time
			for m := MaxLogEntries; m >= 1; m-- {
				want = append(want, at(m))
			}
			assert.Equal(t, want, times(logs), "newest first, the oldest (minute 0) dropped")
		})
	}
}

func TestOutageHistoryLimit(t *testing.T) {
	// 21 outages: failure at even minutes, success at odd ones.
	var in []Entry
	for i := range MaxOutages + 1 {
		in = append(in, failure(at(2*i), ReasonTCPConnectError), success(at(2*i+1)))
	}
	st, evs := applyAll(FlavourOpenShift, in...)
	require.Len(t, st.Outages, MaxOutages)
	assert.Len(t, evs, 2*(MaxOutages+1), "every start and end emits an event")
	for i, o := range st.Outages {
		n := MaxOutages - i // the outage number, 0-based; number 0 was dropped
		assert.Equal(t, at(2*n), o.Start, "outage %d: newest first, the oldest dropped", i)
		assert.Equal(t, at(2*n+1), o.End)
		assert.False(t, o.Ongoing())
		assert.Equal(t, "Connectivity restored after 1m0s", o.Message)
	}
}

func TestOutageLifecycle(t *testing.T) {
	start := at(1).Add(300 * time.Millisecond)
	in := []Entry{
		success(at(0)),
		failure(start, ReasonTCPConnectError),
		failure(at(2), ReasonTCPConnectError), // same mode: not a start log
		failure(at(3), ReasonDNSError),        // mode changed
		failure(at(4), ReasonDNSError),
		failure(at(5), ReasonTCPConnectError), // changed again
		failure(at(6), ReasonTCPConnectError),
	}
	st, evs := applyAll(FlavourOpenShift, in...)
	require.Len(t, st.Outages, 1)
	o := st.Outages[0]
	assert.True(t, o.Ongoing())
	assert.Equal(t, start, o.Start)
	assert.Equal(t, "Connectivity outage detected at 2026-01-01T00:01:00.3Z", o.Message)
	assert.Equal(t, []time.Time{at(5), at(3), start}, times(o.StartLogs), "the first failure and each change of mode, newest first")
	assert.Empty(t, o.EndLogs)
	require.Equal(t, []Event{{
		Type: EventWarning, Reason: EventOutageDetected, Time: start,
		Message: "Connectivity outage detected: TCPConnectError: dial tcp 10.0.2.10:443: i/o timeout",
	}}, evs)
	assert.Equal(t, Condition{Status: ConditionFalse, Reason: ReasonTCPConnectError, Message: in[6].Message, LastTransitionTime: start}, st.Reachable)

	end := at(7).Add(900 * time.Millisecond)
	st, evs = Apply(st, FlavourOpenShift, success(end))
	require.Len(t, st.Outages, 1)
	o = st.Outages[0]
	assert.False(t, o.Ongoing())
	assert.Equal(t, end, o.End)
	assert.Equal(t, "Connectivity restored after 6m1s", o.Message, "6m0.6s rounded to a second")
	assert.Equal(t, []time.Time{end, at(6), at(5), at(4), at(3)}, times(o.EndLogs),
		"the success, then the 4 most recent failures, newest first")
	assert.True(t, o.EndLogs[0].Success)
	require.Equal(t, []Event{{
		Type: EventNormal, Reason: EventRestored, Time: end,
		Message: "Connectivity restored: tcp connection to 10.0.2.10:443 succeeded",
	}}, evs)
	assert.Equal(t, Condition{Status: ConditionTrue, Reason: ReasonTCPConnectSuccess, Message: success(end).Message, LastTransitionTime: end}, st.Reachable)

	// The next failure starts a new outage.
	st, evs = Apply(st, FlavourOpenShift, failure(at(8), ReasonTCPConnectError))
	require.Len(t, st.Outages, 2)
	assert.Equal(t, at(8), st.Outages[0].Start)
	assert.True(t, st.Outages[0].Ongoing())
	assert.Equal(t, start, st.Outages[1].Start)
	require.Len(t, evs, 1)
	assert.Equal(t, EventOutageDetected, evs[0].Reason)
}

func TestOutageFirstFailureEverAndShortEndLogs(t *testing.T) {
	st, evs := applyAll(FlavourOpenShift,
		failure(at(0), ReasonTCPConnectError), // the first result ever: an outage
		failure(at(1), ReasonTCPConnectError),
		failure(at(2), ReasonTCPConnectError),
		success(at(3)),
		failure(at(4), ReasonHTTPError),
		success(at(5)),
	)
	require.Len(t, st.Outages, 2)
	assert.Equal(t, at(0), st.Outages[1].Start)
	assert.Equal(t, []time.Time{at(3), at(2), at(1), at(0)}, times(st.Outages[1].EndLogs))
	assert.Equal(t, []time.Time{at(5), at(4)}, times(st.Outages[0].EndLogs),
		"only this outage's failures, none of the previous one's")
	assert.Len(t, evs, 4)
}

func TestStartLogsKeepTheFirstModes(t *testing.T) {
	reasons := []string{ReasonTCPConnectError, ReasonDNSError, ReasonHTTPError, ReasonICMPError, ReasonTargetRefused, ReasonDNSError, ReasonTCPConnectError, ReasonHTTPError}
	var in []Entry
	for i, r := range reasons {
		in = append(in, failure(at(i), r))
	}
	st, _ := applyAll(FlavourNetpulse, in...)
	require.Len(t, st.Outages, 1)
	assert.Equal(t, []time.Time{at(4), at(3), at(2), at(1), at(0)}, times(st.Outages[0].StartLogs),
		"at most 5, the first ones kept, newest first")
	assert.Len(t, st.Failures, len(reasons))
}

func TestConditionReasons(t *testing.T) {
	for _, tc := range []struct {
		name      string
		e         Entry
		status    string
		openshift string
		netpulse  string
	}{
		{"tcp success", success(at(1)), ConditionTrue, ReasonTCPConnectSuccess, ReasonProbeSucceeded},
		{"http success", Entry{Time: at(1), Success: true, Reason: ReasonHTTPRequest, Message: "200 OK"}, ConditionTrue, ReasonTCPConnectSuccess, ReasonProbeSucceeded},
		{"dns error", failure(at(1), ReasonDNSError), ConditionFalse, ReasonDNSError, ReasonDNSError},
		{"tcp error", failure(at(1), ReasonTCPConnectError), ConditionFalse, ReasonTCPConnectError, ReasonTCPConnectError},
		{"http error", failure(at(1), ReasonHTTPError), ConditionFalse, ReasonTCPConnectError, ReasonHTTPError},
		{"icmp error", failure(at(1), ReasonICMPError), ConditionFalse, ReasonTCPConnectError, ReasonICMPError},
		{"refused", failure(at(1), ReasonTargetRefused), ConditionFalse, ReasonTCPConnectError, ReasonTargetRefused},
		{"no reason", failure(at(1), ""), ConditionFalse, ReasonTCPConnectError, ReasonProbeFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for f, want := range map[Flavour]string{FlavourOpenShift: tc.openshift, FlavourNetpulse: tc.netpulse} {
				assert.Equal(t, want, ConditionReason(f, tc.e), "%v", f)
				st, _ := Apply(Status{}, f, tc.e)
				assert.Equal(t, Condition{Status: tc.status, Reason: want, Message: tc.e.Message, LastTransitionTime: tc.e.Time}, st.Reachable, "%v", f)
			}
		})
	}
}

func TestLastTransitionTime(t *testing.T) {
	steps := []struct {
		e      Entry
		reason string
		ltt    time.Time
	}{
		{success(at(1)), ReasonTCPConnectSuccess, at(1)},
		{Entry{Time: at(2), Success: true, Reason: ReasonTCPConnect, Message: "other"}, ReasonTCPConnectSuccess, at(1)}, // same status
		{failure(at(3), ReasonTCPConnectError), ReasonTCPConnectError, at(3)},
		{failure(at(4), ReasonDNSError), ReasonDNSError, at(3)}, // reason changed, status not
		{failure(at(5), ReasonDNSError), ReasonDNSError, at(3)},
		{success(at(6)), ReasonTCPConnectSuccess, at(6)},
	}
	var st Status
	for i, s := range steps {
		st, _ = Apply(st, FlavourOpenShift, s.e)
		assert.Equal(t, s.reason, st.Reachable.Reason, "step %d", i)
		assert.Equal(t, s.e.Message, st.Reachable.Message, "step %d", i)
		assert.Equal(t, s.ltt, st.Reachable.LastTransitionTime, "step %d", i)
	}
}

func TestDuplicatesAndOutOfOrder(t *testing.T) {
	ordered := []Entry{
		success(at(0)), success(at(1)), failure(at(2), ReasonTCPConnectError), failure(at(3), ReasonDNSError),
		success(at(4)), failure(at(5), ReasonHTTPError), success(at(6)),
	}
	want, wantEvents := applyAll(FlavourNetpulse, ordered...)
	require.Len(t, wantEvents, 4)

	shuffled := []Entry{ordered[4], ordered[0], ordered[6], ordered[2], ordered[1], ordered[5], ordered[3]}
	keep := append([]Entry(nil), shuffled...)
	got, gotEvents := Apply(Status{}, FlavourNetpulse, shuffled...)
	assert.True(t, want.Equal(got), "one shuffled batch equals the results one by one in order")
	assert.Equal(t, wantEvents, gotEvents, "events in time order")
	assert.Equal(t, keep, shuffled, "the caller's slice is not reordered")

	// A replay of everything, duplicates within a batch, older and zero-time results:
	// nothing changes.
	again, evs := Apply(got, FlavourNetpulse, append(append([]Entry{}, ordered...), ordered...)...)
	assert.True(t, got.Equal(again))
	assert.Empty(t, evs)
	again, evs = Apply(got, FlavourNetpulse, failure(at(3).Add(time.Second), ReasonTCPConnectError), Entry{})
	assert.True(t, got.Equal(again), "results older than the last one are ignored")
	assert.Empty(t, evs)

	// Two results with the same time in one batch: the first (input order) wins.
	dup, evs := Apply(got, FlavourNetpulse, failure(at(7), ReasonTCPConnectError), success(at(7)))
	assert.Len(t, dup.Failures, len(got.Failures)+1)
	assert.Len(t, dup.Successes, len(got.Successes))
	assert.Len(t, evs, 1)
}

func TestApplyDoesNotAlias(t *testing.T) {
	var in []Entry
	for i := range 30 {
		in = append(in, failure(at(3*i), ReasonTCPConnectError), failure(at(3*i+1), ReasonDNSError), success(at(3*i+2)))
	}
	base, _ := applyAll(FlavourOpenShift, in[:len(in)-1]...) // ends in an ongoing outage
	snapshot := base.DeepCopy()
	require.True(t, base.Equal(snapshot))

	out, _ := Apply(base, FlavourOpenShift, in[len(in)-1])
	// Writing through every slice of the result leaves the input alone, and the other way.
	out.Successes[0].Message = "changed"
	out.Failures[0].Message = "changed"
	out.Outages[0].Message = "changed"
	out.Outages[0].StartLogs[0].Message = "changed"
	out.Outages[0].EndLogs[0].Message = "changed"
	out.Outages[1].EndLogs[1].Message = "changed"
	assert.True(t, base.Equal(snapshot), "Apply's result shares nothing with its input")
	outSnapshot := out.DeepCopy()
	base.Successes[0].Message = "again"
	base.Outages[1].StartLogs[0].Message = "again"
	assert.True(t, out.Equal(outSnapshot))

	// The copy's slices do not overlap: appending to one overwrites no other.
	c := snapshot.DeepCopy()
	c.Successes = append(c.Successes, Entry{Message: "appended"})
	assert.True(t, c.Failures[0].equal(snapshot.Failures[0]), "Successes is followed by Failures in the copy's buffer")
}

func TestTruncation(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"ascii", "abcdefgh", 6, "abc..."},
		{"multibyte exact", "日本語", 3, "日本語"},
		{"multibyte", "日本語のメッセージ", 5, "日本..."},
		{"tiny", "abcdef", 2, "ab"},
		{"zero", "abc", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, Truncate(tc.in, tc.max)) })
	}

	long := strings.Repeat("é日", 200)  // 400 characters, 1000 bytes
	reason := strings.Repeat("Ré", 40) // 80 characters
	st, evs := Apply(Status{}, FlavourNetpulse, Entry{Time: at(1), Reason: reason, Message: long})
	for name, s := range map[string]string{
		"failure message":   st.Failures[0].Message,
		"start log message": st.Outages[0].StartLogs[0].Message,
		"condition message": st.Reachable.Message,
		"event message":     evs[0].Message,
	} {
		assert.True(t, utf8.ValidString(s), name)
		assert.Equal(t, MaxMessageLength, utf8.RuneCountInString(s), name)
		assert.True(t, strings.HasSuffix(s, "..."), name)
	}
	assert.Equal(t, string([]rune(long)[:MaxMessageLength-3])+"...", st.Failures[0].Message)
	for name, s := range map[string]string{"failure reason": st.Failures[0].Reason, "condition reason": st.Reachable.Reason} {
		assert.True(t, utf8.ValidString(s), name)
		assert.Equal(t, MaxReasonLength, utf8.RuneCountInString(s), name)
		assert.True(t, strings.HasPrefix(reason, s), name)
	}
}
