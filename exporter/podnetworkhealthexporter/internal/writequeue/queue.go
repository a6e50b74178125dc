// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package writequeue orders the Kubernetes API writes of the pod_network_health exporter
// under one write budget: a keyed, latest-state-coalescing priority queue, a token bucket
// and the heartbeat stretching rule.
//
// It is pure: no I/O, no goroutines, no clock (callers pass now). Queue is not safe for
// concurrent use (the writer guards it with its own mutex); Budget is.
package writequeue

import (
	"strconv"
	"time"
)

// Priority orders writes; lower is more urgent.
//
// Declared checks' writes (CheckVerdict, CheckEvent, CheckUpdate) come after the pairs'
// verdicts and Events, always, and have their own share of the write budget on top: the
// writer hands out a check write only while the checks' budget has a token (PopFunc), so
// however many checks flap they take at most their share and never delay a pair verdict
// or a pair Event.
type Priority int

const (
	// Verdict: verdict changes, the objects of newly failing pairs, node and pod condition
	// status changes. Never evicted by a less urgent write.
	Verdict Priority = iota
	// Event: the pairs' Kubernetes Events.
	Event
	// CheckVerdict: a declared check's Reachable condition, outage or placement change.
	CheckVerdict
	// CheckEvent: a declared check's Events.
	CheckEvent
	// CheckUpdate: a declared check's routine writes (new results, heartbeats, refusals,
	// prunes).
	CheckUpdate
	// Update: first writes of new stable pairs, latency and loss changes.
	Update
	// Heartbeat: rewrites of an unchanged state so staleness stays visible.
	Heartbeat
	// Cleanup: deletes.
	Cleanup
)

// NumPriorities is the number of priorities; LenByPriority and friends index by Priority.
const NumPriorities = int(Cleanup) + 1

var priorityNames = [NumPriorities]string{"verdict", "event", "check_verdict", "check_event", "check_update", "update", "heartbeat", "cleanup"}

// String is the metric attribute value: "verdict", "event", "check_verdict",
// "check_event", "check_update", "update", "heartbeat", "cleanup".
func (p Priority) String() string {
	if p < 0 || int(p) >= NumPriorities {
		return "priority(" + strconv.Itoa(int(p)) + ")"
	}
	return priorityNames[p]
}

// IsCheck reports whether p is one of the declared checks' priorities (their own share of
// the budget).
func (p Priority) IsCheck() bool { return p >= CheckVerdict && p <= CheckUpdate }

// clamp maps an out-of-range priority to the nearest valid one.
func clamp(p Priority) Priority {
	return min(max(p, Verdict), Cleanup)
}

type item[V any] struct {
	key     string
	group   string // Fair's group ("": ungrouped)
	prio    Priority
	value   V
	seq     uint64    // first enqueue order: FIFO within a priority
	first   time.Time // first enqueue time
	retryAt time.Time // not ready before this (zero: ready)
	parked  bool      // the key is in flight: waits for Done or Retry
	idx     [numSlots]int
}

// Drop describes a pending value the bound removed: an evicted item, or the new one when
// it was refused.
type Drop[V any] struct {
	Key      string
	Priority Priority
	Value    V
}

// Option configures a Queue.
type Option func(*options)

type options struct {
	maxItems int
	group    any // func(key string, v V) string (Fair)
	share    *Share
}

// MaxItems bounds the number of pending keys (0: unbounded). When full, a Set of a new
// key evicts the least urgent, newest pending item if that is strictly less urgent than
// the new one; otherwise the new value is dropped. Verdict items are therefore never
// evicted by a less urgent write.
func MaxItems(n int) Option { return func(o *options) { o.maxItems = n } }

// Queue holds the latest pending value per key and hands out the most urgent ready one.
//
// A key is either absent, pending (waiting), in flight (returned by Pop, until Done or
// Retry), or in flight with a newer value pending. A pending key's value is replaced by
// every Set; its priority is the most urgent of all Sets since it was enqueued; within a
// priority, keys leave in the order they were first enqueued (with Fair, the Verdict lane's
// groups take turns, each in that order: fair.go). A key is never handed out
// twice at once: its newer value waits until the write in flight is Done or Retried, so
// two workers never write one object concurrently and an older state never lands after a
// newer one.
type Queue[V any] struct {
	maxItems int
	pending  map[string]*item[V]
	inflight map[string]*item[V]
	ready    [NumPriorities]heap[V]
	all      [NumPriorities]heap[V]
	delayed  heap[V]
	seq      uint64
	dropped  [NumPriorities]uint64
	free     []*item[V]
	// fair holds the Verdict lane's grouped ready items (nil without Fair); groupOf names
	// an item's group.
	fair    *fairLane[V]
	groupOf func(key string, v V) string
}

// New returns an empty queue.
func New[V any](opts ...Option) *Queue[V] {
	var o options
	for _, f := range opts {
		f(&o)
	}
	q := &Queue[V]{
		maxItems: max(o.maxItems, 0),
		pending:  map[string]*item[V]{},
		inflight: map[string]*item[V]{},
	}
	older := func(a, b *item[V]) bool { return a.seq < b.seq }
	newer := func(a, b *item[V]) bool { return a.seq > b.seq }
	for p := range NumPriorities {
		q.ready[p] = heap[V]{slot: slotReady, less: older}
		q.all[p] = heap[V]{slot: slotAll, less: newer}
	}
	if g, ok := o.group.(func(string, V) string); ok && g != nil {
		q.fair, q.groupOf = newFairLane[V](o.share), g
	}
	q.delayed = heap[V]{slot: slotDelayed, less: func(a, b *item[V]) bool {
		if !a.retryAt.Equal(b.retryAt) {
			return a.retryAt.Before(b.retryAt)
		}
		return a.seq < b.seq
	}}
	return q
}

// Set makes v the pending value of key. A pending key keeps its place (first enqueue) and
// takes p only if p is more urgent than its current priority. now is the enqueue time of a
// new key. When the bound drops something, Set says what (the evicted item, or this value
// with Key == key when it was refused).
func (q *Queue[V]) Set(key string, p Priority, v V, now time.Time) (Drop[V], bool) {
	p = clamp(p)
	if it := q.pending[key]; it != nil {
		it.value = v
		if p < it.prio {
			q.reprioritize(it, p)
		}
		return Drop[V]{}, false
	}
	drop, dropped, ok := q.makeRoom(key, p, v)
	if !ok {
		return drop, true
	}
	it := q.newItem()
	it.key, it.prio, it.value, it.first = key, p, v, now
	it.group = q.groupFor(key, v)
	q.seq++
	it.seq = q.seq
	it.parked = q.inflight[key] != nil
	q.insert(it)
	return drop, dropped
}

// Pop returns the most urgent ready item (the oldest of its priority) and marks its key in
// flight until Done or Retry. Items given back with a retry time are not ready before it.
func (q *Queue[V]) Pop(now time.Time) (key string, p Priority, v V, ok bool) {
	return q.PopFunc(now, nil)
}

// PopFunc is Pop restricted to the priorities allow accepts (nil: all): the writer skips
// the checks' priorities while their share of the budget is spent.
func (q *Queue[V]) PopFunc(now time.Time, allow func(Priority) bool) (key string, p Priority, v V, ok bool) {
	for q.delayed.len() > 0 && !q.delayed.peek().retryAt.After(now) {
		it := q.delayed.pop()
		it.retryAt = time.Time{}
		q.readyPush(it)
	}
	for pr := range NumPriorities {
		if allow != nil && !allow(Priority(pr)) {
			continue
		}
		var it *item[V]
		if Priority(pr) == Verdict && q.fair != nil {
			it = q.popVerdict(now)
		} else if q.ready[pr].len() > 0 {
			it = q.ready[pr].pop()
		}
		if it == nil {
			continue
		}
		q.all[pr].remove(it)
		delete(q.pending, it.key)
		q.inflight[it.key] = it
		return it.key, it.prio, it.value, true
	}
	var zero V
	return "", 0, zero, false
}

// Done ends the flight of key after a successful write; a newer value Set meanwhile
// becomes ready.
func (q *Queue[V]) Done(key string) {
	it := q.inflight[key]
	if it == nil {
		return
	}
	delete(q.inflight, key)
	q.recycle(it)
	if cur := q.pending[key]; cur != nil && cur.parked {
		cur.parked = false
		q.schedule(cur)
	}
}

// Retry gives back key after a failed write, not ready before notBefore (zero: at once).
// A key is in flight at most once, so a pending value found here can only come from a Set
// after the Pop: that newer value is kept (a stale retry never overwrites a newer state,
// whatever order the calls arrive in); it inherits p if p is more urgent, the retried item's place
// in its priority if that is older, and waits until notBefore too. A Retry of a key that
// is not in flight acts like a Set. The bound applies as to a Set.
func (q *Queue[V]) Retry(key string, p Priority, v V, notBefore time.Time) (Drop[V], bool) {
	p = clamp(p)
	old := q.inflight[key]
	delete(q.inflight, key)
	if cur := q.pending[key]; cur != nil {
		if p < cur.prio {
			q.reprioritize(cur, p)
		}
		if old != nil && old.seq < cur.seq {
			cur.seq, cur.first = old.seq, old.first
			q.all[cur.prio].fix(cur)
			if q.readyHas(cur) {
				q.readyFix(cur)
			}
		}
		if notBefore.After(cur.retryAt) {
			q.unschedule(cur)
			cur.retryAt = notBefore
			if !cur.parked {
				q.schedule(cur)
			}
		}
		if old != nil {
			q.recycle(old)
		}
		if cur.parked {
			cur.parked = false
			q.schedule(cur)
		}
		return Drop[V]{}, false
	}
	drop, dropped, ok := q.makeRoom(key, p, v)
	if !ok {
		if old != nil {
			q.recycle(old)
		}
		return drop, true
	}
	it := old
	if it == nil {
		it = q.newItem()
		q.seq++
		it.seq, it.first = q.seq, notBefore
		it.group = q.groupFor(key, v)
	}
	it.key, it.prio, it.value, it.retryAt, it.parked = key, p, v, notBefore, false
	q.insert(it)
	return drop, dropped
}

// Wake makes a pending key ready at at (zero: at once) when it was held for later, e.g. by
// a Retry far in the future; a key already due sooner keeps its time. It reports whether
// key is pending.
func (q *Queue[V]) Wake(key string, at time.Time) bool {
	it := q.pending[key]
	if it == nil {
		return false
	}
	if it.retryAt.IsZero() || (!at.IsZero() && !at.Before(it.retryAt)) {
		return true
	}
	q.unschedule(it)
	it.retryAt = at
	if !it.parked {
		q.schedule(it)
	}
	return true
}

// makeRoom applies the bound before a new pending key of priority p is added: it evicts
// the least urgent, newest item if that is strictly less urgent than p. ok is false when
// the new value must be dropped instead.
func (q *Queue[V]) makeRoom(key string, p Priority, v V) (drop Drop[V], dropped, ok bool) {
	if q.maxItems == 0 || len(q.pending) < q.maxItems {
		return drop, false, true
	}
	for pr := Cleanup; pr > p; pr-- {
		victim := q.all[pr].peek()
		if victim == nil {
			continue
		}
		drop = Drop[V]{Key: victim.key, Priority: victim.prio, Value: victim.value}
		q.dropped[victim.prio]++
		q.all[pr].remove(victim)
		q.unschedule(victim)
		delete(q.pending, victim.key)
		q.recycle(victim)
		return drop, true, true
	}
	q.dropped[p]++
	return Drop[V]{Key: key, Priority: p, Value: v}, true, false
}

// groupFor is the Fair group of a new item ("" without Fair).
func (q *Queue[V]) groupFor(key string, v V) string {
	if q.groupOf == nil {
		return ""
	}
	return q.groupOf(key, v)
}

// fairItem: it is served by the fair lane (a grouped Verdict item of a Fair queue).
func (q *Queue[V]) fairItem(it *item[V]) bool {
	return q.fair != nil && it.prio == Verdict && it.group != ""
}

func (q *Queue[V]) readyPush(it *item[V]) {
	if q.fairItem(it) {
		q.fair.push(it)
	} else {
		q.ready[it.prio].push(it)
	}
}

func (q *Queue[V]) readyRemove(it *item[V]) {
	if q.fairItem(it) {
		q.fair.remove(it)
	} else {
		q.ready[it.prio].remove(it)
	}
}

func (q *Queue[V]) readyHas(it *item[V]) bool {
	if q.fairItem(it) {
		return q.fair.has(it)
	}
	return q.ready[it.prio].has(it)
}

func (q *Queue[V]) readyFix(it *item[V]) {
	if q.fairItem(it) {
		q.fair.fix(it)
	} else {
		q.ready[it.prio].fix(it)
	}
}

// popVerdict takes the Verdict lane's next item: ungrouped and grouped items alternate,
// the groups in turn (fairLane.pop); nil when none may be written now.
func (q *Queue[V]) popVerdict(now time.Time) *item[V] {
	ungrouped := &q.ready[Verdict]
	if q.fair.ungroupedTurn && ungrouped.len() > 0 {
		q.fair.ungroupedTurn = false
		return ungrouped.pop()
	}
	if it := q.fair.pop(now); it != nil {
		q.fair.ungroupedTurn = true
		return it
	}
	if ungrouped.len() > 0 {
		return ungrouped.pop()
	}
	return nil
}

// insert adds a new pending item.
func (q *Queue[V]) insert(it *item[V]) {
	q.pending[it.key] = it
	q.all[it.prio].push(it)
	if !it.parked {
		q.schedule(it)
	}
}

// schedule puts a pending, unparked item into the ready or the delayed heap.
func (q *Queue[V]) schedule(it *item[V]) {
	if it.retryAt.IsZero() {
		q.readyPush(it)
	} else {
		q.delayed.push(it)
	}
}

// unschedule takes an item out of the ready and delayed heaps.
func (q *Queue[V]) unschedule(it *item[V]) {
	if q.readyHas(it) {
		q.readyRemove(it)
	}
	if q.delayed.has(it) {
		q.delayed.remove(it)
	}
}

func (q *Queue[V]) reprioritize(it *item[V], p Priority) {
	wasReady := q.readyHas(it)
	if wasReady {
		q.readyRemove(it)
	}
	q.all[it.prio].remove(it)
	it.prio = p
	q.all[p].push(it)
	if wasReady {
		q.readyPush(it)
	}
}

func (q *Queue[V]) newItem() *item[V] {
	if n := len(q.free); n > 0 {
		it := q.free[n-1]
		q.free = q.free[:n-1]
		return it
	}
	it := &item[V]{}
	for i := range it.idx {
		it.idx[i] = -1
	}
	return it
}

// maxFree bounds the recycled items kept for reuse.
const maxFree = 1024

func (q *Queue[V]) recycle(it *item[V]) {
	if len(q.free) >= maxFree {
		return
	}
	var zero V
	it.key, it.group, it.value, it.first, it.retryAt, it.parked = "", "", zero, time.Time{}, time.Time{}, false
	for i := range it.idx {
		it.idx[i] = -1
	}
	q.free = append(q.free, it)
}

// Len is the number of pending keys (waiting for a write; not counting the in flight).
func (q *Queue[V]) Len() int { return len(q.pending) }

// LenByPriority is Len by priority.
func (q *Queue[V]) LenByPriority() [NumPriorities]int {
	var out [NumPriorities]int
	for p := range NumPriorities {
		out[p] = q.all[p].len()
	}
	return out
}

// InFlight is the number of keys returned by Pop and not yet Done or Retried.
func (q *Queue[V]) InFlight() int { return len(q.inflight) }

// InFlightByPriority is InFlight by the priority each key was popped with.
func (q *Queue[V]) InFlightByPriority() [NumPriorities]int {
	var out [NumPriorities]int
	for _, it := range q.inflight {
		out[it.prio]++
	}
	return out
}

// Contains reports whether key is pending or in flight.
func (q *Queue[V]) Contains(key string) bool {
	return q.pending[key] != nil || q.inflight[key] != nil
}

// DroppedByPriority counts the values the bound dropped (evicted or refused) since New.
func (q *Queue[V]) DroppedByPriority() [NumPriorities]uint64 { return q.dropped }

// OldestReady is the first enqueue time of the oldest ready item of priority p: how long
// the most urgent writes have been waiting for the budget.
func (q *Queue[V]) OldestReady(p Priority) (time.Time, bool) {
	p = clamp(p)
	var t time.Time
	ok := false
	if it := q.ready[p].peek(); it != nil {
		t, ok = it.first, true
	}
	if p == Verdict && q.fair != nil {
		if ft, fok := q.fair.oldest(); fok && (!ok || ft.Before(t)) {
			t, ok = ft, true
		}
	}
	return t, ok
}

// NextReady tells a worker how long to sleep: Pop(now) returns an item for every now not
// before t. The zero t means an item is ready at once. ok is false when nothing can become
// ready without a Set, Done or Retry (empty, or only keys whose older value is in flight).
func (q *Queue[V]) NextReady() (t time.Time, ok bool) {
	return q.NextReadyFunc(nil)
}

// NextReadyFunc is NextReady for PopFunc with the same allow: items of priorities allow
// refuses do not count.
func (q *Queue[V]) NextReadyFunc(allow func(Priority) bool) (t time.Time, ok bool) {
	return q.NextReadyAt(time.Time{}, allow)
}

// NextReadyAt is NextReadyFunc at now, which a Fair queue's Share needs: a group past its
// share makes its items ready when it refills. (NextReadyFunc takes a group as allowed.)
func (q *Queue[V]) NextReadyAt(now time.Time, allow func(Priority) bool) (t time.Time, ok bool) {
	for p := range NumPriorities {
		if q.ready[p].len() > 0 && (allow == nil || allow(Priority(p))) {
			return time.Time{}, true
		}
	}
	if q.fair != nil && (allow == nil || allow(Verdict)) && len(q.fair.groups) > 0 {
		if now.IsZero() {
			return time.Time{}, true
		}
		at, _ := q.fair.next(now)
		if !at.After(now) {
			return time.Time{}, true
		}
		t, ok = at, true
	}
	if allow == nil {
		if it := q.delayed.peek(); it != nil && (!ok || it.retryAt.Before(t)) {
			t, ok = it.retryAt, true
		}
		return t, ok
	}
	for _, it := range q.delayed.items {
		if allow(it.prio) && (!ok || it.retryAt.Before(t)) {
			t, ok = it.retryAt, true
		}
	}
	return t, ok
}
