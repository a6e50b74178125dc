// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"math"
	"sync"

	"github.com/lightstep/go-expohisto/mapping"
	"github.com/lightstep/go-expohisto/mapping/exponent"
	"github.com/lightstep/go-expohisto/mapping/logarithm"
)

// Scale limits of OTLP exponential histograms.
const (
	MinScale int32 = -10
	MaxScale int32 = 20
)

// MaxBuckets bounds the positive buckets of every Histogram this package builds (the same
// bound as the pod_probe receiver's histograms): Record and Merge downscale to stay within
// it, so a window histogram never grows beyond ~1.3 KB however many samples it holds.
const MaxBuckets = 160

// DefaultScale is the scale NewHistogram callers typically use for RTTs: 2^(1/32) wide
// buckets, a relative error of at most ~2.2%.
const DefaultScale int32 = 5

// Histogram is a base-2 exponential histogram of non-negative values (seconds), with the
// bucket layout of OTLP's ExponentialHistogram, positive range only: at scale s the bucket
// with index i holds the values in (base^i, base^(i+1)], base = 2^(2^-s); ZeroCount holds
// the zeros. Counts[j] is the count of bucket Offset+j.
//
// It is how the Decoder hands over the samples of one probe round (the difference of two
// cumulative histograms) and how the Summarizer keeps a window's samples. The zero value is
// an empty histogram at scale 0; NewHistogram picks a scale for Record.
//
// Own code over go-expohisto's mapping (value -> index): the library's structure.Histogram
// cannot be loaded from OTLP bucket counts (it has no per-index increment), subtracted
// (cumulative -> per-round) or copied as a plain value across stages (ring-buffer storage);
// the tests feed SubtractCumulative from it, as pod_probe keeps its series.
type Histogram struct {
	Scale     int32
	ZeroCount uint64
	Offset    int32
	Counts    []uint64
	// Min and Max bound the values (exact when known, else the bounds of the lowest and
	// highest non-empty bucket). Meaningful only when Count() > 0.
	Min, Max float64
}

// Bucket is one non-empty bucket: Count values in (Lower, Upper]; the zero bucket has
// Lower == Upper == 0.
type Bucket struct {
	Lower, Upper float64
	Count        uint64
}

// NewHistogram returns an empty histogram that Record fills at the given scale (clamped to
// [MinScale, MaxScale]); Record and Merge lower the scale when the values span more than
// MaxBuckets buckets.
func NewHistogram(scale int32) Histogram {
	return Histogram{Scale: min(max(scale, MinScale), MaxScale)}
}

// Count is the number of values.
func (h *Histogram) Count() uint64 {
	n := h.ZeroCount
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// IsEmpty reports whether the histogram holds no values.
func (h *Histogram) IsEmpty() bool { return h.Count() == 0 }

// Clone returns a deep copy.
func (h *Histogram) Clone() Histogram {
	c := *h
	if h.Counts != nil {
		c.Counts = append([]uint64(nil), h.Counts...)
	}
	return c
}

// Buckets lists the non-empty buckets in increasing order, the zero bucket first.
func (h *Histogram) Buckets() []Bucket {
	var out []Bucket
	if h.ZeroCount > 0 {
		out = append(out, Bucket{Count: h.ZeroCount})
	}
	for j, c := range h.Counts {
		if c == 0 {
			continue
		}
		lo, hi := BucketBounds(h.Scale, h.Offset+int32(j))
		out = append(out, Bucket{Lower: lo, Upper: hi, Count: c})
	}
	return out
}

var mappings sync.Map // int32 -> mapping.Mapping

func mappingFor(scale int32) mapping.Mapping {
	if m, ok := mappings.Load(scale); ok {
		return m.(mapping.Mapping)
	}
	var m mapping.Mapping
	var err error
	if scale > 0 {
		m, err = logarithm.NewMapping(scale)
	} else {
		m, err = exponent.NewMapping(scale)
	}
	if err != nil { // unreachable: callers clamp the scale
		panic(err)
	}
	mappings.Store(scale, m)
	return m
}

// bucketBounds returns the bounds (lower, upper] of bucket index at scale.
func BucketBounds(scale, index int32) (float64, float64) {
	w := math.Ldexp(1, -int(scale)) // octaves per bucket
	return math.Exp2(float64(index) * w), math.Exp2(float64(index+1) * w)
}

// Record adds one value; NaN, infinities, negative values and values too small to map
// (subnormal) are ignored and reported as false.
func (h *Histogram) Record(v float64) bool {
	return h.RecordN(v, 1)
}

// RecordN adds n copies of one value (see Record).
func (h *Histogram) RecordN(v float64, n uint64) bool {
	if n == 0 || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (v > 0 && v < 0x1p-1022) {
		return false
	}
	h.Scale = min(max(h.Scale, MinScale), MaxScale)
	empty := h.Count() == 0
	if v == 0 {
		h.ZeroCount += n
	} else {
		idx := mappingFor(h.Scale).MapToIndex(v)
		lo, hi := idx, idx
		if len(h.Counts) > 0 {
			lo, hi = min(lo, h.Offset), max(hi, h.Offset+int32(len(h.Counts))-1)
		}
		if d := scaleReduction(lo, hi, MaxBuckets); d > 0 {
			h.downscale(d)
			idx = mappingFor(h.Scale).MapToIndex(v)
		}
		h.add(idx, n)
	}
	if empty {
		h.Min, h.Max = v, v
	} else {
		h.Min, h.Max = min(h.Min, v), max(h.Max, v)
	}
	return true
}

// scaleReduction returns by how much the scale must drop for indexes lo..hi to fit size
// buckets.
func scaleReduction(lo, hi int32, size int) int32 {
	var d int32
	for int64(hi>>d)-int64(lo>>d)+1 > int64(size) {
		d++
	}
	return d
}

// add adds n to bucket idx, growing Counts as needed.
func (h *Histogram) add(idx int32, n uint64) {
	if len(h.Counts) == 0 {
		h.Offset = idx
		h.Counts = append(h.Counts[:0], n)
		return
	}
	if idx < h.Offset {
		grow := int(h.Offset - idx)
		counts := make([]uint64, grow+len(h.Counts))
		copy(counts[grow:], h.Counts)
		h.Counts, h.Offset = counts, idx
	}
	j := int(idx - h.Offset)
	for j >= len(h.Counts) {
		h.Counts = append(h.Counts, 0)
	}
	h.Counts[j] += n
}

// downscale lowers the scale by d (merging 2^d neighbouring buckets into one).
func (h *Histogram) downscale(d int32) {
	if d <= 0 {
		return
	}
	if h.Scale-d < MinScale {
		d = h.Scale - MinScale
	}
	h.Scale -= d
	if len(h.Counts) == 0 {
		return
	}
	first := h.Offset >> d
	last := (h.Offset + int32(len(h.Counts)) - 1) >> d
	counts := make([]uint64, last-first+1)
	for j, c := range h.Counts {
		counts[((h.Offset+int32(j))>>d)-first] += c
	}
	h.Counts, h.Offset = counts, first
}

// Trim drops empty buckets at both ends.
func (h *Histogram) Trim() {
	i, j := 0, len(h.Counts)
	for i < j && h.Counts[i] == 0 {
		i++
	}
	for j > i && h.Counts[j-1] == 0 {
		j--
	}
	if i == j {
		h.Counts, h.Offset = nil, 0
		return
	}
	h.Counts, h.Offset = h.Counts[i:j], h.Offset+int32(i)
}

// Merge adds o's values to h, at the finer scale both can represent within MaxBuckets.
func (h *Histogram) Merge(o *Histogram) {
	if o.Count() == 0 {
		return
	}
	if h.Count() == 0 {
		*h = o.Clone()
		return
	}
	scale := min(h.Scale, o.Scale)
	lo, hi, ok := int32(0), int32(0), false
	span := func(x *Histogram) {
		if len(x.Counts) == 0 {
			return
		}
		d := x.Scale - scale
		a, b := x.Offset>>d, (x.Offset+int32(len(x.Counts))-1)>>d
		if !ok {
			lo, hi, ok = a, b, true
			return
		}
		lo, hi = min(lo, a), max(hi, b)
	}
	span(h)
	span(o)
	if ok {
		scale -= scaleReduction(lo, hi, MaxBuckets)
	}
	h.downscale(h.Scale - scale)
	oc := o.Clone()
	oc.downscale(oc.Scale - scale)
	h.ZeroCount += oc.ZeroCount
	for j, c := range oc.Counts {
		if c > 0 {
			h.add(oc.Offset+int32(j), c)
		}
	}
	h.Min, h.Max = min(h.Min, o.Min), max(h.Max, o.Max)
}

// Quantile estimates the q-quantile (0 <= q <= 1) as the nearest-rank value: the k-th
// smallest value, k = ceil(q*n), located in its bucket and interpolated log-linearly
// within it, then clamped to [Min, Max]. The estimate is in the same bucket as the exact
// value, so the relative error is below the bucket width (2^(2^-scale) - 1). q <= 0 returns
// Min, q >= 1 Max. ok is false when the histogram is empty.
func (h *Histogram) Quantile(q float64) (v float64, ok bool) {
	n := h.Count()
	if n == 0 {
		return 0, false
	}
	switch {
	case math.IsNaN(q):
		return 0, false
	case q <= 0:
		return h.Min, true
	case q >= 1:
		return h.Max, true
	}
	k := uint64(math.Ceil(q * float64(n)))
	k = min(max(k, 1), n)
	cum := h.ZeroCount
	if k <= cum {
		return max(0, h.Min), true
	}
	for j, c := range h.Counts {
		if c == 0 {
			continue
		}
		if cum+c >= k {
			lo, hi := BucketBounds(h.Scale, h.Offset+int32(j))
			f := (float64(k-cum) - 0.5) / float64(c)
			v = lo * math.Pow(hi/lo, f)
			return min(max(v, h.Min), h.Max), true
		}
		cum += c
	}
	return h.Max, true
}

// subtractCumulative returns cur - prev for two snapshots of one cumulative histogram (a
// scale change is handled by comparing at the coarser scale). reset is true when any count
// went down: the series restarted and cur itself is the delta.
func SubtractCumulative(cur, prev *Histogram) (delta Histogram, reset bool) {
	scale := min(cur.Scale, prev.Scale)
	c, p := cur.Clone(), prev.Clone()
	c.downscale(c.Scale - scale)
	p.downscale(p.Scale - scale)
	if c.ZeroCount < p.ZeroCount {
		return cur.Clone(), true
	}
	delta = Histogram{Scale: scale, ZeroCount: c.ZeroCount - p.ZeroCount, Offset: c.Offset}
	delta.Counts = append([]uint64(nil), c.Counts...)
	for j, pc := range p.Counts {
		if pc == 0 {
			continue
		}
		idx := p.Offset + int32(j)
		k := int(idx - c.Offset)
		if idx < c.Offset || k >= len(c.Counts) || c.Counts[k] < pc {
			return cur.Clone(), true
		}
		delta.Counts[k] -= pc
	}
	delta.Trim()
	if delta.Count() == 0 {
		return Histogram{Scale: scale}, false
	}
	// Bounds of the round's values: a new extreme of the cumulative histogram happened in
	// this round (exact); otherwise the delta's outermost buckets bound them.
	lo, hi := delta.BucketRange()
	if prev.Count() == 0 || cur.Max > prev.Max {
		delta.Max = cur.Max
	} else {
		delta.Max = min(hi, cur.Max)
	}
	if prev.Count() == 0 || cur.Min < prev.Min {
		delta.Min = cur.Min
	} else {
		delta.Min = max(lo, cur.Min)
	}
	if delta.Min > delta.Max {
		delta.Min, delta.Max = lo, hi
	}
	return delta, false
}

// BucketRange returns the lower bound of the lowest and the upper bound of the highest
// non-empty bucket (0 for the zero bucket).
func (h *Histogram) BucketRange() (lo, hi float64) {
	if h.ZeroCount == 0 && len(h.Counts) > 0 {
		lo, _ = BucketBounds(h.Scale, h.Offset)
	}
	if len(h.Counts) > 0 {
		_, hi = BucketBounds(h.Scale, h.Offset+int32(len(h.Counts))-1)
	}
	return lo, hi
}
