// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lightstep/go-expohisto/structure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomValues draws n positive values from one of a few RTT-like shapes.
func randomValues(rng *rand.Rand, n int) []float64 {
	vs := make([]float64, n)
	shape := rng.IntN(3)
	for i := range vs {
		switch shape {
		case 0: // tight: 300us +-10%
			vs[i] = 300e-6 * (0.9 + 0.2*rng.Float64())
		case 1: // log-uniform over 20us .. 2s
			vs[i] = 20e-6 * math.Pow(1e5, rng.Float64())
		default: // bimodal with outliers
			vs[i] = 1e-3 * (1 + rng.Float64())
			if rng.IntN(20) == 0 {
				vs[i] *= 50
			}
		}
	}
	return vs
}

func nearestRank(sorted []float64, q float64) float64 {
	k := int(math.Ceil(q * float64(len(sorted))))
	k = min(max(k, 1), len(sorted))
	return sorted[k-1]
}

func TestHistogramQuantileWithinOneBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		vs := randomValues(rng, 1+rng.IntN(400))
		h := NewHistogram(int32(rng.IntN(8)) - 1)
		for _, v := range vs {
			require.True(t, h.Record(v))
		}
		require.Equal(t, uint64(len(vs)), h.Count())
		require.LessOrEqual(t, len(h.Counts), MaxBuckets)
		sorted := slices.Clone(vs)
		slices.Sort(sorted)
		base := math.Exp2(math.Ldexp(1, -int(h.Scale)))
		prev := 0.0
		for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.9, 0.99, 1} {
			got, ok := h.Quantile(q)
			require.True(t, ok)
			want := nearestRank(sorted, q)
			if q == 0 {
				want = sorted[0]
			}
			assert.InEpsilon(t, want, got, base-1+1e-9, "iter %d q=%v scale=%d", iter, q, h.Scale)
			assert.GreaterOrEqual(t, got, prev, "quantiles are monotone")
			assert.GreaterOrEqual(t, got, h.Min)
			assert.LessOrEqual(t, got, h.Max)
			prev = got
		}
		assert.Equal(t, sorted[0], h.Min)
		assert.Equal(t, sorted[len(sorted)-1], h.Max)
	}
}

func TestHistogramMergeEqualsRecordingAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		a, b := NewHistogram(DefaultScale), NewHistogram(int32(rng.IntN(6)))
		all := NewHistogram(DefaultScale)
		for _, v := range randomValues(rng, rng.IntN(200)) {
			a.Record(v)
			all.Record(v)
		}
		for _, v := range randomValues(rng, rng.IntN(200)) {
			b.Record(v)
			all.Record(v)
		}
		m := a.Clone()
		m.Merge(&b)
		require.Equal(t, all.Count(), m.Count())
		// At the coarser of the two scales, the buckets are identical.
		x, y := m.Clone(), all.Clone()
		s := min(x.Scale, y.Scale)
		x.downscale(x.Scale - s)
		y.downscale(y.Scale - s)
		x.Trim()
		y.Trim()
		assert.Equal(t, y.Counts, x.Counts)
		assert.Equal(t, y.Offset, x.Offset)
		if all.Count() > 0 {
			assert.Equal(t, all.Min, m.Min)
			assert.Equal(t, all.Max, m.Max)
		}
		assert.LessOrEqual(t, len(m.Counts), MaxBuckets)
	}
}

func TestHistogramEdgeValues(t *testing.T) {
	h := NewHistogram(DefaultScale)
	assert.False(t, h.Record(math.NaN()))
	assert.False(t, h.Record(math.Inf(1)))
	assert.False(t, h.Record(-1))
	assert.False(t, h.Record(5e-324)) // subnormal
	_, ok := h.Quantile(0.5)
	assert.False(t, ok, "empty")
	assert.True(t, h.Record(0))
	assert.True(t, h.Record(0))
	assert.True(t, h.Record(1))
	v, _ := h.Quantile(0.5)
	assert.Equal(t, 0.0, v)
	v, _ = h.Quantile(1)
	assert.Equal(t, 1.0, v)
	assert.Equal(t, []Bucket{{Count: 2}, {Lower: bucketLower(h.Scale, h.Offset), Upper: bucketUpper(h.Scale, h.Offset), Count: 1}}, h.Buckets())
	// Bucket boundaries (here 1/16, a boundary at every scale >= -2) belong to the bucket
	// below: (base^i, base^(i+1)].
	for _, s := range []int32{-2, 0, 3, 20} {
		g := NewHistogram(s)
		g.Record(0.0625)
		lo, hi := BucketBounds(g.Scale, g.Offset)
		assert.InEpsilon(t, 0.0625, hi, 1e-12, "scale %d", s)
		assert.Less(t, lo, 0.0625)
	}
	// A huge range downscales instead of growing.
	g := NewHistogram(MaxScale)
	g.Record(1e-300)
	g.Record(1e300)
	assert.LessOrEqual(t, len(g.Counts), MaxBuckets)
	assert.Equal(t, uint64(2), g.Count())
}

func bucketLower(s, i int32) float64 { lo, _ := BucketBounds(s, i); return lo }
func bucketUpper(s, i int32) float64 { _, hi := BucketBounds(s, i); return hi }

// cumulative converts a go-expohisto histogram (what pod_probe keeps per series) into ours.
func cumulative(h *structure.Histogram[float64]) Histogram {
	out := Histogram{Scale: h.Scale(), ZeroCount: h.ZeroCount(), Offset: h.Positive().Offset()}
	for i := uint32(0); i < h.Positive().Len(); i++ {
		out.Counts = append(out.Counts, h.Positive().At(i))
	}
	if h.Count() > 0 {
		out.Min, out.Max = h.Min(), h.Max()
	}
	return out
}

// The difference of two snapshots of a cumulative histogram is the histogram of the values
// recorded in between, also when the cumulative histogram changed scale.
func TestSubtractCumulativeIsTheRound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 200 {
		cum := structure.NewFloat64(structure.NewConfig(structure.WithMaxSize(160)))
		var prev Histogram
		for round := range 8 {
			vs := randomValues(rng, rng.IntN(30))
			if round == 5 {
				vs = append(vs, 1e-6, 5) // widen the range: forces a downscale
			}
			for _, v := range vs {
				cum.Update(v)
			}
			cur := cumulative(cum)
			delta, reset := SubtractCumulative(&cur, &prev)
			require.False(t, reset, "iter %d round %d", iter, round)
			require.Equal(t, uint64(len(vs)), delta.Count(), "iter %d round %d", iter, round)
			if len(vs) > 0 {
				sorted := slices.Clone(vs)
				slices.Sort(sorted)
				assert.LessOrEqual(t, delta.Min, sorted[0]*(1+1e-12))
				assert.GreaterOrEqual(t, delta.Max, sorted[len(sorted)-1]*(1-1e-12))
				// The delta's buckets hold exactly this round's values.
				want := NewHistogram(delta.Scale)
				for _, v := range vs {
					want.Record(v)
				}
				want.downscale(want.Scale - delta.Scale)
				assert.Equal(t, want.Counts, delta.Counts, "iter %d round %d", iter, round)
			}
			prev = cur
		}
	}
}

func TestSubtractCumulativeDetectsReset(t *testing.T) {
	a := NewHistogram(DefaultScale)
	for range 10 {
		a.Record(1e-3)
	}
	b := NewHistogram(DefaultScale)
	b.Record(1e-3)
	d, reset := SubtractCumulative(&b, &a)
	assert.True(t, reset)
	assert.Equal(t, uint64(1), d.Count())
	// Zero counts going down also reset.
	z1, z2 := NewHistogram(0), NewHistogram(0)
	z1.Record(0)
	z1.Record(0)
	z2.Record(0)
	_, reset = SubtractCumulative(&z2, &z1)
	assert.True(t, reset)
	// Identical snapshots: empty delta.
	d, reset = SubtractCumulative(&a, &a)
	assert.False(t, reset)
	assert.True(t, d.IsEmpty())
}
