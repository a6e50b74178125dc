// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/pdatautil"
)

// SkipReason says why a data point of a pod_probe metric was not used. Metrics with other
// names are ignored silently: they are not skips.
type SkipReason string

// Skip reasons.
const (
	// SkipMissingSource: the Resource lacks k8s.namespace.name, k8s.pod.name or k8s.pod.uid.
	SkipMissingSource SkipReason = "missing_source"
	// SkipMissingTarget: no (string, non-empty) destination.address.
	SkipMissingTarget SkipReason = "missing_target"
	// SkipUnknownProbeType: netpulse.probe.type is absent or not icmp/tcp/http/dns.
	SkipUnknownProbeType SkipReason = "unknown_probe_type"
	// SkipInvalidValue: NaN, infinite or negative value, a ratio above 1, or a malformed
	// histogram (negative buckets, scale out of range, absurd bucket ranges or counts).
	SkipInvalidValue SkipReason = "invalid_value"
	// SkipUnsupportedType: a known metric name with an unexpected data type (for example the
	// duration as an explicit-bucket histogram).
	SkipUnsupportedType SkipReason = "unsupported_type"
	// SkipOutOfOrder: a cumulative point older than the last one seen of its stream.
	SkipOutOfOrder SkipReason = "out_of_order"
	// SkipFutureTimestamp: a point dated more than DecoderConfig.MaxFutureSkew after its
	// arrival. A clock that far ahead would also date the window; nothing of it is used.
	SkipFutureTimestamp SkipReason = "future_timestamp"
	// SkipImplausibleIncrement: a cumulative increment (echoes sent or lost, replies in the
	// duration histogram, errors) larger than the receiver could have produced since the
	// stream's previous point (DecoderConfig.MaxPerRound per round, at most one round per
	// MinRoundInterval/2), or a count that went down while its StartTimestamp stayed. The
	// point's increments are discarded and its value becomes the stream's new baseline;
	// the rest of the point (its status) is still used.
	SkipImplausibleIncrement SkipReason = "implausible_increment"
	// SkipStreamLimit: a cumulative point that would start a new stream of a source
	// already holding StreamsPerSource(DecoderConfig.StableTargetsPerSource) streams. Its increment is not used
	// (nothing is remembered for it); the rest of its round (its status) still is.
	SkipStreamLimit SkipReason = "stream_limit"
	// SkipRotatingWithoutStart: a cumulative point of a rotating pair (no
	// netpulse.pair.stable) without a StartTimestamp within FirstSightMaxAge of its
	// Timestamp. The receiver restarts a rotating pair's series every round, so a real
	// agent never sends one; no stream is remembered for it (the gateway keeps cumulative
	// state for stable pairs only) and its increment is not used; its status still is.
	SkipRotatingWithoutStart SkipReason = "rotating_without_start"
)

// DecoderConfig configures a Decoder. Zero fields take the defaults.
type DecoderConfig struct {
	// StreamTTL: Expire forgets the previous cumulative value of streams not seen for this
	// long (default 2h: longer than the pod_probe receiver's 1h series TTL, so a pair that
	// the sampling planner revisits rarely is still diffed, not re-counted from zero).
	StreamTTL time.Duration
	// FirstSightMaxAge: when > 0, a cumulative point seen for the first time whose
	// StartTimestamp is more than this before its Timestamp only sets the baseline (its
	// history is not counted as one round), and a point of a rotating pair (no
	// netpulse.pair.stable) whose StartTimestamp is within this of its Timestamp is taken
	// as that round's increment without remembering its stream: the receiver restarts a
	// rotating pair's series every round, so the gateway keeps cumulative state only for
	// stable pairs (O(N·M), not O(N²)). Set it to the longest probe interval. 0 (the
	// default of this package) treats every first sight as the delta and remembers every
	// stream, which over-counts once after a gateway restart.
	FirstSightMaxAge time.Duration
	// MaxPerRound, when > 0, bounds what one round of one stream may add: echoes sent or
	// lost, replies counted in the duration histogram, errors (the pod_probe receiver sends
	// at most icmp.count echoes per target and round). Together with MinRoundInterval it
	// makes a forged or replayed cumulative value unable to outweigh the real rounds of a
	// window (SkipImplausibleIncrement).
	MaxPerRound int
	// MinRoundInterval is the shortest probe interval of the agents (default 1s). A stream
	// earns two rounds of credit per MinRoundInterval of its own timestamps (jitter
	// tolerance), at most MaxBurstRounds, and each point spends ceil(increment/MaxPerRound).
	MinRoundInterval time.Duration
	// MaxBurstRounds caps the credit a stream can save up (default 4): a silent stream
	// cannot later deliver a window's worth of echoes in one point.
	MaxBurstRounds int
	// MaxFutureSkew, when > 0, skips points dated more than this after their arrival
	// (SkipFutureTimestamp).
	MaxFutureSkew time.Duration
	// StableTargetsPerSource is the stable targets a source may have (k8s_net_attributes'
	// max_stable_targets_per_source at the gateway; default DefaultStableTargetsPerSource,
	// < 0: unbounded), which bounds the cumulative streams remembered per source pod:
	// StreamsPerSource of them, of which at most one duration histogram per target. A point
	// that would start one more is refused and counted (SkipStreamLimit); streams already
	// remembered are never evicted for it, so a source flooding new streams keeps (and only
	// keeps) its own first ones. Derived, not fixed: a limit raised at the admission and not
	// here would drop the loss and RTT of the targets beyond it.
	StableTargetsPerSource int
}

// DefaultStreamTTL is the default DecoderConfig.StreamTTL.
const DefaultStreamTTL = 2 * time.Hour

// DefaultStableTargetsPerSource is the admission's default max_stable_targets_per_source.
const DefaultStableTargetsPerSource = 16

// StreamsPerSource is what a source may need with stableTargets stable targets (a stable
// target is an address, port and probe type): per target, sent, lost and the duration
// histogram, and an errors stream for each error type. 176 at the default 16.
func StreamsPerSource(stableTargets int) int {
	return stableTargets * (3 + len(contract.ErrorTypes))
}

// DefaultMaxStreamsPerSource is StreamsPerSource(DefaultStableTargetsPerSource).
var DefaultMaxStreamsPerSource = StreamsPerSource(DefaultStableTargetsPerSource)

func (c DecoderConfig) withDefaults() DecoderConfig {
	if c.StreamTTL <= 0 {
		c.StreamTTL = DefaultStreamTTL
	}
	if c.MinRoundInterval <= 0 {
		c.MinRoundInterval = time.Second
	}
	if c.MaxBurstRounds <= 0 {
		c.MaxBurstRounds = 4
	}
	if c.StableTargetsPerSource == 0 {
		c.StableTargetsPerSource = DefaultStableTargetsPerSource
	}
	return c
}

// DecodeResult is what one Decode call found.
type DecodeResult struct {
	// Observations, one per source pod x target (address, port) x probe type x round,
	// ordered by source, target, probe type and time.
	Observations []observation.Observation
	// Skipped counts data points of pod_probe metrics that were not used, by reason.
	Skipped map[SkipReason]int
	// Resets counts cumulative streams that restarted (new StartTimestamp or a count that
	// went down); their current value was used as the delta.
	Resets int
	// Heartbeats: the sources that said they published a round (contract.MetricRounds, sent
	// to sharded gateways), with the newest round's time.
	Heartbeats []observation.Heartbeat
}

// Decoder turns pod_probe metrics into Observations. It keeps the previous value of each
// cumulative stream (sums and the duration histogram) to turn cumulative data into the
// increments of each round. Safe for concurrent use.
type Decoder struct {
	cfg     DecoderConfig
	mu      sync.Mutex
	streams map[string]*stream
	// sources: the streams remembered per source pod.
	sources map[string]*sourceStreams
	// scratch: a stream's baseline counts while they are unpacked (stream.baseline).
	scratch []uint64
}

// sourceStreams counts one source's remembered streams.
type sourceStreams struct {
	key     string
	n, hist int // streams, of which duration histograms
}

type stream struct {
	owner     *sourceStreams
	isHist    bool
	start, ts pcommon.Timestamp
	value     float64
	// hist and histCounts: the duration histogram's previous cumulative value, its bucket
	// counts packed (observation.PackCounts: a few bytes a bucket instead of eight; one
	// such baseline per stable pair is kept for as long as the pair lives).
	hist       observation.Histogram // Counts nil
	histCounts []byte
	seen       time.Time
	// credit: rounds this stream may still report (MaxPerRound), as of ts.
	credit float64
}

// setHist makes h the stream's baseline.
func (s *stream) setHist(h *observation.Histogram) {
	s.hist, s.histCounts = withoutCounts(*h), observation.PackCounts(h.Counts)
}

func withoutCounts(h observation.Histogram) observation.Histogram {
	h.Counts = nil
	return h
}

// baseline is the stream's previous histogram, its counts unpacked into scratch.
func (s *stream) baseline(scratch *[]uint64) *observation.Histogram {
	*scratch = observation.UnpackCounts(s.histCounts, (*scratch)[:0])
	h := s.hist
	h.Counts = *scratch
	return &h
}

// NewDecoder returns a Decoder.
func NewDecoder(cfg DecoderConfig) *Decoder {
	return &Decoder{cfg: cfg.withDefaults(), streams: map[string]*stream{}, sources: map[string]*sourceStreams{}}
}

// Sources is the number of source pods with remembered streams.
func (d *Decoder) Sources() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.sources)
}

// Streams is the number of cumulative streams remembered.
func (d *Decoder) Streams() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.streams)
}

// Expire forgets streams not seen (by Decode's now) for StreamTTL; it returns how many.
// The exporter runs it on every replica (a standby decodes what agents send it too).
func (d *Decoder) Expire(now time.Time) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for k, s := range d.streams {
		if now.Sub(s.seen) > d.cfg.StreamTTL {
			delete(d.streams, k)
			d.release(s)
			n++
		}
	}
	return n
}

type metricKind int

const (
	mStatus metricKind = iota
	mLoss
	mSent
	mLost
	mErrors
	mDuration
	mPathMTU
)

var metricKinds = map[string]metricKind{
	contract.MetricStatus:      mStatus,
	contract.MetricLossRatio:   mLoss,
	contract.MetricPacketsSent: mSent,
	contract.MetricPacketsLost: mLost,
	contract.MetricErrors:      mErrors,
	contract.MetricDuration:    mDuration,
	contract.MetricPathMTU:     mPathMTU,
}

// groupKey identifies one Observation: source x target address/port x probe type x round.
type groupKey struct {
	ns, pod, uid string
	addr         string
	port         int64
	endpoint     string
	probe        string
	ts           pcommon.Timestamp
}

// point is one usable data point.
type point struct {
	kind       metricKind
	group      groupKey
	src        observation.Source
	target     observation.Target
	stream     string // cumulative streams only
	cumulative bool
	start, ts  pcommon.Timestamp
	value      float64
	hist       observation.Histogram
	errorType  string
	stable     bool   // netpulse.pair.stable
	leaving    bool   // contract.DestinationPodLeaving
	disruption string // contract.DestinationDisruption, a known value or ""
	dropped    bool   // out of order
}

// Decode decodes one batch. now is the arrival time (it dates the streams for Expire).
// Malformed data points are skipped and counted; they never stop the others.
func (d *Decoder) Decode(md pmetric.Metrics, now time.Time) DecodeResult {
	res := DecodeResult{Skipped: map[SkipReason]int{}}
	var pts []point
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		src, srcOK := sourceOf(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Name() == contract.MetricRounds && srcOK && m.Type() == pmetric.MetricTypeSum {
					res.Heartbeats = appendHeartbeat(res.Heartbeats, src, m.Sum().DataPoints())
					continue
				}
				kind, known := metricKinds[m.Name()]
				if !known {
					continue
				}
				if !srcOK {
					res.Skipped[SkipMissingSource] += pdatautil.DataPointCount(m)
					continue
				}
				pts = appendPoints(pts, m, kind, src, &res)
			}
		}
	}
	if d.cfg.MaxFutureSkew > 0 {
		limit := pcommon.NewTimestampFromTime(now.Add(d.cfg.MaxFutureSkew))
		pts = slices.DeleteFunc(pts, func(p point) bool {
			if p.ts > limit {
				res.Skipped[SkipFutureTimestamp]++
				return true
			}
			return false
		})
	}
	d.mu.Lock()
	d.diff(pts, now, &res)
	d.mu.Unlock()

	res.Observations = assemble(pts)
	return res
}

// appendHeartbeat adds src's newest round among dps.
func appendHeartbeat(hbs []observation.Heartbeat, src observation.Source, dps pmetric.NumberDataPointSlice) []observation.Heartbeat {
	var newest pcommon.Timestamp
	for i := range dps.Len() {
		newest = max(newest, dps.At(i).Timestamp())
	}
	if newest == 0 {
		return hbs
	}
	return append(hbs, observation.Heartbeat{Source: src, At: newest.AsTime()})
}

// release forgets one stream of its source (caller holds d.mu).
func (d *Decoder) release(s *stream) {
	if o := s.owner; o != nil {
		if s.isHist {
			o.hist--
		}
		if o.n--; o.n <= 0 {
			delete(d.sources, o.key)
		}
	}
}

// sourceKey identifies a source pod (as streamKey does).
func sourceKey(src *observation.Source) string {
	return strconv.Itoa(len(src.Namespace)) + ":" + src.Namespace + strconv.Itoa(len(src.Name)) + ":" + src.Name + src.UID
}

// admitStream returns the source's stream count if it may remember one more stream (a
// duration histogram when hist), else false (caller holds d.mu).
func (d *Decoder) admitStream(src *observation.Source, hist bool) (*sourceStreams, bool) {
	k := sourceKey(src)
	o := d.sources[k]
	if o == nil {
		o = &sourceStreams{key: k}
	}
	// A histogram stream holds up to maxAcceptedBuckets buckets, a counter stream one value:
	// one histogram per stable target keeps the worst case per source near what a real
	// source at the limit holds.
	if n := d.cfg.StableTargetsPerSource; n > 0 && (o.n >= StreamsPerSource(n) || hist && o.hist >= n) {
		return nil, false
	}
	if o.n == 0 {
		d.sources[k] = o
	}
	o.n++
	if hist {
		o.hist++
	}
	return o, true
}

// diff turns cumulative points into increments, in stream and time order, and updates the
// remembered streams. Caller holds d.mu.
func (d *Decoder) diff(pts []point, now time.Time, res *DecodeResult) {
	idx := make([]int, 0, len(pts))
	for i := range pts {
		if pts[i].cumulative {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := strings.Compare(pts[a].stream, pts[b].stream); c != 0 {
			return c
		}
		return cmp.Compare(pts[a].ts, pts[b].ts)
	})
	for _, i := range idx {
		p := &pts[i]
		if d.selfContained(p) {
			// This round's increment as it stands; nothing to remember. It covers the time
			// since its StartTimestamp, one round for the receiver's rotating series.
			if !d.plausible(d.firstCredit(p), p) {
				p.discard()
				res.Skipped[SkipImplausibleIncrement]++
			}
			continue
		}
		s := d.streams[p.stream]
		if s == nil && d.cfg.FirstSightMaxAge > 0 && !p.stable {
			// Not its round's own series: no real agent sends one for a rotating pair,
			// and remembering it would make the state O(pairs ever probed).
			p.discard()
			res.Skipped[SkipRotatingWithoutStart]++
			continue
		}
		if s == nil {
			owner, ok := d.admitStream(&p.src, p.kind == mDuration)
			if !ok {
				p.dropped = true
				res.Skipped[SkipStreamLimit]++
				continue
			}
			s = &stream{owner: owner, isHist: p.kind == mDuration}
			d.streams[p.stream] = s
			// A history longer than FirstSightMaxAge, or than the credit a stream can hold,
			// only sets the baseline: after a gateway restart an agent's lifetime counts
			// are not this round's.
			baselineOnly := p.start != 0 && p.ts > p.start &&
				((d.cfg.FirstSightMaxAge > 0 && p.ts.AsTime().Sub(p.start.AsTime()) > d.cfg.FirstSightMaxAge) ||
					(d.cfg.MaxPerRound > 0 && d.roundsIn(p.start, p.ts) >= float64(d.cfg.MaxBurstRounds)))
			s.start, s.ts, s.value, s.seen, s.hist, s.histCounts = p.start, p.ts, p.value, now, withoutCounts(p.hist), observation.PackCounts(p.hist.Counts)
			s.credit = d.firstCredit(p)
			switch {
			case baselineOnly:
				p.discard()
			case !d.plausible(s.credit, p):
				// A first sight with more than its history could hold: a forged or
				// replayed value, or lifetime counts without a StartTimestamp.
				p.discard()
				res.Skipped[SkipImplausibleIncrement]++
			default:
				s.credit -= d.roundsOf(p)
			}
			continue
		}
		s.seen = now
		switch {
		case p.ts < s.ts:
			p.dropped = true
			res.Skipped[SkipOutOfOrder]++
			continue
		case p.ts == s.ts && p.start == s.start:
			// A duplicate (a retried export): nothing new.
			p.value, p.hist = 0, observation.Histogram{Scale: p.hist.Scale}
			continue
		}
		restarted := p.start != s.start && p.start != 0 && s.start != 0
		credit := d.earn(s, p.ts)
		implausible := false
		if p.kind == mDuration {
			var delta observation.Histogram
			reset := restarted
			if !reset {
				delta, reset = observation.SubtractCumulative(&p.hist, s.baseline(&d.scratch))
			}
			s.setHist(&p.hist)
			switch {
			case reset && !restarted && p.start != 0:
				implausible = true // counts went down within one series
			case reset:
				res.Resets++
			default:
				p.hist = delta
			}
		} else {
			cur := p.value
			switch {
			case !restarted && cur < s.value && p.start != 0:
				implausible = true
			case restarted || cur < s.value:
				res.Resets++
			default:
				p.value = cur - s.value
			}
			s.value = cur
		}
		if restarted {
			// A new series: it may hold the rounds since its own StartTimestamp.
			credit = d.firstCredit(p)
		}
		switch {
		case implausible || !d.plausible(credit, p):
			p.discard()
			res.Skipped[SkipImplausibleIncrement]++
			s.credit = credit
		default:
			s.credit = credit - d.roundsOf(p)
		}
		s.start, s.ts = p.start, p.ts
	}
}

// discard keeps the point (its status still counts) without its increment.
func (p *point) discard() { p.value, p.hist = 0, observation.Histogram{Scale: p.hist.Scale} }

// increment is what a point adds: echoes, errors, or replies in the histogram.
func (p *point) increment() float64 {
	if p.kind == mDuration {
		return float64(p.hist.Count())
	}
	return p.value
}

// roundsOf is how many rounds a point's increment needs at MaxPerRound per round.
func (d *Decoder) roundsOf(p *point) float64 {
	if d.cfg.MaxPerRound <= 0 {
		return 0
	}
	return math.Ceil(p.increment() / float64(d.cfg.MaxPerRound))
}

// plausible reports whether credit rounds cover the point's increment.
func (d *Decoder) plausible(credit float64, p *point) bool {
	return d.cfg.MaxPerRound <= 0 || d.roundsOf(p) <= credit
}

// roundsIn is the credit earned over a span of timestamps: two rounds per
// MinRoundInterval (the receiver's rounds are at least that far apart; the factor absorbs
// jitter and batching), capped at MaxBurstRounds.
func (d *Decoder) roundsIn(from, to pcommon.Timestamp) float64 {
	r := 0.0
	if to > from {
		r = 2 * float64(to-from) / float64(d.cfg.MinRoundInterval)
	}
	return min(r, float64(d.cfg.MaxBurstRounds))
}

// firstCredit is what a series seen for the first time may hold: one round, plus the
// rounds since its StartTimestamp.
func (d *Decoder) firstCredit(p *point) float64 {
	c := 1.0
	if p.start != 0 {
		c += d.roundsIn(p.start, p.ts)
	}
	return min(c, float64(d.cfg.MaxBurstRounds))
}

// earn is the stream's credit at ts.
func (d *Decoder) earn(s *stream, ts pcommon.Timestamp) float64 {
	return min(s.credit+d.roundsIn(s.ts, ts), float64(d.cfg.MaxBurstRounds))
}

// selfContained reports whether a cumulative point of a rotating pair starts within
// FirstSightMaxAge of its own timestamp: the receiver restarted its series for this round,
// so its value is the round's increment (see DecoderConfig.FirstSightMaxAge).
func (d *Decoder) selfContained(p *point) bool {
	age := d.cfg.FirstSightMaxAge
	return age > 0 && !p.stable && p.start != 0 && p.ts >= p.start && p.ts.AsTime().Sub(p.start.AsTime()) <= age
}
