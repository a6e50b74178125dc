// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package explicitbucketsprocessor // import "github.com/netpulse/netpulse/processor/explicitbucketsprocessor"

import (
	"errors"
	"fmt"
	"math"

	"go.opentelemetry.io/collector/component"
)

// Config of the explicit_buckets processor.
type Config struct {
	// Metrics names the exponential histograms to convert; empty converts every one.
	Metrics []string `mapstructure:"metrics"`
	// MinExponent and MaxExponent give the lowest and the highest bound as powers of two,
	// in the metric's unit: the defaults -15 and 3 are 2^-15 s ≈ 30.5 µs and 2^3 s = 8 s.
	MinExponent int `mapstructure:"min_exponent"`
	MaxExponent int `mapstructure:"max_exponent"`
	// BucketsPerOctave: the bounds are 2^(k/n) for n = 1 (the default: each bucket twice as
	// wide as the one below), 2, 4 or 8. The conversion is exact for points of scale >=
	// log2(n); a point of a coarser scale has each bucket counted in the explicit bucket
	// holding its upper bound.
	BucketsPerOctave int `mapstructure:"buckets_per_octave"`
}

var _ component.Config = (*Config)(nil)

// Defaults: 19 bounds, 30.5 µs .. 8 s, 20 buckets with +Inf.
const (
	defaultMinExponent      = -15
	defaultMaxExponent      = 3
	defaultBucketsPerOctave = 1
	// maxBounds bounds the series a converted histogram costs per stream.
	maxBounds = 64
	// exponentLimit keeps every bound a normal float64 far from overflow.
	exponentLimit = 64
)

func createDefaultConfig() *Config {
	return &Config{MinExponent: defaultMinExponent, MaxExponent: defaultMaxExponent, BucketsPerOctave: defaultBucketsPerOctave}
}

// Validate checks the bounds.
func (c *Config) Validate() error {
	var errs []error
	switch c.BucketsPerOctave {
	case 1, 2, 4, 8:
	default:
		errs = append(errs, fmt.Errorf("buckets_per_octave: %d, must be 1, 2, 4 or 8", c.BucketsPerOctave))
	}
	if c.MinExponent < -exponentLimit || c.MaxExponent > exponentLimit {
		errs = append(errs, fmt.Errorf("min_exponent %d and max_exponent %d must lie within -%d..%d", c.MinExponent, c.MaxExponent, exponentLimit, exponentLimit))
	}
	if c.MinExponent >= c.MaxExponent {
		errs = append(errs, fmt.Errorf("min_exponent (%d) must be below max_exponent (%d)", c.MinExponent, c.MaxExponent))
	} else if n := c.boundCount(); c.BucketsPerOctave > 0 && n > maxBounds {
		errs = append(errs, fmt.Errorf("%d bounds (max_exponent - min_exponent) * buckets_per_octave + 1; at most %d (every bound is a series per histogram stream)", n, maxBounds))
	}
	seen := map[string]bool{}
	for _, m := range c.Metrics {
		if m == "" {
			errs = append(errs, errors.New("metrics: empty name"))
		} else if seen[m] {
			errs = append(errs, fmt.Errorf("metrics: %q listed twice", m))
		}
		seen[m] = true
	}
	return errors.Join(errs...)
}

func (c *Config) boundCount() int {
	return (c.MaxExponent-c.MinExponent)*c.BucketsPerOctave + 1
}

// Bounds returns the explicit bounds: 2^(MinExponent + k/BucketsPerOctave), k = 0 ..
// (MaxExponent-MinExponent)*BucketsPerOctave.
func (c *Config) Bounds() []float64 {
	n := c.boundCount()
	out := make([]float64, n)
	for k := range n {
		out[k] = math.Exp2(float64(c.MinExponent) + float64(k)/float64(c.BucketsPerOctave))
	}
	return out
}
