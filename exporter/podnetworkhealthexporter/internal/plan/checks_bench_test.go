// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/checkstatus"
)

// TestBenchDeclaredCheckWrites (make bench, NETPULSE_BENCH=1; hack/bench.d/50-checks.sh):
// one declared check run every 60 s for 24 hours, its status written under
// CheckPolicy{Heartbeat: 10m} (ours) and under OpenShift's checker model, which writes the
// status after every run (reference; computed by running the same results through a
// policy that writes on every result). Scenarios: checkHealthy; one 5-minute outage an hour;
// flapping (success and failure alternating every 3 runs) for one hour of the day,
// checkHealthy otherwise. Printed: status writes per hour, and reference/ours.
func TestBenchDeclaredCheckWrites(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") == "" {
		t.Skip("a benchmark: make bench (NETPULSE_BENCH=1)")
	}
	const day, interval = 24 * time.Hour, checkstatus.DefaultInterval
	pol := CheckPolicy{Heartbeat: 10 * time.Minute}
	for _, sc := range []struct {
		name   string // appended to the BENCH name; "" for checkHealthy
		result func(time.Duration, time.Time) checkstatus.Entry
	}{
		{"", checkHealthy},
		{"_outage_5m_per_hour", checkOutageAt(30, 35, checkstatus.ReasonTCPConnectError)},
		{"_flapping", func(off time.Duration, ts time.Time) checkstatus.Entry {
			const flapHour = 12 * time.Hour
			if off >= flapHour && off < flapHour+time.Hour && (int((off-flapHour)/interval)/3)%2 == 1 {
				return checkFailure(ts, checkstatus.ReasonTCPConnectError)
			}
			return checkSuccess(ts)
		}},
	} {
		ours := simulateCheck(day, interval, sc.result, pol.Due)
		ref := simulateCheck(day, interval, sc.result, writeEveryCheckResult)
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
