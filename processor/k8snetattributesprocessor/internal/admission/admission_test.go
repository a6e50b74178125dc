// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func admitOne(tb *Table, uid string, now time.Time, tg Target, stable, external bool) Reason {
	return tb.Admit(uid, now, tg, stable, external)
}

// The limits hold, and nothing admitted is evicted by a newcomer.
func TestLimitsWithoutEviction(t *testing.T) {
	tb := New(Limits{MaxStableTargetsPerSource: 3, MaxExternalTargetsPerSource: 2})
	for i := range 3 {
		require.Equal(t, Admitted, admitOne(tb, "a", t0, Target(i), true, false))
	}
	assert.Equal(t, StableTargetLimit, admitOne(tb, "a", t0, 99, true, false))
	for i := range 3 {
		assert.Equal(t, Admitted, admitOne(tb, "a", t0.Add(time.Second), Target(i), true, false), "known target %d still admitted", i)
	}
	assert.Equal(t, Admitted, admitOne(tb, "a", t0, 100, false, false), "a rotating cluster target needs no memory")
	assert.Equal(t, Admitted, admitOne(tb, "b", t0, 99, true, false), "limits are per source")

	assert.Equal(t, Admitted, admitOne(tb, "a", t0, 200, false, true))
	assert.Equal(t, Admitted, admitOne(tb, "a", t0, 201, false, true))
	assert.Equal(t, ExternalTargetLimit, admitOne(tb, "a", t0, 202, false, true))
	assert.Equal(t, ExternalTargetLimit, admitOne(tb, "a", t0, 203, true, true), "a stable external needs both")
	assert.Equal(t, Stats{Sources: 2, StableTargets: 4, ExternalTargets: 2}, tb.Stats())
}

// A target its source stopped reporting is forgotten after IdleTTL, which makes room for
// the new targets of a moved plan; an idle source is forgotten too.
func TestIdleTargetsAndSourcesAreForgotten(t *testing.T) {
	tb := New(Limits{MaxStableTargetsPerSource: 2, IdleTTL: time.Minute})
	require.Equal(t, Admitted, admitOne(tb, "a", t0, 1, true, false))
	require.Equal(t, Admitted, admitOne(tb, "a", t0, 2, true, false))
	now := t0
	for range 10 { // target 1 keeps being reported, target 2 went quiet
		now = now.Add(10 * time.Second)
		require.Equal(t, Admitted, admitOne(tb, "a", now, 1, true, false))
		if now.Sub(t0) <= time.Minute {
			assert.Equal(t, StableTargetLimit, admitOne(tb, "a", now, 3, true, false))
		}
	}
	assert.Equal(t, Admitted, admitOne(tb, "a", now, 3, true, false), "target 2 forgotten after its idle TTL")
	admitOne(tb, "z", now.Add(2*time.Minute), 1, true, false)
	assert.Equal(t, 1, tb.Stats().Sources, "source a idle for 2m is forgotten")
}

func TestMaxSources(t *testing.T) {
	tb := New(Limits{MaxSources: 2})
	assert.Equal(t, Admitted, admitOne(tb, "a", t0, 1, true, false))
	assert.Equal(t, Admitted, admitOne(tb, "b", t0, 1, true, false))
	assert.Equal(t, SourceLimit, admitOne(tb, "c", t0, 1, false, false))
	assert.Equal(t, Admitted, admitOne(tb, "a", t0, 2, true, false), "known sources keep going")
}

// Memory at scale: 5,000 sources with 4 stable targets each (the shipped agents), and the
// worst case: max_sources with every limit full.
func BenchmarkTableMemory(b *testing.B) {
	for _, c := range []struct {
		name             string
		sources, targets int
	}{{"n5000_real", 5000, 4}, {"n10000_full", 10000, 16 + 8}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				tb := New(Limits{})
				for s := range c.sources {
					uid := "uid-" + string(rune('a'+s%26)) + itoa(s)
					for i := range c.targets {
						tb.Admit(uid, t0, Target(i), i < 16, i >= 16)
					}
				}
			}
		})
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}
