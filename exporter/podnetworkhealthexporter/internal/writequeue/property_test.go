// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package writequeue

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// model is a naive, obviously correct reference of the Queue's rules (linear scans).
type model struct {
	max      int
	seq      uint64
	pending  map[string]*mItem
	inflight map[string]*mItem
	dropped  [NumPriorities]uint64
}

type mItem struct {
	p       Priority
	v       int
	seq     uint64
	retryAt time.Time
	parked  bool
}

func newModel(max int) *model {
	return &model{max: max, pending: map[string]*mItem{}, inflight: map[string]*mItem{}}
}

func (m *model) room(key string, p Priority, v int) (Drop[int], bool, bool) {
	if m.max == 0 || len(m.pending) < m.max {
		return Drop[int]{}, false, true
	}
	var vk string
	var victim *mItem
	for k, it := range m.pending {
		if it.p <= p {
			continue
		}
		if victim == nil || it.p > victim.p || (it.p == victim.p && it.seq > victim.seq) {
			vk, victim = k, it
		}
	}
	if victim == nil {
		m.dropped[p]++
		return Drop[int]{Key: key, Priority: p, Value: v}, true, false
	}
	m.dropped[victim.p]++
	delete(m.pending, vk)
	return Drop[int]{Key: vk, Priority: victim.p, Value: victim.v}, true, true
}

func (m *model) set(key string, p Priority, v int) (Drop[int], bool) {
	if it := m.pending[key]; it != nil {
		it.v, it.p = v, min(it.p, p)
		return Drop[int]{}, false
	}
	d, dropped, ok := m.room(key, p, v)
	if ok {
		m.seq++
		m.pending[key] = &mItem{p: p, v: v, seq: m.seq, parked: m.inflight[key] != nil}
	}
	return d, dropped
}

func (m *model) pop(now time.Time) (popped, bool) {
	for _, it := range m.pending {
		if !it.parked && !it.retryAt.IsZero() && !it.retryAt.After(now) {
			it.retryAt = time.Time{} // ready from now on
		}
	}
	var bk string
	var best *mItem
	for k, it := range m.pending {
		if it.parked || !it.retryAt.IsZero() {
			continue
		}
		if best == nil || it.p < best.p || (it.p == best.p && it.seq < best.seq) {
			bk, best = k, it
		}
	}
	if best == nil {
		return popped{}, false
	}
	delete(m.pending, bk)
	m.inflight[bk] = best
	return popped{bk, best.p, best.v}, true
}

func (m *model) done(key string) {
	if m.inflight[key] == nil {
		return
	}
	delete(m.inflight, key)
	if it := m.pending[key]; it != nil {
		it.parked = false
	}
}

func (m *model) retry(key string, p Priority, v int, nb time.Time) (Drop[int], bool) {
	old := m.inflight[key]
	delete(m.inflight, key)
	if cur := m.pending[key]; cur != nil {
		cur.p = min(cur.p, p)
		if old != nil && old.seq < cur.seq {
			cur.seq = old.seq
		}
		if nb.After(cur.retryAt) {
			cur.retryAt = nb
		}
		cur.parked = false
		return Drop[int]{}, false
	}
	d, dropped, ok := m.room(key, p, v)
	if !ok {
		return d, dropped
	}
	it := old
	if it == nil {
		m.seq++
		it = &mItem{seq: m.seq}
	}
	it.p, it.v, it.retryAt, it.parked = p, v, nb, false
	m.pending[key] = it
	return d, dropped
}

func (m *model) check(t *testing.T, q *Queue[int], now time.Time, step string) {
	t.Helper()
	require.Equal(t, len(m.pending), q.Len(), step)
	require.Equal(t, len(m.inflight), q.InFlight(), step)
	var byP [NumPriorities]int
	for k, it := range m.pending {
		byP[it.p]++
		require.True(t, q.Contains(k), step)
	}
	require.Equal(t, byP, q.LenByPriority(), step)
	require.Equal(t, m.dropped, q.DroppedByPriority(), step)
	next, ok := q.NextReady()
	var earliest time.Time
	some, readyNow := false, false
	for _, it := range m.pending {
		if it.parked {
			continue
		}
		if !some || it.retryAt.Before(earliest) {
			earliest = it.retryAt
		}
		some = true
		readyNow = readyNow || !it.retryAt.After(now)
	}
	require.Equal(t, some, ok, step)
	if ok && next.IsZero() {
		require.True(t, readyNow, step)
	} else if ok {
		require.Equal(t, earliest, next, step)
	}
}

// TestQueueMatchesModel drives the Queue and the model with the same random operations and
// checks they agree on every result and on the invariants (Len = distinct pending keys, by
// priority, in flight, drops, NextReady, Pop order).
func TestQueueMatchesModel(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, seed*7+1))
		maxItems := 0
		if seed%2 == 1 {
			maxItems = 1 + rng.IntN(10)
		}
		keys := 3 + rng.IntN(20)
		q := New[int](MaxItems(maxItems))
		m := newModel(maxItems)
		now := t0
		v := 0
		inflightKeys := func() []string {
			var ks []string
			for k := range m.inflight {
				ks = append(ks, k)
			}
			// deterministic pick order
			for i := 1; i < len(ks); i++ {
				for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
					ks[j], ks[j-1] = ks[j-1], ks[j]
				}
			}
			return ks
		}
		for op := range 600 {
			v++
			key := fmt.Sprintf("k%d", rng.IntN(keys))
			p := Priority(rng.IntN(NumPriorities))
			step := fmt.Sprintf("seed %d op %d", seed, op)
			switch r := rng.IntN(100); {
			case r < 40:
				gd, gdrop := q.Set(key, p, v, now)
				wd, wdrop := m.set(key, p, v)
				require.Equal(t, wdrop, gdrop, step)
				require.Equal(t, wd, gd, step)
			case r < 70:
				now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
				k, gp, gv, ok := q.Pop(now)
				want, wok := m.pop(now)
				require.Equal(t, wok, ok, step)
				require.Equal(t, want, popped{k, gp, gv}, step)
			case r < 82:
				if ks := inflightKeys(); len(ks) > 0 {
					k := ks[rng.IntN(len(ks))]
					q.Done(k)
					m.done(k)
				}
			default:
				k := key
				if ks := inflightKeys(); len(ks) > 0 && rng.IntN(5) > 0 {
					k = ks[rng.IntN(len(ks))]
				}
				var nb time.Time
				if rng.IntN(3) > 0 {
					nb = now.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
				}
				gd, gdrop := q.Retry(k, p, v, nb)
				wd, wdrop := m.retry(k, p, v, nb)
				require.Equal(t, wdrop, gdrop, step)
				require.Equal(t, wd, gd, step)
			}
			m.check(t, q, now, step)
		}
	}
}
