// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/contract"
)

// flapRun feeds a pair 1 s rounds that go 10 s down / 10 s up for 3 minutes, then up for
// 2 minutes, and returns its outages, the verdict changes and the transitions flagged
// flapping.
func flapRun(t *testing.T, window time.Duration) (outages []observation.Outage, changes, flapping int) {
	t.Helper()
	s := NewSummarizer(SummaryConfig{FlapWindow: window})
	t1 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 300; i++ {
		ok := i >= 180 || (i/10)%2 == 1
		o := observation.Observation{Source: simSource(), Target: simTarget(), ProbeType: contract.ProbeTypeICMP,
			Timestamp: t1.Add(time.Duration(i) * time.Second), Success: ok, Sent: 3}
		if !ok {
			o.Lost, o.ErrorType = 3, contract.ErrorTypeTimeout
		}
		s.Add(o)
		for _, tr := range s.Transitions() {
			if tr.Old != tr.New {
				changes++
			}
			if tr.Flapping {
				flapping++
			}
		}
	}
	sum, ok := s.Summary(observation.KeyOf(&observation.Observation{Source: simSource(), Target: simTarget()}))
	require.True(t, ok)
	assert.Equal(t, observation.VerdictReachable, sum.Verdict, "up for 2 minutes at the end")
	return sum.Outages, changes, flapping
}

// A link flapping 10 s down / 10 s up for 3 minutes: without a flap window, 9 outages and 18
// verdict changes (each a status write and an Event); with one, a single outage spanning
// the whole period with its flap count, 4 verdict changes (detected, restored, flapping,
// restored once it held for the window) and one flapping transition.
func TestFlappingIsOneOutage(t *testing.T) {
	outages, changes, flapping := flapRun(t, 0)
	assert.Len(t, outages, 9)
	assert.Equal(t, 18, changes)
	assert.Zero(t, flapping)

	outages, changes, flapping = flapRun(t, 30*time.Second)
	require.Len(t, outages, 1, "one entry from the first failure to the last recovery")
	f := outages[0]
	assert.False(t, f.Ongoing())
	assert.Equal(t, 8, f.Flaps, "down again 8 times within 30 s of coming back")
	assert.Equal(t, 170*time.Second, f.End.Sub(f.Start), "from the first failure to the last recovery")
	assert.Equal(t, 4, changes)
	assert.Equal(t, 1, flapping)
	assert.Contains(t, f.Message, "restored after")
	t.Logf("flapping outage: %s -> %s, %d flaps", f.Start.Format(time.TimeOnly), f.End.Format(time.TimeOnly), f.Flaps)
}
