// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package planner

import (
	"math"
	"math/bits"
	"time"
)

// stretchSteps sets the granularity of a stretched interval: BaseInterval/8.
// A coarse grid means most membership changes leave the interval, and so
// the round numbering, untouched (see Round).
const stretchSteps = 8

// stretchInterval returns base, or when probes/base would exceed budget,
// the smallest multiple of base/stretchSteps that respects it.
func stretchInterval(probes float64, base time.Duration, budget float64) time.Duration {
	if budget == 0 || probes <= budget*base.Seconds() {
		return base
	}
	step := max(base/stretchSteps, 1)
	steps := math.Ceil(probes / budget * 1e9 / float64(step))
	if steps >= float64(math.MaxInt64/int64(step)) {
		return math.MaxInt64 / step * step
	}
	iv := time.Duration(steps) * step
	for probes > budget*iv.Seconds() { // float rounding guard
		iv += step
	}
	return iv
}

// Interval returns the round length: BaseInterval, or when the probes per
// round divided by BaseInterval would exceed ProbeBudget, the smallest
// multiple of BaseInterval/8 that respects the budget. Probes per round are
// N*min(K, N-1) plus the expected number of extra cross-zone targets, so
// N*K/Interval <= ProbeBudget always holds and the extras fit on average.
func (p *Plan) Interval() time.Duration { return p.interval }

// Round returns the round containing t: floor(unix nanoseconds / Interval).
// Agents with the same plan agree on it without talking, up to clock skew.
// A change of Interval renumbers rounds. Times before 1970 map to round 0.
func (p *Plan) Round(t time.Time) uint64 {
	ns := t.UnixNano()
	if ns < 0 {
		return 0
	}
	return uint64(ns) / uint64(p.interval)
}

// Jitter returns the offset in [0, Interval) at which sourceID fires within
// each round, so agents do not probe in lockstep. It depends only on the ID,
// the seed and the interval (as a fixed fraction of it), not on membership.
func (p *Plan) Jitter(sourceID string) time.Duration {
	hi, _ := bits.Mul64(hash64(p.seed, domainJitter, sourceID), uint64(p.interval))
	return time.Duration(hi)
}

// NextProbe returns the first round whose firing time for sourceID,
// round*Interval + Jitter(sourceID), is at or after t, and that time.
// Round(at) == round always holds.
func (p *Plan) NextProbe(sourceID string, t time.Time) (round uint64, at time.Time) {
	iv := int64(p.interval)
	j := int64(p.Jitter(sourceID))
	if d := t.UnixNano() - j; d > 0 {
		round = uint64(d / iv)
		if d%iv != 0 {
			round++
		}
	}
	return round, time.Unix(0, int64(round)*iv+j)
}
