// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package explicitbucketsprocessor

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lightstep/go-expohisto/structure"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/netpulse/netpulse/processor/explicitbucketsprocessor/internal/metadata"
)

// receiverHistogram is the pod_probe receiver's histogram: go-expohisto, at most 160
// buckets (receiver/podprobereceiver/emit.go).
func receiverHistogram() *structure.Histogram[float64] {
	return structure.NewFloat64(structure.NewConfig(structure.WithMaxSize(160)))
}

// toPdata copies h into dp as the receiver does.
func toPdata(h *structure.Histogram[float64], dp pmetric.ExponentialHistogramDataPoint) {
	dp.SetCount(h.Count())
	dp.SetScale(h.Scale())
	dp.SetZeroCount(h.ZeroCount())
	if h.Count() > 0 {
		dp.SetSum(h.Sum())
		dp.SetMin(h.Min())
		dp.SetMax(h.Max())
	}
	pos := h.Positive()
	dp.Positive().SetOffset(pos.Offset())
	for i := uint32(0); i < pos.Len(); i++ {
		dp.Positive().BucketCounts().Append(pos.At(i))
	}
}

// exactCounts counts values into explicit buckets (b_(j-1), b_j] directly.
func exactCounts(bounds, values []float64) []uint64 {
	out := make([]uint64, len(bounds)+1)
	for _, v := range values {
		j, _ := slices.BinarySearch(bounds, v) // first bound >= v
		out[j]++
	}
	return out
}

// convertOne runs the processor on one exponential histogram point and returns the
// resulting metric.
func convertOne(t *testing.T, cfg *Config, fill func(pmetric.ExponentialHistogramDataPoint)) pmetric.Metric {
	t.Helper()
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("netpulse.probe.duration")
	m.SetUnit("s")
	m.SetDescription("d")
	eh := m.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	fill(eh.DataPoints().AppendEmpty())
	out, err := newConverter(cfg).processMetrics(context.Background(), md)
	require.NoError(t, err)
	return out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
}

// Whatever the receiver recorded, the explicit buckets hold exactly the values a direct
// count puts there: every power-of-two bound is a boundary of the exponential layout.
func TestConversionIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, perOct := range []int{1, 2, 4} {
		cfg := &Config{MinExponent: -15, MaxExponent: 3, BucketsPerOctave: perOct}
		bounds := cfg.Bounds()
		for _, spread := range []float64{0.2, 2, 8, 20, 30} { // octaves of values: a range of scales
			h := receiverHistogram()
			var values []float64
			for range 3000 {
				v := math.Exp2(-14 + spread*rng.Float64() - spread/2)
				switch rng.IntN(20) {
				case 0:
					// Exactly on a power-of-two bound: it belongs to the bucket below. (Bounds
					// 2^(k/n) that are not powers of two are irrational: their float64 is not
					// the exponential layout's boundary, and a value within one ulp of it may
					// land on either side.)
					v = bounds[perOct*rng.IntN(len(bounds)/perOct)]
				case 1:
					v = 0
				}
				values = append(values, v)
				h.Update(v)
			}
			m := convertOne(t, cfg, func(dp pmetric.ExponentialHistogramDataPoint) { toPdata(h, dp) })
			require.Equal(t, pmetric.MetricTypeHistogram, m.Type())
			dp := m.Histogram().DataPoints().At(0)
			require.Equal(t, bounds, dp.ExplicitBounds().AsRaw())
			require.Equalf(t, exactCounts(bounds, values), dp.BucketCounts().AsRaw(), "per octave %d, spread %v octaves, scale %d", perOct, spread, h.Scale())
			require.Equal(t, uint64(len(values)), dp.Count())
			require.Equal(t, h.Sum(), dp.Sum())
			require.Equal(t, h.Min(), dp.Min())
			require.Equal(t, h.Max(), dp.Max())
		}
	}
}

// The receiver's histogram keeps a scale of at least 2 for durations from 1 ns to 60 s, so
// every default conversion of its points (up to 4 bounds per octave) is exact.
func TestReceiverHistogramScaleFloor(t *testing.T) {
	h := receiverHistogram()
	for _, v := range []float64{1e-9, 60, 3e-5, 0.5} {
		h.Update(v)
	}
	require.GreaterOrEqual(t, h.Scale(), int32(2))
}

// A cumulative stream stays monotonic bucket by bucket, across the receiver's downscales:
// Prometheus never sees a false counter reset.
func TestCumulativeBucketsNeverDecrease(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := createDefaultConfig()
	h := receiverHistogram()
	var prev []uint64
	var values []float64
	scales := map[int32]bool{}
	for round := range 60 {
		spread := 0.05 + float64(round)*0.5 // the range widens: the histogram downscales
		for range 50 {
			v := 0.001 * math.Exp2(spread*(rng.Float64()-0.5))
			values = append(values, v)
			h.Update(v)
		}
		scales[h.Scale()] = true
		m := convertOne(t, cfg, func(dp pmetric.ExponentialHistogramDataPoint) { toPdata(h, dp) })
		cur := m.Histogram().DataPoints().At(0).BucketCounts().AsRaw()
		require.Equal(t, exactCounts(cfg.Bounds(), values), cur)
		for j := range prev {
			require.GreaterOrEqualf(t, cur[j], prev[j], "round %d bucket %d went down", round, j)
		}
		prev = cur
	}
	require.Greater(t, len(scales), 3, "the test must cross several downscales")
}

// Points coarser than the bounds (and out-of-range scales) put each bucket where its upper
// bound falls; zeros and negatives go below the lowest bound; values above the highest
// bound go to +Inf.
func TestCoarseScalesAndEdges(t *testing.T) {
	cfg := &Config{MinExponent: -2, MaxExponent: 2, BucketsPerOctave: 2} // bounds 2^-2, 2^-1.5, ..., 2^2
	bounds := cfg.Bounds()
	require.Len(t, bounds, 9)
	cases := []struct {
		name   string
		scale  int32
		offset int32
		counts []uint64
		want   map[int]uint64 // explicit index -> count
	}{
		// scale 0: bucket i is (2^i, 2^(i+1)]; its upper bound 2^(i+1) is bound 2*(i+1)+4.
		{"scale 0", 0, -2, []uint64{1, 2, 3}, map[int]uint64{2: 1, 4: 2, 6: 3}},
		// scale -1: bucket i is (4^i, 4^(i+1)].
		{"scale -1", -1, -1, []uint64{5, 7}, map[int]uint64{4: 5, 8: 7}},
		// far below and far above the bounds.
		{"below and above", 3, -100, []uint64{1}, map[int]uint64{0: 1}},
		{"above", 3, 100, []uint64{4}, map[int]uint64{9: 4}},
		// scale 1 = the bounds' own resolution: exact; (2^-0.5, 1] is bucket (b3, b4].
		{"exact", 1, -1, []uint64{9}, map[int]uint64{4: 9}},
		{"invalid scale far below", -40, 0, []uint64{2}, map[int]uint64{9: 2}},
		{"invalid scale far below, negative index", -40, -3, []uint64{2}, map[int]uint64{0: 2}},
		{"invalid scale far above", 90, 5, []uint64{2}, map[int]uint64{5: 2}}, // just above 1
	}
	for _, tc := range cases {
		m := convertOne(t, cfg, func(dp pmetric.ExponentialHistogramDataPoint) {
			dp.SetScale(tc.scale)
			dp.Positive().SetOffset(tc.offset)
			dp.Positive().BucketCounts().FromRaw(tc.counts)
		})
		want := make([]uint64, len(bounds)+1)
		for j, n := range tc.want {
			want[j] = n
		}
		require.Equal(t, want, m.Histogram().DataPoints().At(0).BucketCounts().AsRaw(), tc.name)
	}

	m := convertOne(t, cfg, func(dp pmetric.ExponentialHistogramDataPoint) {
		dp.SetScale(4)
		dp.SetZeroCount(3)
		dp.Negative().BucketCounts().FromRaw([]uint64{2, 1})
		dp.SetCount(6)
	})
	dp := m.Histogram().DataPoints().At(0)
	require.Equal(t, uint64(6), dp.BucketCounts().At(0))
	require.Equal(t, uint64(6), dp.Count())
	require.False(t, dp.HasSum(), "values but no sum: unknown, not 0")

	// An empty point (a target that never answered) has a sum of 0.
	m = convertOne(t, cfg, func(dp pmetric.ExponentialHistogramDataPoint) { dp.SetScale(20) })
	dp = m.Histogram().DataPoints().At(0)
	require.True(t, dp.HasSum())
	require.Zero(t, dp.Sum())
	require.Zero(t, dp.Count())
	require.Equal(t, make([]uint64, len(bounds)+1), dp.BucketCounts().AsRaw())
}

// Only the named exponential histograms change; everything a point carries is kept.
func TestOnlySelectedMetricsAndEverythingKept(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("k8s.pod.name", "p")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	sel := ms.AppendEmpty()
	sel.SetName("netpulse.probe.duration")
	sel.SetUnit("s")
	sel.SetDescription("RTT")
	sel.Metadata().PutStr("k", "v")
	eh := sel.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := eh.DataPoints().AppendEmpty()
	dp.Attributes().PutStr("destination.address", "10.0.0.1")
	dp.Attributes().PutBool("netpulse.pair.stable", true)
	dp.SetStartTimestamp(pcommon.Timestamp(10))
	dp.SetTimestamp(pcommon.Timestamp(20))
	dp.SetScale(3)
	dp.Positive().SetOffset(-80) // 2^-10 .. : (2^-10, 2^-9.875]
	dp.Positive().BucketCounts().FromRaw([]uint64{4})
	dp.SetCount(4)
	dp.SetSum(0.004)
	dp.Exemplars().AppendEmpty().SetDoubleValue(0.001)
	nodp := eh.DataPoints().AppendEmpty()
	nodp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))

	other := ms.AppendEmpty()
	other.SetName("some.other.histogram")
	other.SetEmptyExponentialHistogram().DataPoints().AppendEmpty().SetCount(1)
	g := ms.AppendEmpty()
	g.SetName("netpulse.probe.status")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)

	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Metrics = []string{"netpulse.probe.duration"}
	sink := new(consumertest.MetricsSink)
	p, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.True(t, p.Capabilities().MutatesData)
	require.NoError(t, p.ConsumeMetrics(context.Background(), md))
	out := sink.AllMetrics()[0].ResourceMetrics().At(0)
	require.Equal(t, "p", out.Resource().Attributes().AsRaw()["k8s.pod.name"])
	got := out.ScopeMetrics().At(0).Metrics()
	require.Equal(t, 3, got.Len())

	c := got.At(0)
	require.Equal(t, pmetric.MetricTypeHistogram, c.Type())
	require.Equal(t, "netpulse.probe.duration", c.Name())
	require.Equal(t, "s", c.Unit())
	require.Equal(t, "RTT", c.Description())
	require.Equal(t, map[string]any{"k": "v"}, c.Metadata().AsRaw())
	require.Equal(t, pmetric.AggregationTemporalityDelta, c.Histogram().AggregationTemporality())
	cdp := c.Histogram().DataPoints().At(0)
	require.Equal(t, map[string]any{"destination.address": "10.0.0.1", "netpulse.pair.stable": true}, cdp.Attributes().AsRaw())
	require.Equal(t, pcommon.Timestamp(10), cdp.StartTimestamp())
	require.Equal(t, pcommon.Timestamp(20), cdp.Timestamp())
	require.Equal(t, uint64(4), cdp.Count())
	require.Equal(t, 0.004, cdp.Sum())
	require.Equal(t, 1, cdp.Exemplars().Len())
	want := make([]uint64, 20)
	want[6] = 4 // (2^-10, 2^-9]: bound index -9 - (-15) = 6
	require.Equal(t, want, cdp.BucketCounts().AsRaw())
	empty := c.Histogram().DataPoints().At(1)
	require.True(t, empty.Flags().NoRecordedValue())
	require.Equal(t, 0, empty.BucketCounts().Len())

	require.Equal(t, pmetric.MetricTypeExponentialHistogram, got.At(1).Type(), "not listed: untouched")
	require.Equal(t, pmetric.MetricTypeGauge, got.At(2).Type())
}
