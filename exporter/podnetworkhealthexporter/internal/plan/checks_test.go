// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/checkstatus"
)

func TestCheckDue(t *testing.T) {
	apply := func(st checkstatus.Status, f checkstatus.Flavour, es ...checkstatus.Entry) checkstatus.Status {
		st, _ = checkstatus.Apply(st, f, es...)
		return st
	}
	checkHealthy := apply(checkstatus.Status{}, checkstatus.FlavourOpenShift, checkSuccess(checkMinute(0)))
	down := apply(checkHealthy, checkstatus.FlavourOpenShift, checkFailure(checkMinute(1), checkstatus.ReasonTCPConnectError))
	ended := down.DeepCopy()
	ended.Outages[0].End = checkMinute(2) // by hand: the outage ended, the condition did not change

	for _, tc := range []struct {
		name      string
		written   checkstatus.Status
		lastWrite time.Time
		current   checkstatus.Status
		now       time.Time
		policy    CheckPolicy
		want      string // "" = not due
	}{
		{"created", checkstatus.Status{}, time.Time{}, checkHealthy, checkMinute(0), CheckPolicy{}, CheckWriteCreated},
		{"nothing to create", checkstatus.Status{}, time.Time{}, checkstatus.Status{}, checkMinute(0), CheckPolicy{}, ""},
		{"condition status", checkHealthy, checkMinute(0), down, checkMinute(1), CheckPolicy{}, CheckWriteCondition},
		{"condition reason (openshift)", down, checkMinute(1), apply(down, checkstatus.FlavourOpenShift, checkFailure(checkMinute(2), checkstatus.ReasonDNSError)), checkMinute(2), CheckPolicy{}, CheckWriteCondition},
		{"condition reason (netpulse)", apply(down, checkstatus.FlavourNetpulse, checkFailure(checkMinute(2), checkstatus.ReasonHTTPError)), checkMinute(2),
			apply(down, checkstatus.FlavourNetpulse, checkFailure(checkMinute(2), checkstatus.ReasonHTTPError), checkFailure(checkMinute(3), checkstatus.ReasonTargetRefused)), checkMinute(3), CheckPolicy{}, CheckWriteCondition},
		{"condition unknown", checkHealthy, checkMinute(0), func() checkstatus.Status {
			s, _ := checkstatus.Silence(checkHealthy, checkMinute(5), 3*time.Minute, time.Time{})
			return s
		}(), checkMinute(5), CheckPolicy{}, CheckWriteCondition},
		{"outage ended", down, checkMinute(1), ended, checkMinute(2), CheckPolicy{}, CheckWriteOutage},
		{"another outage started", down, checkMinute(1), apply(down, checkstatus.FlavourOpenShift, checkSuccess(checkMinute(2)), checkFailure(checkMinute(3), checkstatus.ReasonTCPConnectError)), checkMinute(3), CheckPolicy{}, CheckWriteOutage},
		{"failure mode", down, checkMinute(1), apply(down, checkstatus.FlavourOpenShift, checkFailure(checkMinute(2), checkstatus.ReasonICMPError)), checkMinute(2), CheckPolicy{}, CheckWriteFailureMode},
		{"repeated failure coalesced", down, checkMinute(1), apply(down, checkstatus.FlavourOpenShift, checkFailure(checkMinute(2), checkstatus.ReasonTCPConnectError)), checkMinute(2), CheckPolicy{}, ""},
		{"routine success coalesced", checkHealthy, checkMinute(0), apply(checkHealthy, checkstatus.FlavourOpenShift, checkSuccess(checkMinute(9))), checkMinute(9), CheckPolicy{}, ""},
		{"heartbeat just before", checkHealthy, checkMinute(0), apply(checkHealthy, checkstatus.FlavourOpenShift, checkSuccess(checkMinute(10))), checkMinute(10).Add(-time.Nanosecond), CheckPolicy{}, ""},
		{"heartbeat (default 10m)", checkHealthy, checkMinute(0), apply(checkHealthy, checkstatus.FlavourOpenShift, checkSuccess(checkMinute(10))), checkMinute(10), CheckPolicy{}, CheckWriteHeartbeat},
		{"heartbeat during an outage", down, checkMinute(1), apply(down, checkstatus.FlavourOpenShift, checkFailure(checkMinute(11), checkstatus.ReasonTCPConnectError)), checkMinute(11), CheckPolicy{}, CheckWriteHeartbeat},
		{"heartbeat 5m", checkHealthy, checkMinute(0), apply(checkHealthy, checkstatus.FlavourOpenShift, checkSuccess(checkMinute(5))), checkMinute(5), CheckPolicy{Heartbeat: 5 * time.Minute}, CheckWriteHeartbeat},
		{"heartbeat 20m not yet", checkHealthy, checkMinute(0), apply(checkHealthy, checkstatus.FlavourOpenShift, checkSuccess(checkMinute(10))), checkMinute(10), CheckPolicy{Heartbeat: 20 * time.Minute}, ""},
		{"unchanged never rewritten", checkHealthy, checkMinute(0), checkHealthy, checkMinute(600), CheckPolicy{}, ""},
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
func TestCheckWriteBudget(t *testing.T) {
	pol := CheckPolicy{}
	const d, interval = time.Hour, checkstatus.DefaultInterval

	h := simulateCheck(d, interval, checkHealthy, pol.Due)
	heartbeats := int((d - interval) / DefaultCheckHeartbeat) // the last run is at 59m
	assert.Equal(t, map[string]int{CheckWriteCreated: 1, CheckWriteHeartbeat: heartbeats}, h.reasons,
		"checkHealthy: one create, then heartbeats only")
	assert.Equal(t, 6, h.writes)
	for i := 1; i < len(h.writeTimes); i++ {
		assert.Equal(t, DefaultCheckHeartbeat, h.writeTimes[i].Sub(h.writeTimes[i-1]))
	}
	assert.Empty(t, h.events)

	// One 5-minute outage: its start and end are written when they happen, and cost a
	// bounded handful of writes more.
	o := simulateCheck(d, interval, checkOutageAt(30, 35, checkstatus.ReasonTCPConnectError), pol.Due)
	assert.Equal(t, 2, o.reasons[CheckWriteCondition], "%v", o.reasons)
	assert.Contains(t, o.writeTimes, checkMinute(30), "the start is written at once")
	assert.Contains(t, o.writeTimes, checkMinute(35), "the end is written at once")
	assert.LessOrEqual(t, o.writes, h.writes+3, "%v", o.reasons)
	assert.Greater(t, o.writes, h.writes)
	require.Len(t, o.events, 2)
	require.Len(t, o.final.Outages, 1)
	assert.Equal(t, "Connectivity restored after 5m0s", o.final.Outages[0].Message)

	// The same outage changing failure mode once (ICMPError is TCPConnectError to
	// OpenShift: the condition stays): one more write, at once.
	m := simulateCheck(d, interval, func(off time.Duration, ts time.Time) checkstatus.Entry {
		if off >= 32*time.Minute && off < 35*time.Minute {
			return checkFailure(ts, checkstatus.ReasonICMPError)
		}
		return checkOutageAt(30, 35, checkstatus.ReasonTCPConnectError)(off, ts)
	}, pol.Due)
	assert.Equal(t, 1, m.reasons[CheckWriteFailureMode], "%v", m.reasons)
	assert.Contains(t, m.writeTimes, checkMinute(32))
	assert.LessOrEqual(t, m.writes, o.writes+1)

	// The reference model writes after every run.
	ref := simulateCheck(d, interval, checkHealthy, writeEveryCheckResult)
	assert.Equal(t, 60, ref.writes)
}

func TestCheckStale(t *testing.T) {
	for _, tc := range []struct {
		name            string
		last, gone, now time.Time
		after           time.Duration
		want            bool
	}{
		{"source exists", checkMinute(0), time.Time{}, checkMinute(100000), 0, false},
		{"gone briefly", checkMinute(0), checkMinute(0), checkMinute(0).Add(47 * time.Hour), 0, false},
		{"gone 48h", checkMinute(0), checkMinute(0), checkMinute(0).Add(48 * time.Hour), 0, true},
		{"never a result, gone 48h", time.Time{}, checkMinute(0), checkMinute(0).Add(48 * time.Hour), 0, true},
		{"a result after the source went", checkMinute(0).Add(24 * time.Hour), checkMinute(0), checkMinute(0).Add(48 * time.Hour), 0, false},
		{"custom after", checkMinute(0), checkMinute(0), checkMinute(61), time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, CheckStale(tc.last, tc.gone, tc.now, tc.after))
		})
	}
}

// DueWrite: a NetworkCheck's placement is written at once, its source address with the
// heartbeat, and a state the API refused as it is is not written again.
func TestCheckDueWrite(t *testing.T) {
	healthy, _ := checkstatus.Apply(checkstatus.Status{}, checkstatus.FlavourNetpulse, checkSuccess(checkMinute(0)))
	down, _ := checkstatus.Apply(healthy, checkstatus.FlavourNetpulse, checkFailure(checkMinute(1), checkstatus.ReasonTCPConnectError))
	for _, tc := range []struct {
		name string
		w    CheckWrite
		now  time.Time
		want string
	}{
		{"unchanged", CheckWrite{Written: healthy, LastWrite: checkMinute(0), Current: healthy}, checkMinute(1), ""},
		{"placement at once", CheckWrite{Written: healthy, LastWrite: checkMinute(0), Current: healthy, PlacementChanged: true}, checkMinute(1), CheckWritePlacement},
		{"placement over a condition", CheckWrite{Written: healthy, LastWrite: checkMinute(0), Current: down, PlacementChanged: true}, checkMinute(1), CheckWritePlacement},
		{"source waits for the heartbeat", CheckWrite{Written: healthy, LastWrite: checkMinute(0), Current: healthy, SourceChanged: true}, checkMinute(9), ""},
		{"source with the heartbeat", CheckWrite{Written: healthy, LastWrite: checkMinute(0), Current: healthy, SourceChanged: true}, checkMinute(10), CheckWriteHeartbeat},
		{"condition", CheckWrite{Written: healthy, LastWrite: checkMinute(0), Current: down}, checkMinute(1), CheckWriteCondition},
		{"rejected as it is", CheckWrite{Written: healthy, LastWrite: checkMinute(0), Current: down, RejectedAsIs: true}, checkMinute(1), ""},
		{"rejected placement", CheckWrite{Written: healthy, LastWrite: checkMinute(0), Current: healthy, PlacementChanged: true, RejectedAsIs: true}, checkMinute(1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, why := CheckPolicy{}.DueWrite(tc.w, tc.now)
			assert.Equal(t, tc.want != "", due)
			assert.Equal(t, tc.want, why)
		})
	}
	for why, want := range map[string]bool{CheckWriteCreated: true, CheckWriteCondition: true, CheckWriteOutage: true, CheckWritePlacement: true,
		CheckWriteFailureMode: false, CheckWriteHeartbeat: false} {
		assert.Equal(t, want, CheckWriteSignificant(why), why)
	}
}
