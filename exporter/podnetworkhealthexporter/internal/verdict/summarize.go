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
}

type probeAgg struct {
	probes, failures, sent, lost uint64
	hist                         observation.Histogram
}

type observer struct{ uid, node string }

type slot struct {
	id          int64
	used        bool
	first, last time.Time
	rounds      int
	failed      int
	probes      [observation.NumProbeTypes]probeAgg
	observers   []observer
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
// lost burst of large echoes is not a black hole).
const mtuHolesToReport = 2

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
				p.mtuHoles = min(p.mtuHoles+1, mtuHolesToReport)
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
			a := &sl.probes[observation.ProbeIndex(o.ProbeType)]
			a.probes++
			if !o.Success {
				a.failures++
			}
			a.sent += o.Sent
			a.lost += min(o.Lost, o.Sent)
			if o.RTT.Count() > 0 {
				a.hist.Merge(&o.RTT)
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
		case m.verdict == observation.VerdictUnreachable && m.consecSucc >= s.cfg.SuccessesToReachable:
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
		m.consecSucc = 0
		if m.consecFail == 0 {
			m.failStart = ts
			m.failErrorType = firstErrorType(round)
		}
		m.consecFail++
		if m.verdict != observation.VerdictUnreachable && m.consecFail >= s.cfg.FailuresToUnreachable {
			msg = truncate(fmt.Sprintf("unreachable after %d consecutive failed rounds: %s", m.consecFail, failureText(round)), maxMessage)
			s.openOutage(p, msg)
		}
	}
	if m.verdict == old {
		return ""
	}
	s.transition(p, old, ts, msg)
	return msg
}

// openOutage makes the pair Unreachable and starts an outage at the first failed round of
// the current run.
func (s *Summarizer) openOutage(p *pairState, msg string) {
	m := &p.m
	m.verdict = observation.VerdictUnreachable
	start := m.failStart
	if len(p.outages) > 0 && start.Before(p.outages[0].End) {
		start = p.outages[0].End // never overlap the previous outage
	}
	o := observation.Outage{Start: start, Reason: observation.FailureReason(m.failErrorType), Message: msg}
	p.outages = append([]observation.Outage{o}, p.outages...)
	if len(p.outages) > s.cfg.MaxOutages {
		p.outages = p.outages[:s.cfg.MaxOutages]
	}
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
	s.openOutage(p, msg)
	s.transition(p, old, p.lastRound, msg)
	return true
}

// Has reports whether the pair is summarised.
func (s *Summarizer) Has(key observation.PairKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pairs[key]
	return ok
}

func truncate(s string, n int) string { return v1alpha1.TruncateMessage(s, n) }

func secondsToDuration(v float64) time.Duration {
	if math.IsNaN(v) || v <= 0 {
		return 0
	}
	if v >= float64(math.MaxInt64)/1e9 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(v * 1e9))
}

// LatencyOf summarises a histogram of seconds.
func LatencyOf(h *observation.Histogram) observation.Latency {
	n := h.Count()
	if n == 0 {
		return observation.Latency{}
	}
	q := func(x float64) time.Duration {
		v, _ := h.Quantile(x)
		return secondsToDuration(v)
	}
	l := observation.Latency{Count: n, P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: secondsToDuration(h.Max)}
	l.P90 = max(l.P90, l.P50)
	l.P99 = max(l.P99, l.P90)
	l.Max = max(l.Max, l.P99)
	return l
}

// summary computes a pair's Summary. Caller holds s.mu.
func (s *Summarizer) summary(p *pairState) observation.Summary {
	out := observation.Summary{
		Key:                  p.key,
		Source:               p.source,
		Target:               p.target,
		Verdict:              p.m.verdict,
		VerdictSince:         p.m.since,
		ConsecutiveFailures:  p.m.consecFail,
		ConsecutiveSuccesses: p.m.consecSucc,
		LastObserved:         p.lastObserved,
		ObservedFromNode:     p.source.Node,
		Outages:              slices.Clone(p.outages),
	}
	if p.mtuHoles >= mtuHolesToReport {
		out.MTUBlackHole, out.MTUPasses, out.MTUSince = true, p.mtuPasses, p.mtuSince
	}
	var agg [observation.NumProbeTypes]probeAgg
	var observers []observer
	n := int64(s.cfg.Slots)
	for i := range p.ring {
		sl := &p.ring[i]
		if !sl.used || sl.id <= p.newest-n {
			continue
		}
		out.Rounds += sl.rounds
		out.FailedRounds += sl.failed
		if out.WindowStart.IsZero() || sl.first.Before(out.WindowStart) {
			out.WindowStart = sl.first
		}
		if sl.last.After(out.WindowEnd) {
			out.WindowEnd = sl.last
		}
		for j := range agg {
			a, b := &agg[j], &sl.probes[j]
			a.probes += b.probes
			a.failures += b.failures
			a.sent += b.sent
			a.lost += b.lost
			a.hist.Merge(&b.hist)
		}
		for _, ob := range sl.observers {
			if !slices.Contains(observers, ob) {
				observers = append(observers, ob)
			}
		}
	}
	out.Observers = len(observers)
	for _, ob := range observers {
		if ob.node != "" && !slices.Contains(out.ObserverNodes, ob.node) {
			out.ObserverNodes = append(out.ObserverNodes, ob.node)
		}
	}
	slices.Sort(out.ObserverNodes)

	var totalProbes, totalFailures uint64
	for j, a := range agg {
		l := p.last[j]
		if a.probes == 0 && l.success.IsZero() && l.failure == nil {
			continue
		}
		r := observation.ProbeResult{Type: observation.ProbeTypes[j], Probes: a.probes, Failures: a.failures, Sent: a.probes, Lost: a.failures,
			RTT: LatencyOf(&a.hist), LastSuccess: l.success}
		if a.sent > 0 {
			r.Sent, r.Lost = a.sent, a.lost
		}
		if l.failure != nil {
			f := *l.failure
			r.LastFailure = &f
		}
		out.Probes = append(out.Probes, r)
		totalProbes += a.probes
		totalFailures += a.failures
	}

	icmp := &agg[observation.ProbeIndex(contract.ProbeTypeICMP)]
	if icmp.hist.Count() > 0 {
		out.RTT, out.RTTFrom = LatencyOf(&icmp.hist), contract.ProbeTypeICMP
	} else {
		var h observation.Histogram
		var from []string
		for j := 1; j < observation.NumProbeTypes; j++ {
			if agg[j].hist.Count() > 0 {
				h.Merge(&agg[j].hist)
				from = append(from, observation.ProbeTypes[j])
			}
		}
		out.RTT, out.RTTFrom = LatencyOf(&h), strings.Join(from, ",")
	}
	switch {
	case icmp.sent > 0:
		out.Sent, out.Lost = icmp.sent, icmp.lost
	case totalProbes > 0:
		out.Sent, out.Lost = totalProbes, totalFailures
	}
	if out.Sent > 0 {
		out.LossRatio, out.HasLoss = float64(out.Lost)/float64(out.Sent), true
	}
	return out
}

// Summary returns the current summary of one pair.
func (s *Summarizer) Summary(key observation.PairKey) (observation.Summary, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pairs[key]
	if p == nil {
		return observation.Summary{}, false
	}
	return s.summary(p), true
}

// Summaries returns the summaries of all pairs, ordered by key.
func (s *Summarizer) Summaries() []observation.Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]observation.Summary, 0, len(s.pairs))
	for _, p := range s.pairs {
		out = append(out, s.summary(p))
	}
	slices.SortFunc(out, func(a, b observation.Summary) int { return comparePairKeys(a.Key, b.Key) })
	return out
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

// Seed starts a pair from a persisted state (what a previous writer put in the API), so a
// new writer continues its verdict and its outage history instead of starting from
// Unknown: an ongoing outage keeps its start and reason, a verdict change is reported
// relative to the seeded verdict, and the seeded pair counts as observed at lastObserved
// (its idle expiry counts from now at the earliest).
// A pair already summarised (a warm replica) is left alone. It reports whether it seeded.
// Adopt reconciles a pair this Summarizer already follows with the state a previous writer
// persisted (a takeover by a replica that summarised the same observations as a standby).
// When both say the same verdict, the persisted one stands: its since and outage history
// (an ongoing outage keeps its start), and the pending transition to it is dropped, so no
// Event repeats what was reported. When they differ, the pending transition starts from the
// persisted verdict (so the Event says what changed relative to the record), a persisted
// ongoing outage the pair has recovered from ends at the recovery, and the persisted
// history is kept behind newer outages. It reports whether the pair exists.
func (s *Summarizer) Adopt(key observation.PairKey, verdict observation.Verdict, since time.Time, outages []observation.Outage) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pairs[key]
	if p == nil || verdict == "" || verdict == observation.VerdictUnknown {
		return p != nil
	}
	if len(outages) > s.cfg.MaxOutages {
		outages = outages[:s.cfg.MaxOutages]
	}
	if p.m.verdict == verdict || p.m.verdict == observation.VerdictUnknown {
		// Agreeing, or not judged yet by this replica: the record's verdict stands (as
		// Seed would set it), with the rounds this replica counted so far.
		if p.m.verdict == observation.VerdictUnknown && verdict == observation.VerdictUnreachable {
			p.m.consecFail = max(p.m.consecFail, s.cfg.FailuresToUnreachable)
			p.m.failStart = since
		}
		p.m.verdict, p.m.since = verdict, since
		p.outages = slices.Clone(outages)
		if verdict == observation.VerdictUnreachable && len(outages) > 0 && outages[0].Ongoing() {
			p.m.failStart = outages[0].Start
		}
		if t := s.pending[key]; t != nil {
			delete(s.pending, key)
		}
		return true
	}
	if t := s.pending[key]; t != nil {
		t.Old = verdict
	} else if p.m.verdict != observation.VerdictUnknown {
		s.pending[key] = &observation.Transition{Key: key, Old: verdict, New: p.m.verdict, At: p.m.since, Flips: 1}
	}
	older := slices.Clone(outages)
	if len(older) > 0 && older[0].Ongoing() && p.m.verdict == observation.VerdictReachable {
		older[0].End = p.m.since
	}
	var newer []observation.Outage
	newest := time.Time{}
	if len(older) > 0 {
		newest = older[0].Start
	}
	for _, o := range p.outages {
		if o.Start.After(newest) {
			newer = append(newer, o)
		}
	}
	p.outages = append(newer, older...)
	if len(p.outages) > s.cfg.MaxOutages {
		p.outages = p.outages[:s.cfg.MaxOutages]
	}
	return true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (s *Summarizer) Seed(key observation.PairKey, src observation.Source, tgt observation.Target, verdict observation.Verdict, since, lastObserved, now time.Time, outages []observation.Outage) bool {
	if !key.Valid() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pairs[key] != nil {
		return false
	}
	p := &pairState{key: key, source: src, target: tgt, lastObserved: lastObserved, seededAt: now,
		m: machine{verdict: verdict, since: since}}
	if len(outages) > s.cfg.MaxOutages {
		outages = outages[:s.cfg.MaxOutages]
	}
	p.outages = slices.Clone(outages)
	if verdict == observation.VerdictUnreachable {
		// Still failing as far as anyone knows: one success starts the recovery count, one
		// more failure keeps it Unreachable without a new outage.
		p.m.consecFail = s.cfg.FailuresToUnreachable
		p.m.failStart = since
		if len(outages) > 0 && outages[0].Ongoing() {
			p.m.failStart = outages[0].Start
			p.m.failErrorType = ""
		}
	}
	s.pairs[key] = p
	return true
}
