// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/contract"
)

// A pair's Summary: the window's figures, the verdict and the outage history.

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
	if p.mtuHoles >= mtuHolesToReport && p.mtuHoles >= s.mtuHolesNeeded(p) {
		out.MTUBlackHole, out.MTUPasses, out.MTUSince = true, p.mtuPasses, p.mtuSince
	}
	agg, hist := [observation.NumProbeTypes]probeAgg{}, [observation.NumProbeTypes]observation.Histogram{} // hist: the window's RTT
	var observers []observer
	n := int64(s.cfg.Slots)
	for i := range p.ring {
		sl := &p.ring[i]
		if !sl.used || sl.id <= p.newest-n {
			continue
		}
		out.Rounds += int(sl.rounds)
		out.FailedRounds += int(sl.failed)
		if out.WindowStart.IsZero() || sl.first.Before(out.WindowStart) {
			out.WindowStart = sl.first
		}
		if sl.last.After(out.WindowEnd) {
			out.WindowEnd = sl.last
		}
		for j := range sl.probes {
			a, b := &agg[sl.probes[j].typ], &sl.probes[j].probeAgg
			a.probes += b.probes
			a.failures += b.failures
			a.sent += b.sent
			a.lost += b.lost
			a.okSent += b.okSent
			a.okLost += b.okLost
			b.hist.mergeInto(&hist[sl.probes[j].typ], &s.scratch)
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
			RTT: LatencyOf(&hist[j]), LastSuccess: l.success}
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

	icmp, icmpHist := &agg[observation.ProbeIndex(contract.ProbeTypeICMP)], &hist[observation.ProbeIndex(contract.ProbeTypeICMP)]
	if icmpHist.Count() > 0 {
		out.RTT, out.RTTFrom = LatencyOf(icmpHist), contract.ProbeTypeICMP
	} else {
		var h observation.Histogram
		var from []string
		for j := 1; j < observation.NumProbeTypes; j++ {
			if hist[j].Count() > 0 {
				h.Merge(&hist[j])
				from = append(from, observation.ProbeTypes[j])
			}
		}
		out.RTT, out.RTTFrom = LatencyOf(&h), strings.Join(from, ",")
	}
	out.AnsweredSent, out.AnsweredLost = icmp.okSent, icmp.okLost
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
