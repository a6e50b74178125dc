// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/contract"
)

// SummaryConfig configures a Summarizer. Zero fields take the defaults.
type SummaryConfig struct {
	// Window is how far back the figures (quantiles, loss, per-probe results, observers)
	// look, from the pair's newest observation (default 5m).
	Window time.Duration
	// Slots divides the window into this many time slots (default 10, at most 120): the
	// figures cover the slots of the last Window, i.e. between Window-Window/Slots and
	// Window of observations. Memory per pair is bounded by Slots, not by the probe rate.
	Slots int
	// FailuresToUnreachable consecutive failed rounds make a pair Unreachable (default 3).
	FailuresToUnreachable int
	// SuccessesToReachable consecutive successful rounds make an Unreachable pair
	// Reachable again (default 2).
	SuccessesToReachable int
	// MaxOutages is the length of the outage history, newest first (default 20, the API's
	// bound).
	MaxOutages int
	// FlapWindow (0: off): a pair that fails again within it of recovering reopens its
	// previous outage (counted in Outage.Flaps) instead of starting a new one, and a reopened
	// outage ends only once the pair has answered for FlapWindow without a break (flap
	// damping): a flapping link is one outage, a few writes and Events, not two per cycle.
	FlapWindow time.Duration
}

// Defaults of SummaryConfig.
const (
	DefaultWindow                = 5 * time.Minute
	DefaultSlots                 = 10
	DefaultFailuresToUnreachable = 3
	DefaultSuccessesToReachable  = 2
	DefaultMaxOutages            = v1alpha1.MaxOutages
)

// maxObserversPerSlot bounds the distinct observers remembered per slot.
const maxObserversPerSlot = 8

// maxMessage is the API's bound on messages (characters).
const maxMessage = v1alpha1.MaxMessageLength

func (c SummaryConfig) withDefaults() SummaryConfig {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Slots <= 0 {
		c.Slots = DefaultSlots
	}
	c.Slots = min(c.Slots, 120)
	if c.FailuresToUnreachable <= 0 {
		c.FailuresToUnreachable = DefaultFailuresToUnreachable
	}
	if c.SuccessesToReachable <= 0 {
		c.SuccessesToReachable = DefaultSuccessesToReachable
	}
	if c.MaxOutages <= 0 {
		c.MaxOutages = DefaultMaxOutages
	}
	return c
}

// SummaryStats counts what the Summarizer did not use.
type SummaryStats struct {
	Pairs int
	// Ignored: observations without a usable pair key, probe type or timestamp.
	Ignored uint64
	// Late: observations older than the pair's newest round: they count towards the window
	// figures (when still inside the window) but not towards the verdict.
	Late uint64
}

// Summarizer keeps per-pair state: the verdict with hysteresis, the outage history and a
// sliding window of figures. Safe for concurrent use.
type Summarizer struct {
	cfg     SummaryConfig
	slotW   time.Duration
	mu      sync.Mutex
	pairs   map[observation.PairKey]*pairState
	pending map[observation.PairKey]*observation.Transition
	gen     uint64 // Transitions calls
	ignored uint64
	late    uint64
	// runFloor, when set, is the run of failed rounds the pair's target needs before its
	// failures are more than its random loss (Engine.partialRunOf): a rotating pair visited
	// a few times has too few echoes of its own to tell.
	runFloor func(observation.PairKey) int
	// scratch: a slot histogram's counts while they are unpacked (slotHist; caller holds mu).
	scratch []uint64
}

// NewSummarizer returns a Summarizer.
func NewSummarizer(cfg SummaryConfig) *Summarizer {
	cfg = cfg.withDefaults()
	w := max(cfg.Window/time.Duration(cfg.Slots), time.Millisecond)
	return &Summarizer{cfg: cfg, slotW: w, pairs: map[observation.PairKey]*pairState{}, pending: map[observation.PairKey]*observation.Transition{}}
}

// SummaryConfig returns the effective configuration.
func (s *Summarizer) Config() SummaryConfig { return s.cfg }

// machine is the verdict state machine of a pair.
type machine struct {
	verdict                observation.Verdict
	since                  time.Time
	consecFail, consecSucc int
	failStart, succStart   time.Time
	failErrorType          string
	// runEchoes: ICMP echoes sent in the current run of failed rounds (all lost).
	runEchoes uint64
}

type probeAgg struct {
	probes, failures, sent, lost uint64
	// okSent, okLost: echoes of the answered rounds (partialRun).
	okSent, okLost uint64
	hist           slotHist
}

// slotProbe is one probe type's aggregate in a slot.
type slotProbe struct {
	typ int8 // observation.ProbeIndex
	probeAgg
}

type observer struct{ uid, node string }

// slot is one time slot of a pair's window. Memory per pair is what bounds the gateway at
// scale (docs/figures.md, Gateway ingest), so a slot holds only the probe types it saw
// (most pairs see one), and its RTT histograms packed (slotHist).
type slot struct {
	id          int64
	used        bool
	first, last time.Time
	rounds      int32
	failed      int32
	probes      []slotProbe
	observers   []observer
}

// probe returns the slot's aggregate of probe type i (ProbeIndex), or nil.
func (sl *slot) probe(i int) *probeAgg {
	for j := range sl.probes {
		if int(sl.probes[j].typ) == i {
			return &sl.probes[j].probeAgg
		}
	}
	return nil
}

// probeFor returns the slot's aggregate of probe type i, adding it when new.
func (sl *slot) probeFor(i int) *probeAgg {
	if a := sl.probe(i); a != nil {
		return a
	}
	if sl.probes == nil {
		sl.probes = make([]slotProbe, 0, 1)
	}
	sl.probes = append(sl.probes, slotProbe{typ: int8(i)})
	return &sl.probes[len(sl.probes)-1].probeAgg
}

// slotHist is a slot's RTT histogram with its bucket counts packed as uvarints
// (observation.PackCounts: one byte for a count below 128; a 30 s slot of 1 s rounds holds
// ~100 echoes over as many buckets), ~8x smaller than []uint64 with its append slack. Each
// round unpacks it into the Summarizer's scratch, merges and packs it again: a
// microsecond for the ~100 buckets, against ~1 KB a pair kept otherwise.
type slotHist struct {
	h      observation.Histogram // Counts is nil while sealed
	packed []byte
}

func (w *slotHist) sealed() bool { return w.packed != nil }

// merge adds o's values; scratch (reused across calls) holds the unpacked counts meanwhile.
func (w *slotHist) merge(o *observation.Histogram, scratch *[]uint64) {
	if w.sealed() {
		*scratch = observation.UnpackCounts(w.packed, (*scratch)[:0])
		w.h.Counts, w.packed = *scratch, nil
	}
	w.h.Merge(o)
	if cap(w.h.Counts) > cap(*scratch) {
		*scratch = w.h.Counts[:0] // grown: reuse the larger array (seal drops w's reference)
	}
	w.seal()
}

// seal packs the bucket counts; a histogram without buckets stays as it is.
func (w *slotHist) seal() {
	if w.sealed() {
		return
	}
	w.h.Trim()
	if len(w.h.Counts) == 0 {
		return
	}
	w.h.Counts, w.packed = nil, observation.PackCounts(w.h.Counts)
}

// mergeInto adds the values to dst; scratch (reused across calls) holds unpacked counts.
func (w *slotHist) mergeInto(dst *observation.Histogram, scratch *[]uint64) {
	if !w.sealed() {
		dst.Merge(&w.h)
		return
	}
	*scratch = observation.UnpackCounts(w.packed, (*scratch)[:0])
	h := w.h
	h.Counts = *scratch
	dst.Merge(&h) // copies what it keeps
}

type probeLast struct {
	success time.Time
	failure *observation.Failure
}

// undoState is the state before the newest round, kept while that round failed: if more
// observations of the same round arrive and one succeeded, the round is re-evaluated.
type undoState struct {
	m       machine
	outages []observation.Outage
	pend    observation.Transition
	hadPend bool
	gen     uint64 // Summarizer.gen when saved
}

type pairState struct {
	key          observation.PairKey
	source       observation.Source
	target       observation.Target
	m            machine
	hasRound     bool
	lastRound    time.Time
	lastRoundOK  bool
	undo         *undoState
	ring         []slot
	newest       int64
	hasSlots     bool
	last         [observation.NumProbeTypes]probeLast
	lastObserved time.Time
	// seededAt: when Seed created the pair (a takeover). Idle expiry counts from the
	// newer of it and lastObserved: a healthy pair's persisted lastObserved may be a
	// heartbeat old, and must not expire before its observer's next round arrives.
	seededAt time.Time
	outages  []observation.Outage
	// mtu: the path-MTU probes' run of black holes (2 in a row make MTUBlackHole).
	mtuHoles  int
	mtuPasses int
	mtuSince  time.Time
	mtuLast   time.Time
}

// mtuHolesToReport: black-hole probes in a row before the pair reads MTUBlackHole (one
// lost burst of large echoes is not a black hole), on a pair that loses no ordinary echoes
// (mtuHolesNeeded). mtuMaxHoles caps the run counted.
const (
	mtuHolesToReport = 2
	mtuMaxHoles      = 64
	// mtuLargeEchoes and icmpRoundEchoes: the receiver's default echoes per path-MTU size
	// (icmp::path_mtu::count) and per ICMP round (icmp::count).
	mtuLargeEchoes  = 2
	icmpRoundEchoes = 3
)

// mtuHolesNeeded is how many black-hole probes in a row make the pair read MTUBlackHole:
// mtuHolesToReport, or more on a pair that loses its ordinary echoes at random, so that
// every large echo of that many probes lost by chance is as unlikely as the run random
// loss needs to read as an outage (gray.RunLength, 1e-8, at the upper bound of the
// window's echo loss). Found end to end: a node losing half of its input read
// MTUBlackHole on a pair (both large echoes of a probe lost 1 time in 4, the small ones
// answered). A healthy pair keeps 2 (caller holds mu).
func (s *Summarizer) mtuHolesNeeded(p *pairState) int {
	lost, sent, _ := s.answeredICMP(p)
	return max(mtuHolesToReport, gray.RunLength(gray.RunLossUpper(lost, sent, icmpRoundEchoes), mtuLargeEchoes))
}

// answeredICMP sums the ICMP echoes of the pair's answered rounds in its window (lost of
// sent), and the echoes per round of all its ICMP rounds (0 when none) (caller holds mu).
func (s *Summarizer) answeredICMP(p *pairState) (lost, sent uint64, perRound float64) {
	i := observation.ProbeIndex(contract.ProbeTypeICMP)
	var probes, all uint64
	n := int64(s.cfg.Slots)
	for j := range p.ring {
		sl := &p.ring[j]
		if !sl.used || sl.id <= p.newest-n {
			continue
		}
		if a := sl.probe(i); a != nil {
			sent += a.okSent
			lost += a.okLost
			probes += a.probes
			all += a.sent
		}
	}
	if probes > 0 {
		perRound = float64(all) / float64(probes)
	}
	return lost, sent, perRound
}

// FamilyRunNeeded is how many failed rounds in a row one address family of pair k needs
// before it reads failing while another family answers (AddressFamilyUnreachable):
// FailuresToUnreachable, or more on a lossy path, so that random loss, which hits both
// families alike, makes such a run with probability below 1e-8 (gray.RunLength) at the
// larger of the pair's own rate (its answered ICMP rounds, both families, unbiased) and
// its target's and observer node's (runFloor). Found end to end: a node losing half of
// its input read AddressFamilyUnreachable (ipv6) on one pair 21 s into the loss, a run of
// three failed rounds (1 in 500 at that loss) while the other family had by chance
// answered its recent rounds. The caller holds the Engine's mu when runFloor is set.
func (s *Summarizer) FamilyRunNeeded(k observation.PairKey) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	need := s.cfg.FailuresToUnreachable
	p := s.pairs[k]
	if p == nil {
		return need
	}
	if s.runFloor != nil {
		need = max(need, s.runFloor(k))
	}
	lost, sent, e := s.answeredICMP(p)
	if e <= 0 {
		e = icmpRoundEchoes
	}
	return max(need, gray.RunLength(gray.RunLossUpper(lost, sent, e), e))
}

// Add feeds observations. Observations of one pair with the same Timestamp form one round
// (a round succeeds when any of its observations succeeded); observations of a round may
// arrive in several calls. It returns how many observations were ignored (no usable pair
// key, unknown probe type or zero timestamp).
func (s *Summarizer) Add(obs ...observation.Observation) int {
	type rk struct {
		key observation.PairKey
		ts  int64
	}
	idx := map[rk]int{}
	var groups [][]*observation.Observation
	var keys []observation.PairKey
	ignored := 0
	for i := range obs {
		o := &obs[i]
		k := observation.KeyOf(o)
		if !k.Valid() || observation.ProbeIndex(o.ProbeType) < 0 || o.Timestamp.IsZero() {
			ignored++
			continue
		}
		r := rk{k, o.Timestamp.UnixNano()}
		g, ok := idx[r]
		if !ok {
			g = len(groups)
			idx[r] = g
			groups = append(groups, nil)
			keys = append(keys, k)
		}
		groups[g] = append(groups[g], o)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignored += uint64(ignored)
	for g, round := range groups {
		p := s.pairs[keys[g]]
		if p == nil {
			p = &pairState{key: keys[g], m: machine{verdict: observation.VerdictUnknown}}
			s.pairs[keys[g]] = p
		}
		s.applyRound(p, round)
	}
	return ignored
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// slotFor returns the window slot for ts, or nil when ts is older than the window.
func (s *Summarizer) slotFor(p *pairState, ts time.Time) *slot {
	n := int64(s.cfg.Slots)
	id := floorDiv(ts.UnixNano(), int64(s.slotW))
	if p.ring == nil {
		p.ring = make([]slot, n)
	}
	if !p.hasSlots || id > p.newest {
		p.newest, p.hasSlots = id, true
	}
	if id <= p.newest-n {
		return nil
	}
	sl := &p.ring[((id%n)+n)%n]
	if !sl.used || sl.id != id {
		if sl.used && sl.id > id {
			return nil
		}
		*sl = slot{id: id, used: true, first: ts, last: ts}
	}
	if ts.Before(sl.first) {
		sl.first = ts
	}
	if ts.After(sl.last) {
		sl.last = ts
	}
	return sl
}

func (s *Summarizer) applyRound(p *pairState, round []*observation.Observation) {
	ts := round[0].Timestamp
	ok := false
	for _, o := range round {
		ok = ok || o.Success
	}
	if !ts.Before(p.lastObserved) {
		lastObs := round[len(round)-1]
		p.lastObserved, p.source = ts, lastObs.Source
		t := lastObs.Target
		for _, o := range round {
			observation.MergeTarget(&t, &o.Target)
		}
		p.target = t
	}
	for _, o := range round {
		if m := o.PathMTU; m.Status != "" && ts.After(p.mtuLast) {
			p.mtuLast = ts
			if m.Status == contract.PathMTUBlackHole {
				if p.mtuHoles == 0 {
					p.mtuSince = ts
				}
				p.mtuHoles = min(p.mtuHoles+1, mtuMaxHoles)
				p.mtuPasses = m.Bytes
			} else {
				p.mtuHoles, p.mtuPasses, p.mtuSince = 0, 0, time.Time{}
			}
		}
	}
	for _, o := range round {
		l := &p.last[observation.ProbeIndex(o.ProbeType)]
		if o.Success {
			if ts.After(l.success) {
				l.success = ts
			}
		} else if l.failure == nil || !ts.Before(l.failure.Time) {
			l.failure = &observation.Failure{Time: ts, ErrorType: o.ErrorType, Reason: observation.FailureReason(o.ErrorType), Message: truncate(o.Message, maxMessage)}
		}
	}
	sl := s.slotFor(p, ts)
	if sl != nil {
		for _, o := range round {
			a := sl.probeFor(observation.ProbeIndex(o.ProbeType))
			a.probes++
			if !o.Success {
				a.failures++
			}
			a.sent += o.Sent
			a.lost += min(o.Lost, o.Sent)
			if o.Success {
				a.okSent += o.Sent
				a.okLost += min(o.Lost, o.Sent)
			}
			if o.RTT.Count() > 0 {
				a.hist.merge(&o.RTT, &s.scratch)
			}
			ob := observer{o.Source.UID, o.Source.Node}
			if len(sl.observers) < maxObserversPerSlot && !slices.Contains(sl.observers, ob) {
				sl.observers = append(sl.observers, ob)
			}
		}
	}

	switch {
	case !p.hasRound || ts.After(p.lastRound):
		if sl != nil {
			sl.rounds++
			if !ok {
				sl.failed++
			}
		}
		p.undo = nil
		if !ok {
			u := &undoState{m: p.m, outages: slices.Clone(p.outages), gen: s.gen}
			if t := s.pending[p.key]; t != nil {
				u.pend, u.hadPend = *t, true
			}
			p.undo = u
		}
		s.step(p, ok, ts, round)
		p.hasRound, p.lastRound, p.lastRoundOK = true, ts, ok
	case ts.Equal(p.lastRound):
		if ok && !p.lastRoundOK && p.undo != nil {
			// More of the newest round arrived and it succeeded after all.
			if sl != nil && sl.failed > 0 {
				sl.failed--
			}
			u := p.undo
			before := p.m.verdict
			consumed := u.gen != s.gen // Transitions reported the failed round's outcome
			p.m, p.outages = u.m, u.outages
			if !consumed {
				if u.hadPend {
					t := u.pend
					s.pending[p.key] = &t
				} else {
					delete(s.pending, p.key)
				}
			}
			p.undo = nil
			msg := s.step(p, true, ts, round)
			if consumed {
				// The reader saw `before`: report the correction relative to it.
				delete(s.pending, p.key)
				if p.m.verdict != before {
					if msg == "" {
						msg = "reachable: a late observation of the round succeeded"
					}
					s.pending[p.key] = &observation.Transition{Key: p.key, Old: before, New: p.m.verdict, At: ts, Flips: 1, Message: msg}
				}
			}
			p.lastRoundOK = true
		}
	default:
		s.late += uint64(len(round))
	}
}

// failureText describes the failures of a round, e.g. "icmp 10.0.0.5: timeout (3 of 3
// echoes lost); tcp 10.0.0.5:80: refused".
func failureText(round []*observation.Observation) string {
	var parts []string
	for _, o := range round {
		if o.Success {
			continue
		}
		m := o.Message
		if m == "" {
			m = o.ProbeType + " " + o.Target.TargetText() + ": failed"
		}
		if !slices.Contains(parts, m) {
			parts = append(parts, m)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

func firstErrorType(round []*observation.Observation) string {
	best := ""
	bestIdx := math.MaxInt
	for _, o := range round {
		if !o.Success && o.ErrorType != "" && observation.ProbeIndex(o.ProbeType) < bestIdx {
			best, bestIdx = o.ErrorType, observation.ProbeIndex(o.ProbeType)
		}
	}
	return best
}

// step advances the verdict state machine by one round; it returns the transition
// message ("" when the verdict did not change).
func (s *Summarizer) step(p *pairState, ok bool, ts time.Time, round []*observation.Observation) string {
	m := &p.m
	old := m.verdict
	msg := ""
	flapping := false
	if ok {
		m.consecFail = 0
		if m.consecSucc == 0 {
			m.succStart = ts
		}
		m.consecSucc++
		switch {
		case m.verdict == observation.VerdictUnknown:
			m.verdict = observation.VerdictReachable
			msg = "reachable: first successful round"
		case m.verdict == observation.VerdictUnreachable && m.consecSucc >= s.cfg.SuccessesToReachable && !s.damped(p, ts):
			m.verdict = observation.VerdictReachable
			msg = "reachable again"
			if len(p.outages) > 0 && p.outages[0].Ongoing() {
				o := &p.outages[0]
				o.End = m.succStart
				if o.End.Before(o.Start) {
					o.End = o.Start
				}
				o.Message = "restored after " + o.End.Sub(o.Start).Round(time.Second).String()
				msg = o.Message
			}
		}
	} else {
		if m.consecSucc > 0 && m.verdict == observation.VerdictUnreachable && len(p.outages) > 0 && p.outages[0].Flaps > 0 && p.outages[0].Ongoing() {
			p.outages[0].Flaps++ // back and down again while the flapping outage is held open
		}
		m.consecSucc = 0
		if m.consecFail == 0 {
			m.failStart = ts
			m.failErrorType = firstErrorType(round)
			m.runEchoes = 0
		}
		m.consecFail++
		for _, o := range round {
			if o.ProbeType == contract.ProbeTypeICMP {
				m.runEchoes += o.Sent
			}
		}
		if m.verdict != observation.VerdictUnreachable && m.consecFail >= s.cfg.FailuresToUnreachable && m.consecFail >= s.partialRun(p) {
			msg = truncate(fmt.Sprintf("unreachable after %d consecutive failed rounds: %s", m.consecFail, failureText(round)), maxMessage)
			if s.openOutage(p, msg) {
				flapping = true
			}
		}
	}
	if m.verdict == old {
		return ""
	}
	s.transition(p, old, ts, msg)
	if flapping {
		s.pending[p.key].Flapping = true
	}
	return msg
}

// partialRun is how many failed rounds in a row a pair that answered part of its echoes
// in its window needs before it is Unreachable: a run random loss would make with
// probability 1e-8 or more is loss, not an outage (gray.RunLength), at the rate of its
// answered rounds' losses, unbiased (gray.UnconditionalLoss). A pair whose answered rounds
// lost nothing needs FailuresToUnreachable, as before (caller holds mu).
func (s *Summarizer) partialRun(p *pairState) int {
	lost, sent, _ := s.answeredICMP(p)
	floor := 0
	if s.runFloor != nil {
		floor = s.runFloor(p.key)
	}
	if sent < 6 || lost < 2 {
		return floor // one lost echo is no partial-loss pattern
	}
	e := max(float64(p.m.runEchoes)/float64(max(p.m.consecFail, 1)), 1)
	return max(floor, gray.RunLength(gray.RunLossUpper(lost, sent, e), e))
}

// openOutage makes the pair Unreachable and starts an outage at the first failed round of
// the current run.
func (s *Summarizer) openOutage(p *pairState, msg string) (flapped bool) {
	m := &p.m
	m.verdict = observation.VerdictUnreachable
	if w := s.cfg.FlapWindow; w > 0 && len(p.outages) > 0 && !p.outages[0].End.IsZero() && m.failStart.Sub(p.outages[0].End) <= w {
		o := &p.outages[0]
		o.End = time.Time{}
		o.Flaps++
		o.Message = truncate(fmt.Sprintf("flapping: failed again %d time(s) within %v of recovering; %s", o.Flaps, w, msg), maxMessage)
		return o.Flaps == 1
	}
	start := m.failStart
	if len(p.outages) > 0 && start.Before(p.outages[0].End) {
		start = p.outages[0].End // never overlap the previous outage
	}
	o := observation.Outage{Start: start, Reason: observation.FailureReason(m.failErrorType), Message: msg}
	p.outages = append([]observation.Outage{o}, p.outages...)
	if len(p.outages) > s.cfg.MaxOutages {
		p.outages = p.outages[:s.cfg.MaxOutages]
	}
	return false
}

// damped reports whether a flapping outage must stay open at ts: it ends only once the
// pair has answered for FlapWindow without a break.
func (s *Summarizer) damped(p *pairState, ts time.Time) bool {
	if s.cfg.FlapWindow <= 0 || len(p.outages) == 0 || p.outages[0].Flaps == 0 || !p.outages[0].Ongoing() {
		return false
	}
	return ts.Sub(p.m.succStart) < s.cfg.FlapWindow
}

// transition records a verdict change made at ts for Transitions.
func (s *Summarizer) transition(p *pairState, old observation.Verdict, ts time.Time, msg string) {
	p.m.since = ts
	if t := s.pending[p.key]; t != nil {
		t.New, t.At, t.Message = p.m.verdict, ts, msg
		t.Flips++
	} else {
		s.pending[p.key] = &observation.Transition{Key: p.key, Old: old, New: p.m.verdict, At: ts, Flips: 1, Message: msg}
	}
}

// Escalate makes a pair whose newest round failed Unreachable at once, on evidence from
// other observers: the per-target judgement found its target unreachable, so waiting for
// FailuresToUnreachable rounds of this pair alone would only delay a verdict the cluster
// already agrees on. The outage starts at the pair's first failed round of the run; why
// ends the message. It reports whether the verdict changed.
func (s *Summarizer) Escalate(key observation.PairKey, why string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pairs[key]
	if p == nil || p.m.verdict == observation.VerdictUnreachable || p.m.consecFail == 0 || !p.hasRound || p.lastRoundOK {
		return false
	}
	old := p.m.verdict
	msg := truncate(fmt.Sprintf("unreachable after %d failed round(s): %s", p.m.consecFail, why), maxMessage)
	flapped := s.openOutage(p, msg)
	s.transition(p, old, p.lastRound, msg)
	if flapped {
		s.pending[key].Flapping = true
	}
	return true
}

// Has reports whether the pair is summarised.
func (s *Summarizer) Has(key observation.PairKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pairs[key]
	return ok
}

func comparePairKeys(a, b observation.PairKey) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

// Keys returns the known pairs, ordered.
func (s *Summarizer) Keys() []observation.PairKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]observation.PairKey, 0, len(s.pairs))
	for k := range s.pairs {
		out = append(out, k)
	}
	slices.SortFunc(out, comparePairKeys)
	return out
}

// Transitions returns the verdict changes since the previous call (coalesced per pair,
// see Transition), ordered by time and key, and forgets them.
func (s *Summarizer) Transitions() []observation.Transition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]observation.Transition, 0, len(s.pending))
	for _, t := range s.pending {
		out = append(out, *t)
	}
	clear(s.pending)
	s.gen++
	slices.SortFunc(out, func(a, b observation.Transition) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return comparePairKeys(a.Key, b.Key)
	})
	return out
}

// Forget drops a pair (and its pending transition); it reports whether it existed.
func (s *Summarizer) Forget(key observation.PairKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pairs[key]
	delete(s.pairs, key)
	delete(s.pending, key)
	return ok
}

// ExpireIdle drops the pairs whose newest observation is more than ttl before now (their
// target or source went away), except those keep(key) holds on to, and returns their keys,
// ordered. keep may be nil.
func (s *Summarizer) ExpireIdle(now time.Time, ttl time.Duration, keep ...func(observation.PairKey) bool) []observation.PairKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []observation.PairKey
	for k, p := range s.pairs {
		if now.Sub(later(p.lastObserved, p.seededAt)) > ttl && !(len(keep) > 0 && keep[0] != nil && keep[0](k)) {
			out = append(out, k)
			delete(s.pairs, k)
			delete(s.pending, k)
		}
	}
	slices.SortFunc(out, comparePairKeys)
	return out
}

// SummaryStats returns counters.
func (s *Summarizer) Stats() SummaryStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SummaryStats{Pairs: len(s.pairs), Ignored: s.ignored, Late: s.late}
}

// Verdict returns a pair's verdict and its current run of failed rounds, without computing
// the window figures.
func (s *Summarizer) Verdict(key observation.PairKey) (v observation.Verdict, consecutiveFailures int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pairs[key]
	if p == nil {
		return "", 0, false
	}
	return p.m.verdict, p.m.consecFail, true
}
