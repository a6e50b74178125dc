// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package gray

import (
	"fmt"
	"math"
	"time"
)

// LatencyConfig configures the latency judgement. Zero fields take the defaults.
type LatencyConfig struct {
	// Relative and Margin: a round's RTT (its median) is high when above
	// baseline·(1+Relative) + Margin (defaults 0.5 and 10ms: a few milliseconds of jitter
	// or a doubling of a sub-millisecond RTT is not a problem; +20 ms is).
	Relative float64
	Margin   time.Duration
	// Bound: a round's RTT above it is high whatever the baseline (default 0: off).
	Bound time.Duration
	// Rounds: the high majority must hold over this many successive evaluations, each on
	// a newer round (default 3), and be absent as long to clear.
	Rounds int
	// Warmup: samples a baseline needs before it judges (default 20).
	Warmup int
	// Memory: the baseline averages about this many samples (default 500, hours at the
	// shipped budget); a high sample moves it 20x slower, so a lasting shift is learnt in
	// hours, not adopted within a congestion.
	Memory int
}

// Defaults of LatencyConfig.
const (
	DefaultRelative      = 0.5
	DefaultMargin        = 10 * time.Millisecond
	DefaultLatencyRounds = 3
	DefaultWarmup        = 20
	DefaultMemory        = 500
)

// WithDefaults fills zero fields.
func (c LatencyConfig) WithDefaults() LatencyConfig {
	if c.Relative <= 0 {
		c.Relative = DefaultRelative
	}
	if c.Margin <= 0 {
		c.Margin = DefaultMargin
	}
	if c.Rounds <= 0 {
		c.Rounds = DefaultLatencyRounds
	}
	if c.Warmup <= 0 {
		c.Warmup = DefaultWarmup
	}
	if c.Memory <= 0 {
		c.Memory = DefaultMemory
	}
	return c
}

// Validate refuses values that cannot work, naming the key.
func (c LatencyConfig) Validate() error {
	switch {
	case c.Relative < 0 || c.Relative > 100:
		return fmt.Errorf("relative: %v out of range [0, 100]", c.Relative)
	case c.Margin < 0:
		return fmt.Errorf("margin: %v must not be negative", c.Margin)
	case c.Bound < 0:
		return fmt.Errorf("bound: %v must not be negative", c.Bound)
	case c.Rounds < 0 || c.Rounds > 100:
		return fmt.Errorf("rounds: %d out of range [0, 100]", c.Rounds)
	case c.Warmup < 0 || c.Memory < 0:
		return fmt.Errorf("warmup and memory must not be negative")
	}
	return nil
}

// Baseline is a learnt RTT: a running mean of log RTT (a geometric mean: one slow round
// does not drag it like an arithmetic mean would). 16 bytes.
type Baseline struct {
	logMean float64
	n       uint32
}

// BaselineAt is a warm baseline of rtt (a reference learnt elsewhere, e.g. the peers').
func BaselineAt(rtt time.Duration, c LatencyConfig) Baseline {
	c = c.WithDefaults()
	return Baseline{logMean: math.Log(rtt.Seconds()), n: uint32(c.Warmup)}
}

// Warm reports whether the baseline has enough samples to judge.
func (b *Baseline) Warm(c LatencyConfig) bool { return int(b.n) >= c.WithDefaults().Warmup }

// RTT is the baseline (0 when it has no samples).
func (b *Baseline) RTT() time.Duration {
	if b.n == 0 {
		return 0
	}
	return time.Duration(math.Exp(b.logMean) * 1e9)
}

// Threshold is the RTT above which a round is high.
func (b *Baseline) Threshold(c LatencyConfig) time.Duration {
	c = c.WithDefaults()
	t := time.Duration(float64(b.RTT())*(1+c.Relative)) + c.Margin
	if c.Bound > 0 {
		t = min(t, c.Bound)
	}
	return t
}

// High reports whether rtt is high against the baseline (false while it is cold, unless
// above Bound).
func (b *Baseline) High(c LatencyConfig, rtt time.Duration) bool {
	c = c.WithDefaults()
	if c.Bound > 0 && rtt > c.Bound {
		return true
	}
	return b.Warm(c) && rtt > b.Threshold(c)
}

// Learn adds a sample.
func (b *Baseline) Learn(c LatencyConfig, rtt time.Duration) {
	if rtt <= 0 {
		return
	}
	c = c.WithDefaults()
	x := math.Log(rtt.Seconds())
	w := 1 / float64(min(int(b.n)+1, c.Memory))
	if b.Warm(c) && b.High(c, rtt) {
		w /= 20
	}
	if b.n == 0 {
		b.logMean = x
	} else {
		b.logMean += w * (x - b.logMean)
	}
	if b.n < math.MaxUint32 {
		b.n++
	}
}

// Latency is the latency verdict of one target or observer with its run of evaluations.
type Latency struct {
	High  bool
	Since time.Time
	// run: successive evaluations that disagree with High (a new round each).
	run      int
	lastEval time.Time
	// Median and Baseline: the figures of the newest evaluation.
	Median, Baseline time.Duration
	// Exceeding of Voters: distinct observers (or targets) whose newest round was high.
	Exceeding, Voters int
}

// Step records one evaluation made on rounds up to newest: high says whether a majority
// was high now. A run of Rounds evaluations, each on a newer round, changes the verdict.
// It reports whether High changed.
func (c LatencyConfig) Step(l *Latency, high bool, newest, now time.Time) bool {
	c = c.WithDefaults()
	if high == l.High {
		l.run = 0
		return false
	}
	if !newest.After(l.lastEval) {
		return false // no newer round since the last counted evaluation
	}
	l.lastEval = newest
	if l.run++; l.run < c.Rounds {
		return false
	}
	l.High, l.run = high, 0
	l.Since = time.Time{}
	if high {
		l.Since = now
	}
	return true
}

// Majority reports whether exceeding of voters is a strict majority of at least two.
func Majority(exceeding, voters int) bool {
	return voters >= 2 && exceeding >= 2 && 2*exceeding > voters
}
