// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package explicitbucketsprocessor // import "github.com/netpulse/netpulse/processor/explicitbucketsprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// converter turns exponential histograms into explicit-bucket histograms.
//
// The explicit bounds are b_k = 2^(m + k/n) (m = MinExponent, n = BucketsPerOctave). An
// exponential bucket i of scale s holds the values in (2^(i/2^s), 2^((i+1)/2^s)]; its upper
// bound lies in explicit bucket j = ceil(n*(i+1)/2^s) - n*m, which covers (b_(j-1), b_j]
// (j = 0 is everything up to b_0, j = len(bounds) is +Inf). When 2^s >= n every explicit
// bound is also an exponential bucket boundary, so the whole bucket lies in explicit
// bucket j: the conversion is exact, in integer arithmetic, and as the source histogram
// only ever merges buckets (a lower scale keeps the power-of-two boundaries), a cumulative
// explicit bucket never goes down.
type converter struct {
	names  map[string]bool // nil: every exponential histogram
	bounds []float64
	minExp int64
	perOct int64
}

func newConverter(cfg *Config) *converter {
	c := &converter{bounds: cfg.Bounds(), minExp: int64(cfg.MinExponent), perOct: int64(cfg.BucketsPerOctave)}
	if len(cfg.Metrics) > 0 {
		c.names = map[string]bool{}
		for _, n := range cfg.Metrics {
			c.names[n] = true
		}
	}
	return c
}

func (c *converter) processMetrics(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Type() == pmetric.MetricTypeExponentialHistogram && (c.names == nil || c.names[m.Name()]) {
					c.convert(m)
				}
			}
		}
	}
	return md, nil
}

// convert replaces the exponential histogram of m by an explicit-bucket histogram with the
// same name, description, unit, metadata, temporality and data points.
func (c *converter) convert(m pmetric.Metric) {
	eh := m.ExponentialHistogram()
	h := pmetric.NewHistogram()
	h.SetAggregationTemporality(eh.AggregationTemporality())
	dps := eh.DataPoints()
	out := h.DataPoints()
	out.EnsureCapacity(dps.Len())
	counts := make([]uint64, len(c.bounds)+1)
	for i := 0; i < dps.Len(); i++ {
		src := dps.At(i)
		dst := out.AppendEmpty()
		src.Attributes().MoveTo(dst.Attributes())
		dst.SetStartTimestamp(src.StartTimestamp())
		dst.SetTimestamp(src.Timestamp())
		dst.SetFlags(src.Flags())
		src.Exemplars().MoveAndAppendTo(dst.Exemplars())
		if src.HasSum() {
			dst.SetSum(src.Sum())
		}
		if src.HasMin() {
			dst.SetMin(src.Min())
		}
		if src.HasMax() {
			dst.SetMax(src.Max())
		}
		clear(counts)
		total := c.bucketCounts(src, counts)
		dst.SetCount(total)
		if total == 0 && !src.HasSum() {
			// The sum of no values: without it a remote-write backend gets no _sum series
			// for a stream that has only failed so far, while a scrape shows one.
			dst.SetSum(0)
		}
		if src.Flags().NoRecordedValue() {
			continue // no value: no buckets
		}
		dst.ExplicitBounds().FromRaw(c.bounds)
		dst.BucketCounts().FromRaw(counts)
	}
	h.MoveTo(m.SetEmptyHistogram())
}

// bucketCounts adds the point's counts into counts (len(bounds)+1) and returns their total.
// Zeros and negative values (a duration has none) belong below the lowest bound.
func (c *converter) bucketCounts(dp pmetric.ExponentialHistogramDataPoint, counts []uint64) uint64 {
	total := dp.ZeroCount()
	counts[0] += dp.ZeroCount()
	neg := dp.Negative().BucketCounts()
	for i := 0; i < neg.Len(); i++ {
		counts[0] += neg.At(i)
		total += neg.At(i)
	}
	pos := dp.Positive()
	pc := pos.BucketCounts()
	scale := int64(dp.Scale())
	for i := 0; i < pc.Len(); i++ {
		n := pc.At(i)
		if n == 0 {
			continue
		}
		counts[c.explicitIndex(scale, int64(pos.Offset())+int64(i))] += n
		total += n
	}
	return total
}

// explicitIndex returns the explicit bucket holding the upper bound 2^((i+1)/2^scale) of
// exponential bucket i.
func (c *converter) explicitIndex(scale, i int64) int {
	last := int64(len(c.bounds)) // the +Inf bucket
	var j int64
	switch {
	case scale >= 0:
		// ceil(n*(i+1) / 2^scale), with an arithmetic shift (floor) of the negation.
		j = -((-c.perOct * (i + 1)) >> min(scale, 63)) - c.perOct*c.minExp
	case scale >= -20:
		// Buckets of 2^-scale octaves: the upper exponent is an integer.
		j = c.perOct*((i+1)<<(-scale)) - c.perOct*c.minExp
	case i+1 > 0: // beyond any valid scale: the upper bound is astronomically large or small
		j = last
	default:
		j = 0
	}
	return int(min(max(j, 0), last))
}
