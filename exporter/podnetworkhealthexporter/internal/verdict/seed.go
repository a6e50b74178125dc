// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"slices"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// A new leadership term: adopting and seeding verdicts from what the API holds.

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

// SeedMTU resumes a seeded pair's path-MTU black hole from what the API holds, so that a
// takeover does not clear it before the next probes say so.
func (s *Summarizer) SeedMTU(key observation.PairKey, passes int, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pairs[key]; p != nil {
		p.mtuHoles, p.mtuPasses, p.mtuSince = mtuHolesToReport, passes, since
	}
}
