// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"slices"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"
)

// The node's pooled loss judgement. A node that loses packets on its own network loses
// them both ways: its peers' echo requests and its replies (its targets' side) and its own
// echo requests and the replies to them (its observer's side). Each side alone gets K+M
// observer rounds of 3 echoes a round (1.2 echoes/s at the shipped budget), while the
// statistical bound of the issue counts both: 2.4 echoes/s. Judging the node on both
// sides' echoes together halves the echoes each side must wait for; the sides' own
// verdicts stay, for the faults that show on one side only (a lossy agent, a one-way
// filter). A third test per node adds half again to the false-alarm odds of its two
// (figures: docs/gray.md).
//
// Localisation is the sides' own: each side's window leaves out what its contributors
// judged lossy themselves sent and its largest other contributor, so the pooled test
// leaves out each side's exclusions (Contributors.Excluding), and a lossy peer that shows
// on both sides of a healthy node is left out of both. A compromised agent reporting
// losses towards everyone is its own node's observer side (left out as every victim's
// largest contributor), so the pooled test blames no other node for it either.

// pooledGray is one node's pooled loss verdict (O(N)).
type pooledGray struct {
	loss     gray.Loss
	newest   time.Time
	lastSeen time.Time
}

// pooledParts are the windows one node's pooled test sums, with what each leaves out.
type pooledParts struct {
	targets []*targetState
	voters  []string // its observers' voter keys (a node's pods share one)
	newest  time.Time
}

// judgeGrayPooled re-judges every node's pooled loss from its targets' and its observer's
// windows (caller holds mu). Nodes none of whose windows moved since the last pass keep
// their verdict; those gone for TargetTTL are forgotten.
func (e *Engine) judgeGrayPooled(now time.Time) {
	if e.gray.Off {
		return
	}
	parts := map[string]*pooledParts{}
	part := func(node string) *pooledParts {
		p := parts[node]
		if p == nil {
			p = &pooledParts{}
			parts[node] = p
		}
		return p
	}
	for _, ts := range e.targets {
		if ts.g == nil || ts.target.Node == "" {
			continue
		}
		p := part(ts.target.Node)
		p.targets = append(p.targets, ts)
		p.newest = maxTime(p.newest, ts.g.newest)
	}
	for _, ob := range e.observers {
		if ob.voter == "" || ob.node == "" {
			continue
		}
		og := e.grayObservers[ob.voter]
		if og == nil {
			continue
		}
		p := part(ob.node)
		if slices.Contains(p.voters, ob.voter) {
			continue
		}
		p.voters = append(p.voters, ob.voter)
		p.newest = maxTime(p.newest, og.newest)
	}
	if e.pooledScratch == nil {
		e.pooledScratch = gray.NewWindow(e.gray.Slots, e.gray.SlotWidth)
	}
	w := e.pooledScratch
	for node, p := range parts {
		if len(p.targets) == 0 || len(p.voters) == 0 {
			continue // one side only: the side's own verdict is the whole evidence
		}
		st := e.grayPooled[node]
		if st == nil {
			st = &pooledGray{}
			e.grayPooled[node] = st
		}
		st.lastSeen = now
		if !p.newest.After(st.newest) && !st.loss.Lossy {
			continue // nothing new, nothing to clear
		}
		st.newest = maxTime(st.newest, p.newest)
		w.Reset()
		var except, side [2]gray.Counts // 0 its targets' side, 1 its observer's
		var cleared time.Time           // the newest end of a side's episode: the pooled test starts after it too
		for _, ts := range p.targets {
			cleared = maxTime(cleared, ts.g.loss.Cleared)
			w.AddWindow(ts.g.window)
			side[0] = addCounts(side[0], ts.g.window.Total(now))
			except[0] = addCounts(except[0], ts.g.contrib.Excluding(e.lossyWithin(e.lossyObservers, now)))
		}
		for _, v := range p.voters {
			og := e.grayObservers[v]
			cleared = maxTime(cleared, og.loss.Cleared)
			w.AddWindow(og.window)
			side[1] = addCounts(side[1], og.window.Total(now))
			except[1] = addCounts(except[1], og.contrib.Excluding(e.lossyWholeWithin(e.lossyTargets, now)))
		}
		// Left out: each side's exclusions, or the larger side whole when that is more, so
		// that the smaller side carries a third of the evidence itself: a node whose loss
		// shows on one side only (a lossy or lying agent, a one-way filter) is that side's
		// verdict, never "both".
		out, big := addCounts(except[0], except[1]), side[0]
		if side[1].Lost > big.Lost {
			big = side[1]
		}
		if big.Lost > out.Lost {
			out = big
		}
		if !st.loss.Lossy {
			st.loss.Cleared = maxTime(st.loss.Cleared, cleared)
		}
		e.gray.Loss.Judge(&st.loss, w, out, now)
		if st.loss.Lossy {
			// Its losses are its own: the other nodes' windows leave them out, as they
			// do a target's or an observer's judged on one side.
			e.lossyTargets["node:"+node] = now
			for _, v := range p.voters {
				e.lossyObservers[v] = now
			}
		}
	}
	for node, st := range e.grayPooled {
		if now.Sub(st.lastSeen) > e.cfg.TargetTTL {
			delete(e.grayPooled, node)
		}
	}
}

func addCounts(a, b gray.Counts) gray.Counts {
	return gray.Counts{Sent: a.Sent + b.Sent, Lost: a.Lost + b.Lost}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pooledGrayStatus is a node's pooled loss verdict (caller holds mu; zero when none).
func (e *Engine) pooledGrayStatus(node string) GrayStatus {
	st := e.grayPooled[node]
	if st == nil || node == "" {
		return GrayStatus{}
	}
	f := st.loss.Figures
	return GrayStatus{Lossy: st.loss.Lossy, Sent: f.Sent, Lost: f.Lost, Span: f.Span, LossSince: st.loss.Since}
}
