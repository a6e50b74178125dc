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
// The spacing is Config.MinRoundSpacing: the exporter's min_probe_interval/2, 500 ms at the
// default 1 s. No agent the gateway accepts probes more often than min_probe_interval, so
// an honest agent's rounds are always further apart, whatever its own interval. Not the
// observer's measured round length (observerState.seen): that measure takes a longer gap at
// once and shrinks slowly, as silence detection needs, so after an agent's restart or a lost
// batch (a 60 s gap) a spacing derived from it would drop the honest agent's next rounds
// and delay its real verdicts by several rounds; and a liar that never leaves a 1 s gap
// keeps it at zero anyway.
//
// At 500 ms a pair flips at most twice per 2.5 s (3 failed rounds, then 2 successful): 16
// pairs make at most ~13 verdict decisions a second, which the writer's per-source share of
// the verdict lane (writequeue.Fair) turns into at most 1 write a second after a burst of
// 16. State: one time per summarised pair (24 B). The pairs are at most (M+1)·N plus one
// followed failing pair per source: 72 KB at N = 1,000 and 360 KB at N = 5,000 with M = 1;
// at the admission's 16 stable targets per source 0.4 MB and 2 MB. A sender adds nothing
// but its own pairs' times.

// DefaultMinRoundSpacing is Config.MinRoundSpacing's default.
const DefaultMinRoundSpacing = 500 * time.Millisecond

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
