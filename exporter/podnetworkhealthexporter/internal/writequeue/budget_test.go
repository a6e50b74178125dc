// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package writequeue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBudgetDefault5PerSecondBurst10(t *testing.T) {
	b := NewBudget(5, 10)
	for i := range 10 {
		ok, _ := b.Take(t0)
		require.True(t, ok, "burst token %d", i)
	}
	ok, wait := b.Take(t0)
	require.False(t, ok)
	assert.Equal(t, 200*time.Millisecond, wait)
	ok, wait = b.Take(t0.Add(150 * time.Millisecond))
	require.False(t, ok, "a refused Take takes nothing")
	assert.Equal(t, 50*time.Millisecond, wait)
	assert.Equal(t, 50*time.Millisecond, b.Delay(t0.Add(150*time.Millisecond)))
	ok, _ = b.Take(t0.Add(200 * time.Millisecond))
	require.True(t, ok)

	// Over a minute at full demand: burst + 5/s, never more.
	b = NewBudget(5, 10)
	n := 0
	for ms := 0; ms <= 60_000; ms += 10 {
		for {
			ok, _ := b.Take(t0.Add(time.Duration(ms) * time.Millisecond))
			if !ok {
				break
			}
			n++
		}
	}
	assert.Equal(t, 10+5*60, n)
}

func TestBudgetRefillCapsAtBurstAndIgnoresTimeGoingBack(t *testing.T) {
	b := NewBudget(5, 2)
	b.Take(t0)
	b.Take(t0)
	assert.Equal(t, 200*time.Millisecond, b.Delay(t0))
	assert.Equal(t, 200*time.Millisecond, b.Delay(t0.Add(-time.Hour)), "time going back adds nothing")
	assert.Equal(t, time.Duration(0), b.Delay(t0.Add(time.Hour)), "Delay takes nothing")
	for range 2 {
		ok, _ := b.Take(t0.Add(time.Hour))
		require.True(t, ok)
	}
	ok, _ := b.Take(t0.Add(time.Hour))
	assert.False(t, ok, "an idle hour refills only the burst")
	assert.Equal(t, 5.0, b.Rate())
	assert.Equal(t, 2, b.Burst())
}

func TestBudgetUnlimited(t *testing.T) {
	b := NewBudget(0, 0)
	for range 1000 {
		ok, _ := b.Take(t0)
		require.True(t, ok)
	}
	assert.Equal(t, time.Duration(0), b.Delay(t0))
	assert.Equal(t, 1, b.Burst())
}

func TestHeartbeatInterval(t *testing.T) {
	const budget, share = 5.0, 0.5
	// N=1,000 nodes, 2N objects: 2,000 / 2.5 per s.
	assert.Equal(t, 13*time.Minute+20*time.Second, HeartbeatInterval(10*time.Minute, 2*1000, budget, share))
	// N=5,000 nodes, 2N objects: 10,000 / 2.5 per s.
	assert.Equal(t, time.Hour+6*time.Minute+40*time.Second, HeartbeatInterval(10*time.Minute, 2*5000, budget, share))
	// Small clusters keep the configured heartbeat (N=100: 200 objects need 80 s).
	assert.Equal(t, 10*time.Minute, HeartbeatInterval(10*time.Minute, 200, budget, share))
	// The stretched heartbeats stay within the share of the budget.
	for _, n := range []int{1000, 5000, 65000} {
		hb := HeartbeatInterval(10*time.Minute, 2*n, budget, share)
		assert.LessOrEqual(t, float64(2*n)/hb.Seconds(), budget*share, "N=%d", n)
	}
	// Degenerate inputs.
	assert.Equal(t, time.Minute, HeartbeatInterval(time.Minute, 0, budget, share))
	assert.Equal(t, time.Minute, HeartbeatInterval(time.Minute, 10, 0, share))
	assert.Equal(t, time.Minute, HeartbeatInterval(time.Minute, 10, budget, 0))
	assert.Equal(t, 400*time.Second, HeartbeatInterval(time.Minute, 2000, budget, 7), "share is capped at 1")
}
