// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package writequeue

import (
	"math"
	"time"
)

// The Verdict lane is shared fairly by sources (issue 40, item 1). One compromised agent
// may call 16 targets stable and flip them as fast as the engine lets it: a flip is a
// Verdict write, and served strictly first in enqueue order those writes took the whole
// budget, delayed other sources' verdicts behind up to 16 of its own and stopped every
// less urgent lane (Events, first writes, heartbeats, deletes). So, in the Verdict lane:
//
//   - items of a group (the writer's: the object's source pod) are served round-robin
//     among the groups with ready items, oldest first within a group: a group's flood
//     delays another group's ready item by at most one slot;
//   - ungrouped items (node and pod conditions, zone objects: no one source's) alternate
//     with the groups' turns, so a burst of sources does not hold them back either;
//   - each group takes a token of its Share per write: past its share its items wait (they
//     are kept, latest state, never dropped) and the less urgent lanes pass them.

// Share is a token bucket per group: a group may take rate tokens a second on average and
// burst at once. Only groups below a full bucket have state (a full bucket is no entry),
// and that is swept as the map grows, so it holds the groups that took a token within the
// last burst/rate seconds: with the writer's 1/s and 16, the sources that had a verdict
// written in the last 16 s (at most N; ~100 B each: 100 KB at 1,000 nodes, 500 KB at
// 5,000). Not safe for concurrent use (the Queue's caller guards it).
type Share struct {
	rate, burst float64
	buckets     map[string]bucket
	sweepAt     int // sweep when the map reaches this size
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewShare gives every group perSecond tokens a second and burst at once (at least 1).
func NewShare(perSecond float64, burst int) *Share {
	return &Share{rate: perSecond, burst: float64(max(burst, 1)), buckets: map[string]bucket{}, sweepAt: 64}
}

func (s *Share) tokens(g string, now time.Time) float64 {
	b, ok := s.buckets[g]
	if !ok {
		return s.burst
	}
	return min(s.burst, b.tokens+max(now.Sub(b.at).Seconds(), 0)*s.rate)
}

// Allow reports whether g has a token at now.
func (s *Share) Allow(g string, now time.Time) bool { return s.tokens(g, now) >= 1 }

// Take takes one of g's tokens at now (it may go below zero: a write already handed out).
func (s *Share) Take(g string, now time.Time) {
	s.buckets[g] = bucket{tokens: s.tokens(g, now) - 1, at: now}
	if len(s.buckets) >= s.sweepAt {
		for k, b := range s.buckets {
			if min(s.burst, b.tokens+max(now.Sub(b.at).Seconds(), 0)*s.rate) >= s.burst {
				delete(s.buckets, k)
			}
		}
		s.sweepAt = max(64, 2*len(s.buckets))
	}
}

// Next is when g has a token again (now when it has one).
func (s *Share) Next(g string, now time.Time) time.Time {
	t := s.tokens(g, now)
	if t >= 1 || !(s.rate > 0) {
		return now
	}
	return now.Add(max(time.Duration(math.Ceil((1-t)/s.rate*float64(time.Second))), 1))
}

// Groups is how many groups have state (tests and the bound's proof).
func (s *Share) Groups() int { return len(s.buckets) }

// Fair makes the Verdict lane fair among groups: group names each item's group when it is
// first enqueued ("" for ungrouped), and share (nil: unlimited) bounds each group's writes.
func Fair[V any](group func(key string, v V) string, share *Share) Option {
	return func(o *options) { o.group, o.share = group, share }
}

// fairLane holds the Verdict lane's grouped ready items.
type fairLane[V any] struct {
	groups map[string]*heap[V] // ready items of each group, oldest first
	ring   []string            // groups in turn order (a group at most once)
	inRing map[string]bool
	share  *Share
	// ungroupedTurn: the next Verdict pop goes to an ungrouped item when there is one.
	ungroupedTurn bool
}

func newFairLane[V any](share *Share) *fairLane[V] {
	return &fairLane[V]{groups: map[string]*heap[V]{}, inRing: map[string]bool{}, share: share, ungroupedTurn: true}
}

func (f *fairLane[V]) push(it *item[V]) {
	h := f.groups[it.group]
	if h == nil {
		h = &heap[V]{slot: slotReady, less: func(a, b *item[V]) bool { return a.seq < b.seq }}
		f.groups[it.group] = h
	}
	h.push(it)
	if !f.inRing[it.group] {
		f.inRing[it.group] = true
		f.ring = append(f.ring, it.group)
	}
}

func (f *fairLane[V]) remove(it *item[V]) {
	h := f.groups[it.group]
	h.remove(it)
	if h.len() == 0 {
		delete(f.groups, it.group)
	}
}

func (f *fairLane[V]) has(it *item[V]) bool {
	h := f.groups[it.group]
	return h != nil && h.has(it)
}

func (f *fairLane[V]) fix(it *item[V]) { f.groups[it.group].fix(it) }

func (f *fairLane[V]) allowed(g string, now time.Time) bool {
	return f.share == nil || f.share.Allow(g, now)
}

// pop takes the next group's oldest item in turn order, skipping (to the back of the
// ring) groups past their share; nil when none may write now.
func (f *fairLane[V]) pop(now time.Time) *item[V] {
	for n := len(f.ring); n > 0; n-- {
		g := f.ring[0]
		f.ring = f.ring[1:]
		h := f.groups[g]
		if h == nil {
			delete(f.inRing, g)
			continue
		}
		f.ring = append(f.ring, g)
		if !f.allowed(g, now) {
			continue
		}
		it := h.peek()
		f.remove(it)
		if f.share != nil {
			f.share.Take(g, now)
		}
		return it
	}
	return nil
}

// next is when a grouped item may be popped: now when one may, the earliest refill of a
// waiting group otherwise; ok is false without grouped ready items.
func (f *fairLane[V]) next(now time.Time) (t time.Time, ok bool) {
	for g := range f.groups {
		at := now
		if f.share != nil {
			at = f.share.Next(g, now)
		}
		if !ok || at.Before(t) {
			t, ok = at, true
		}
		if !t.After(now) {
			return now, true
		}
	}
	return t, ok
}

// oldest is the first enqueue time of the oldest grouped ready item.
func (f *fairLane[V]) oldest() (time.Time, bool) {
	var best *item[V]
	for _, h := range f.groups {
		if it := h.peek(); it != nil && (best == nil || it.seq < best.seq) {
			best = it
		}
	}
	if best == nil {
		return time.Time{}, false
	}
	return best.first, true
}
