// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/internal/contract"
)

// excuseRun: node-7 is reported with disruption first from round 0 on, and with then from
// round switchAt on (when then != ""); its pod stops answering at round downAt. It returns
// the target's status and the outage Events of its stable pair.
func excuseRun(t *testing.T, first, then string, switchAt, downAt int) (verdict.TargetStatus, int) {
	t.Helper()
	r := newRing(20, 3)
	e := New(verdict.Config{})
	const down = 7
	stableKey := observation.KeyOf(&observation.Observation{Source: r.src(down - 1), Target: r.tgt(down)})
	events := 0
	for round := 0; round < downAt+8; round++ {
		ok := healthy
		if round >= downAt {
			ok = func(_, dst int) bool { return dst != down }
		}
		d := first
		if then != "" && round >= switchAt {
			d = then
		}
		e.Observe(disrupt(r.round(round, ok), down, d), r.at(round))
		for _, ev := range e.Reconcile(r.at(round).Add(time.Second)).Events {
			if ev.Key == stableKey {
				events++
			}
		}
	}
	ts, ok := e.Target(verdict.TargetKeyOf(&observation.Observation{Target: r.tgt(down)}))
	require.True(t, ok)
	return ts, events
}

// A disruption excuses failures that begin within DisruptionExcuseFor of it, and nothing
// that begins later: a node cordoned for days does not hide a new partition of its pods.
// A new kind of disruption (the pod evicted late in a long drain) excuses afresh.
func TestDisruptionExcuseExpires(t *testing.T) {
	rounds := int(verdict.DisruptionExcuseFor / (10 * time.Second)) // the ring's 10 s rounds
	for _, tc := range []struct {
		name             string
		first, then      string
		switchAt, downAt int
		excused          string
	}{
		{"fresh cordon", contract.DisruptionNodeDraining, "", 0, 5, contract.DisruptionNodeDraining},
		{"cordoned long before", contract.DisruptionNodeDraining, "", 0, rounds + 5, ""},
		{"evicted late in a long drain", contract.DisruptionNodeDraining, contract.DisruptionPodTerminating, rounds + 3, rounds + 5, contract.DisruptionPodTerminating},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, events := excuseRun(t, tc.first, tc.then, tc.switchAt, tc.downAt)
			t.Logf("disruption %s since round 0 (%s from round %d), pod down at round %d (%v later): %s %q, %d outage Events",
				tc.first, tc.then, tc.switchAt, tc.downAt, time.Duration(tc.downAt)*10*time.Second, ts.Verdict, ts.Disruption, events)
			if tc.excused != "" {
				assert.Equal(t, observation.VerdictUnknown, ts.Verdict)
				assert.Equal(t, tc.excused, ts.Disruption)
				assert.Zero(t, events)
				return
			}
			assert.Equal(t, observation.VerdictUnreachable, ts.Verdict, "a partition after %v of cordon is reported", fmt.Sprint(verdict.DisruptionExcuseFor))
			assert.Empty(t, ts.Disruption)
			assert.Equal(t, 1, events, "the outage's Event")
		})
	}
}
