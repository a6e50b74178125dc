// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checkstatus

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchDeclaredCheckWrites (make bench, NETPULSE_BENCH=1; hack/bench.d/50-checks.sh):
// one declared check run every 60 s for 24 hours, its status written under
// Policy{Heartbeat: 10m} (ours) and under OpenShift's checker model, which writes the
// status after every run (reference; computed by running the same results through a
// policy that writes on every result). Scenarios: healthy; one 5-minute outage an hour;
// flapping (success and failure alternating every 3 runs) for one hour of the day,
// healthy otherwise. Printed: status writes per hour, and reference/ours.
func TestBenchDeclaredCheckWrites(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") == "" {
		t.Skip("a benchmark: make bench (NETPULSE_BENCH=1)")
	}
	const day, interval = 24 * time.Hour, DefaultInterval
	pol := Policy{Heartbeat: 10 * time.Minute}
	for _, sc := range []struct {
		name   string // appended to the BENCH name; "" for healthy
		result func(time.Duration, time.Time) Entry
	}{
		{"", healthy},
		{"_outage_5m_per_hour", outageAt(30, 35, ReasonTCPConnectError)},
		{"_flapping", func(off time.Duration, ts time.Time) Entry {
			const flapHour = 12 * time.Hour
			if off >= flapHour && off < flapHour+time.Hour && (int((off-flapHour)/interval)/3)%2 == 1 {
				return failure(ts, ReasonTCPConnectError)
			}
			return success(ts)
		}},
	} {
		ours := simulate(day, interval, sc.result, pol.Due)
		ref := simulate(day, interval, sc.result, writeEveryResult)
		require.Equal(t, ours.runs, ref.runs)
		require.Equal(t, ours.events, ref.events, "the same inputs")
		assert.True(t, ours.final.Equal(ref.final), "the same final status")
		// Every outage start and end was written when it happened.
		for _, ev := range ours.events {
			assert.Contains(t, ours.writeTimes, ev.Time, "%s: %s written at once", sc.name, ev.Reason)
		}
		x, r := float64(ours.writes)/day.Hours(), float64(ref.writes)/day.Hours()
		require.Positive(t, x)
		fmt.Printf("BENCH declared_check_writes_per_hour%s ours=%.1f reference=%.1f ratio=%.1fx\n", sc.name, x, r, r/x)
		t.Logf("declared_check_writes_per_hour%s: %d runs, %d events; writes by reason: ours %v, reference %v", sc.name, ours.runs, len(ours.events), ours.reasons, ref.reasons)
	}
}

// fullStatus is a status at every limit: 10 successes, 10 failures, 20 ended outages with
// 5 start and 5 end logs each, the newest result a success at epoch.
func fullStatus() Status {
	var st Status
	ts := epoch.Add(-24 * time.Hour)
	next := func() time.Time { ts = ts.Add(time.Minute); return ts }
	reasons := []string{ReasonTCPConnectError, ReasonDNSError, ReasonHTTPError, ReasonICMPError, ReasonTargetRefused}
	for range MaxOutages {
		for _, r := range reasons {
			st, _ = Apply(st, FlavourNetpulse, failure(next(), r))
		}
		st, _ = Apply(st, FlavourNetpulse, success(next()))
	}
	for range MaxLogEntries {
		st, _ = Apply(st, FlavourNetpulse, success(next()))
	}
	st, _ = Apply(st, FlavourNetpulse, success(epoch))
	return st
}

// BenchmarkApply: one routine success applied onto a full status.
func BenchmarkApply(b *testing.B) {
	st := fullStatus()
	if len(st.Outages) != MaxOutages || len(st.Successes) != MaxLogEntries || len(st.Failures) != MaxLogEntries ||
		len(st.Outages[MaxOutages-1].StartLogs) != MaxOutageLogs || len(st.Outages[MaxOutages-1].EndLogs) != MaxOutageLogs {
		b.Fatal("the status is not full")
	}
	e := success(epoch.Add(time.Minute))
	b.ReportAllocs()
	for b.Loop() {
		out, _ := Apply(st, FlavourNetpulse, e)
		if !out.LastResultTime.Equal(e.Time) {
			b.Fatal("not applied")
		}
	}
}
