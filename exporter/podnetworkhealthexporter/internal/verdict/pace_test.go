// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/contract"
)

// paceRun feeds one stable pair rounds gap apart for d, each failing or not as fails says
// (by round index and time since the start), and counts its verdict changes and when it
// was first Unreachable.
func paceRun(cfg Config, gap, d time.Duration, fails func(i int, since time.Duration) bool) (changes int, firstUnreachable time.Duration) {
	e := New(cfg)
	t1 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	key := observation.KeyOf(&observation.Observation{Source: simSource(), Target: simTarget()})
	last := observation.VerdictUnknown
	for i := 0; time.Duration(i)*gap < d; i++ {
		at := t1.Add(time.Duration(i) * gap)
		o := observation.Observation{Source: simSource(), Target: simTarget(), ProbeType: contract.ProbeTypeICMP,
			Timestamp: at, Success: !fails(i, at.Sub(t1)), Sent: 3, Stable: true}
		if !o.Success {
			o.Lost, o.ErrorType = 3, contract.ErrorTypeTimeout
		}
		e.Observe([]observation.Observation{o}, at)
		for _, p := range e.Judge(at).Pairs {
			if p.Key != key || p.Summary.Verdict == last {
				continue
			}
			if last != observation.VerdictUnknown {
				changes++
			}
			if p.Summary.Verdict == observation.VerdictUnreachable && firstUnreachable == 0 {
				firstUnreachable = at.Sub(t1)
			}
			last = p.Summary.Verdict
		}
	}
	return changes, firstUnreachable
}

// Issue 40, item 1: one agent dating a pair's rounds 10 ms apart (3 failed, 2 successful, in
// turn) flipped it 399 times in 10 s, each flip a verdict write. A round within the minimum
// spacing (250 ms) of the pair's previous counted round counts for nothing now: whatever
// the liar's pattern, at most 2 flips per 1.25 s. An honest agent's 1 s rounds all count: the
// same flips as without the bound, as soon.
func TestRoundsDatedTooCloseDoNotStepAPair(t *testing.T) {
	byIndex := func(i int, _ time.Duration) bool { return i%5 < 3 }
	bySpacing := func(_ int, since time.Duration) bool { return (since/DefaultMinRoundSpacing)%5 < 3 }
	worst := 0
	for _, liar := range []func(int, time.Duration) bool{byIndex, bySpacing} {
		n, _ := paceRun(Config{}, 10*time.Millisecond, 10*time.Second, liar)
		worst = max(worst, n)
	}
	assert.LessOrEqual(t, worst, 16, "10 s of rounds 10 ms apart")

	off := Config{MinRoundSpacing: time.Nanosecond}
	honest, first := paceRun(Config{}, time.Second, 100*time.Second, byIndex)
	want, wantFirst := paceRun(off, time.Second, 100*time.Second, byIndex)
	assert.Equal(t, want, honest, "1 s rounds: every flip, as without the bound")
	assert.Equal(t, wantFirst, first, "and as soon")
	flood, _ := paceRun(off, 10*time.Millisecond, 10*time.Second, byIndex)
	t.Logf("verdict changes in 10 s of rounds 10 ms apart: %d (%d without the bound); honest 1 s rounds: %d in 100 s", worst, flood, honest)
}

// pod_probe stamps a round when it ends and runs rounds one after the other, so a fast
// round after a slow one is dated less than an interval after it: at the simulated
// cluster's 1 s interval (min_probe_interval) and a 0.75 s timeout, 0.25 s. Such rounds all
// count: the pair flips as without the bound.
func TestHonestRoundsStampedAtTheirEndAllCount(t *testing.T) {
	const timeout = 750 * time.Millisecond
	e, ref := New(Config{}), New(Config{MinRoundSpacing: time.Nanosecond})
	t1 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	key := observation.KeyOf(&observation.Observation{Source: simSource(), Target: simTarget()})
	var got, want []observation.Verdict
	for i := range 100 {
		ok := i%5 >= 3 // failures time out, successes are fast
		end := t1.Add(time.Duration(i) * time.Second)
		if !ok {
			end = end.Add(timeout)
		}
		o := observation.Observation{Source: simSource(), Target: simTarget(), ProbeType: contract.ProbeTypeICMP,
			Timestamp: end, Success: ok, Sent: 3, Stable: true}
		if !ok {
			o.Lost, o.ErrorType = 3, contract.ErrorTypeTimeout
		}
		for _, c := range []struct {
			e   *Engine
			out *[]observation.Verdict
		}{{e, &got}, {ref, &want}} {
			c.e.Observe([]observation.Observation{o}, end)
			for _, p := range c.e.Judge(end).Pairs {
				if p.Key == key {
					*c.out = append(*c.out, p.Summary.Verdict)
				}
			}
		}
	}
	assert.Equal(t, want, got)
	assert.Zero(t, e.Stats().RoundsTooSoon)
}
