// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package writequeue

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type popped struct {
	key string
	p   Priority
	v   int
}

func popAll(q *Queue[int], now time.Time) []popped {
	var out []popped
	for {
		k, p, v, ok := q.Pop(now)
		if !ok {
			return out
		}
		q.Done(k)
		out = append(out, popped{k, p, v})
	}
}

func TestPriorityString(t *testing.T) {
	want := []string{"verdict", "event", "check_verdict", "check_event", "check_update", "update", "heartbeat", "cleanup"}
	for p := range NumPriorities {
		assert.Equal(t, want[p], Priority(p).String())
		assert.Equal(t, strings.HasPrefix(want[p], "check_"), Priority(p).IsCheck())
	}
	assert.Equal(t, "priority(9)", Priority(9).String())
	assert.Less(t, Verdict, Event)
	// Declared checks come after the pairs' verdicts and Events, always.
	assert.Less(t, Event, CheckVerdict)
	assert.Less(t, CheckVerdict, CheckEvent)
	assert.Less(t, CheckEvent, CheckUpdate)
	assert.Less(t, CheckUpdate, Update)
	assert.Less(t, Event, Update)
	assert.Less(t, Update, Heartbeat)
	assert.Less(t, Heartbeat, Cleanup)
}

func TestPopMostUrgentFirst(t *testing.T) {
	q := New[int]()
	q.Set("c", Cleanup, 1, t0)
	q.Set("h", Heartbeat, 2, t0)
	q.Set("u", Update, 3, t0)
	q.Set("e", Event, 4, t0)
	q.Set("v", Verdict, 5, t0)
	assert.Equal(t, []popped{{"v", Verdict, 5}, {"e", Event, 4}, {"u", Update, 3}, {"h", Heartbeat, 2}, {"c", Cleanup, 1}}, popAll(q, t0))
}

func TestFIFOWithinPriority(t *testing.T) {
	q := New[int]()
	for i, k := range []string{"a", "b", "c", "d"} {
		q.Set(k, Heartbeat, i, t0.Add(time.Duration(i)*time.Second))
	}
	q.Set("b", Heartbeat, 10, t0.Add(time.Minute)) // coalescing keeps b's place
	got := popAll(q, t0.Add(time.Hour))
	assert.Equal(t, []popped{{"a", Heartbeat, 0}, {"b", Heartbeat, 10}, {"c", Heartbeat, 2}, {"d", Heartbeat, 3}}, got)
}

func TestCoalescingKeepsNewestValueAndMostUrgentPriority(t *testing.T) {
	q := New[int]()
	q.Set("x", Heartbeat, 1, t0)
	q.Set("a", Verdict, 2, t0.Add(time.Second))
	q.Set("x", Verdict, 3, t0.Add(2*time.Second))
	q.Set("x", Heartbeat, 4, t0.Add(3*time.Second)) // must not demote x
	q.Set("h", Heartbeat, 5, t0.Add(4*time.Second))
	require.Equal(t, 3, q.Len())
	assert.Equal(t, [NumPriorities]int{2, 0, 0, 0, 0, 0, 1, 0}, q.LenByPriority())
	// x was enqueued before a, so it leads the Verdict priority; it carries the newest value.
	assert.Equal(t, []popped{{"x", Verdict, 4}, {"a", Verdict, 2}, {"h", Heartbeat, 5}}, popAll(q, t0))
}

func TestKeyInFlightIsNotHandedOutTwice(t *testing.T) {
	q := New[int]()
	q.Set("x", Update, 1, t0)
	k, _, v, ok := q.Pop(t0)
	require.True(t, ok)
	require.Equal(t, "x", k)
	require.Equal(t, 1, v)
	assert.Equal(t, 0, q.Len())
	assert.Equal(t, 1, q.InFlight())
	assert.Equal(t, [NumPriorities]int{0, 0, 0, 0, 0, 1, 0, 0}, q.InFlightByPriority())

	q.Set("x", Update, 2, t0)
	assert.Equal(t, 1, q.Len())
	_, _, _, ok = q.Pop(t0)
	assert.False(t, ok, "a newer value waits while the older one is being written")
	_, ok = q.NextReady()
	assert.False(t, ok)
	assert.True(t, q.Contains("x"))

	q.Done("x")
	assert.Equal(t, []popped{{"x", Update, 2}}, popAll(q, t0))
	assert.False(t, q.Contains("x"))
	assert.Equal(t, 0, q.InFlight())
}

func TestRetryDoesNotOverwriteNewerSet(t *testing.T) {
	q := New[int]()
	q.Set("x", Verdict, 1, t0)
	q.Set("y", Heartbeat, 9, t0)
	k, p, v, _ := q.Pop(t0)
	require.Equal(t, popped{"x", Verdict, 1}, popped{k, p, v})
	q.Set("z", Heartbeat, 8, t0)
	q.Set("x", Heartbeat, 2, t0) // newer state while the verdict write is in flight
	_, dropped := q.Retry("x", Verdict, 1, t0.Add(time.Second))
	require.False(t, dropped)
	require.Equal(t, 3, q.Len())

	// Not before the retry time; the newer value inherits the verdict's urgency and place.
	assert.Equal(t, []popped{{"y", Heartbeat, 9}, {"z", Heartbeat, 8}}, popAll(q, t0.Add(999*time.Millisecond)))
	next, ok := q.NextReady()
	require.True(t, ok)
	assert.Equal(t, t0.Add(time.Second), next)
	assert.Equal(t, []popped{{"x", Verdict, 2}}, popAll(q, t0.Add(time.Second)))
}

func TestRetryKeepsPlaceAndWaits(t *testing.T) {
	q := New[int]()
	q.Set("a", Update, 1, t0)
	q.Set("b", Update, 2, t0)
	k, p, v, _ := q.Pop(t0)
	require.Equal(t, "a", k)
	q.Retry(k, p, v, t0.Add(200*time.Millisecond))
	next, ok := q.NextReady()
	require.True(t, ok)
	assert.True(t, next.IsZero(), "b is ready now")
	assert.Equal(t, []popped{{"b", Update, 2}}, popAll(q, t0.Add(199*time.Millisecond)))
	next, ok = q.NextReady()
	require.True(t, ok)
	assert.Equal(t, t0.Add(200*time.Millisecond), next)

	// Given back without a delay, a keeps its first-enqueue place ahead of newer keys.
	q = New[int]()
	q.Set("a", Update, 1, t0)
	q.Set("b", Update, 2, t0)
	k, p, v, _ = q.Pop(t0)
	q.Set("c", Update, 3, t0)
	q.Retry(k, p, v, time.Time{})
	assert.Equal(t, []popped{{"a", Update, 1}, {"b", Update, 2}, {"c", Update, 3}}, popAll(q, t0))
}

func TestRetryOfUnknownKeyActsLikeSet(t *testing.T) {
	q := New[int]()
	q.Retry("x", Event, 1, time.Time{})
	assert.Equal(t, []popped{{"x", Event, 1}}, popAll(q, t0))
	q.Done("nope") // harmless
}

func TestBoundEvictsLeastUrgentNewest(t *testing.T) {
	q := New[int](MaxItems(3))
	q.Set("h1", Heartbeat, 1, t0)
	q.Set("h2", Heartbeat, 2, t0)
	q.Set("c1", Cleanup, 3, t0)

	d, dropped := q.Set("v1", Verdict, 4, t0)
	require.True(t, dropped)
	assert.Equal(t, Drop[int]{Key: "c1", Priority: Cleanup, Value: 3}, d)

	d, dropped = q.Set("u1", Update, 5, t0)
	require.True(t, dropped)
	assert.Equal(t, Drop[int]{Key: "h2", Priority: Heartbeat, Value: 2}, d, "the newest of the least urgent")

	d, dropped = q.Set("h3", Heartbeat, 6, t0)
	require.True(t, dropped)
	assert.Equal(t, Drop[int]{Key: "h3", Priority: Heartbeat, Value: 6}, d, "nothing less urgent: the new one is refused")

	_, dropped = q.Set("h1", Verdict, 7, t0) // an existing key never needs room
	require.False(t, dropped)

	assert.Equal(t, 3, q.Len())
	assert.Equal(t, [NumPriorities]uint64{0, 0, 0, 0, 0, 0, 2, 1}, q.DroppedByPriority())
	assert.Equal(t, []popped{{"h1", Verdict, 7}, {"v1", Verdict, 4}, {"u1", Update, 5}}, popAll(q, t0))
}

func TestBoundNeverEvictsVerdict(t *testing.T) {
	q := New[int](MaxItems(2))
	q.Set("v1", Verdict, 1, t0)
	q.Set("v2", Verdict, 2, t0)
	for p := range NumPriorities {
		d, dropped := q.Set("new", Priority(p), 3, t0)
		require.True(t, dropped)
		assert.Equal(t, "new", d.Key)
	}
	assert.Equal(t, [NumPriorities]uint64{1, 1, 1, 1, 1, 1, 1, 1}, q.DroppedByPriority())
	assert.Equal(t, []popped{{"v1", Verdict, 1}, {"v2", Verdict, 2}}, popAll(q, t0))
}

func TestBoundAppliesToRetryAndEvictsDelayedAndParked(t *testing.T) {
	q := New[int](MaxItems(2))
	q.Set("x", Heartbeat, 1, t0)
	k, p, v, _ := q.Pop(t0)
	q.Set("x", Heartbeat, 2, t0) // parked behind the write in flight
	q.Set("c", Cleanup, 3, t0)
	q.Retry("c", Cleanup, 3, t0.Add(time.Hour)) // delayed
	d, dropped := q.Set("v", Verdict, 4, t0)
	require.True(t, dropped)
	assert.Equal(t, "c", d.Key)
	d, dropped = q.Set("u", Update, 5, t0)
	require.True(t, dropped)
	assert.Equal(t, "x", d.Key, "the parked newer value is evictable")
	// The retry of the write in flight needs room too: Heartbeat < Update, so it is refused.
	d, dropped = q.Retry(k, p, v, time.Time{})
	require.True(t, dropped)
	assert.Equal(t, Drop[int]{Key: "x", Priority: Heartbeat, Value: 1}, d)
	assert.Equal(t, 0, q.InFlight())
	assert.Equal(t, []popped{{"v", Verdict, 4}, {"u", Update, 5}}, popAll(q, t0))
}

func TestNextReady(t *testing.T) {
	q := New[int]()
	_, ok := q.NextReady()
	assert.False(t, ok)
	q.Set("a", Heartbeat, 1, t0)
	q.Set("b", Heartbeat, 1, t0)
	ka, pa, va, _ := q.Pop(t0)
	kb, pb, vb, _ := q.Pop(t0)
	q.Retry(kb, pb, vb, t0.Add(3*time.Second))
	q.Retry(ka, pa, va, t0.Add(2*time.Second))
	next, ok := q.NextReady()
	require.True(t, ok)
	assert.Equal(t, t0.Add(2*time.Second), next)
	q.Set("c", Cleanup, 1, t0)
	next, ok = q.NextReady()
	require.True(t, ok)
	assert.True(t, next.IsZero())
	oldest, ok := q.OldestReady(Cleanup)
	require.True(t, ok)
	assert.Equal(t, t0, oldest)
	_, ok = q.OldestReady(Verdict)
	assert.False(t, ok)
}

func TestOutOfRangePriorityIsClamped(t *testing.T) {
	q := New[int]()
	q.Set("lo", Priority(-3), 1, t0)
	q.Set("hi", Priority(42), 2, t0)
	assert.Equal(t, []popped{{"lo", Verdict, 1}, {"hi", Cleanup, 2}}, popAll(q, t0))
}

// PopFunc skips the priorities allow refuses (the checks' share spent), and NextReadyFunc
// does not count them: a worker sleeps instead of spinning on a check write it may not take.
func TestPopFuncSkipsRefusedPriorities(t *testing.T) {
	q := New[int]()
	q.Set("cv", CheckVerdict, 1, t0)
	q.Set("u", Update, 2, t0)
	q.Set("v", Verdict, 3, t0)
	noChecks := func(p Priority) bool { return !p.IsCheck() }
	k, _, _, ok := q.PopFunc(t0, noChecks)
	require.True(t, ok)
	assert.Equal(t, "v", k, "pair verdicts first")
	q.Done(k)
	k, _, _, _ = q.PopFunc(t0, noChecks)
	assert.Equal(t, "u", k, "a pair update passes a check write whose share is spent")
	q.Done(k)
	_, ok = q.NextReadyFunc(noChecks)
	assert.False(t, ok, "only a check write is left")
	_, ok = q.NextReady()
	assert.True(t, ok)
	_, _, _, ok = q.PopFunc(t0, noChecks)
	assert.False(t, ok)
	q.Retry("cv2", CheckUpdate, 4, t0.Add(time.Minute))
	next, ok := q.NextReadyFunc(func(p Priority) bool { return p == CheckUpdate })
	require.True(t, ok)
	assert.Equal(t, t0.Add(time.Minute), next)
	k, _, _, ok = q.Pop(t0)
	require.True(t, ok)
	assert.Equal(t, "cv", k)
}
