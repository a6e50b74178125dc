// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import "time"

// A pair's verdict steps once per distinct round (summarize.go), and nothing bounded how
// close together one observer may date its rounds: one compromised agent calling 16 targets
// stable flipped each of them (3 failed rounds, then 2 successful) in under a second, every
// flip a verdict write (issue 40, item 1). So a round of a pair dated less than the pair's
// minimum spacing after its previous counted round counts for nothing in the pair: not its
// verdict, figures or failure retention. (Its vote for the target is untouched: one vote per
// observer node already bounds what it moves there.)
//
// The spacing is Config.MinRoundSpacing: the exporter's min_probe_interval/4, 250 ms at the
// default 1 s. Not half: pod_probe stamps a round when it ends (publish), and its rounds run
// one after the other, so after a slow round (a probe timing out) the next, fast one can be
// dated as little as interval - timeout after it. No accepted agent's interval is below
// min_probe_interval, so with a quarter an honest agent's rounds all count whenever its
// timeout is at most 3/4 of its interval (shipped: 2 s of 10 s; the simulated cluster's
// 0.5 s of 1 s, which leaves 0.5 s, the half's own value). With a longer timeout a round
// right after a slow one may not count: its pair's next round does (one round later to
// recover). Not the observer's measured round length (observerState.seen) either: that
// measure takes a longer gap at once and shrinks slowly, as silence detection needs, so
// after an agent's restart or a lost batch (a 60 s gap) a spacing derived from it would drop
// the honest agent's next rounds; and a liar that never leaves a 1 s gap keeps it at zero.
//
// At 250 ms a pair flips at most twice per 1.25 s (3 failed rounds, then 2 successful): 16
// pairs make at most ~26 verdict decisions a second. The writes they cost are bounded by the
// writer's per-source share of the verdict lane (writequeue.Fair: 1 a second after a burst
// of 16) and their Events by the per-source share of the Event limit; this bound keeps the
// decisions, and so the engine's work and what the share has to hold back, to what a real
// agent at min_probe_interval could cause. State: one time per summarised pair (24 B). The
// pairs are at most (M+1)·N plus one followed failing pair per source: 72 KB at N = 1,000
// and 360 KB at N = 5,000 with M = 1; at the admission's 16 stable targets per source
// 0.4 MB and 2 MB. A sender adds nothing but its own pairs' times.

// DefaultMinRoundSpacing is Config.MinRoundSpacing's default.
const DefaultMinRoundSpacing = 250 * time.Millisecond

// roundCounts reports whether a round dated at counts for pair p, and remembers it as
// p's newest counted round when it does (caller holds mu). The same round again (its other
// probes, a retried export) and older rounds are the summarizer's to sort out.
func (e *Engine) roundCounts(p *pairInfo, at time.Time) bool {
	if !p.counted.IsZero() && at.After(p.counted) && at.Sub(p.counted) < e.cfg.MinRoundSpacing {
		e.roundsTooSoon++
		return false
	}
	if at.After(p.counted) {
		p.counted = at
	}
	return true
}
