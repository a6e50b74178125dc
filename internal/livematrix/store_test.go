// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package livematrix

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func node(i int) string { return fmt.Sprintf("node-%d", i) }

// check asserts the store's invariants: the count matches the rows, no empty row, the
// bound holds, and every interned name is referred to exactly as often as it is used.
func check(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	refs := map[uint32]int32{}
	for i, r := range s.rows {
		require.Equal(t, i, r.index)
		require.Same(t, r, s.rowIndex[r.name])
		require.NotEmpty(t, r.cells, "row %s empty but kept", r.name)
		total += len(r.cells)
		for id := range r.cells {
			refs[id]++
		}
	}
	require.Len(t, s.rowIndex, len(s.rows))
	require.Equal(t, total, s.cells)
	require.LessOrEqual(t, s.cells, s.cfg.MaxCells)
	require.Len(t, s.names.ids, len(refs), "interned names without a cell are forgotten")
	for id, n := range refs {
		require.Equal(t, n, s.names.refs[id], s.names.name[id])
	}
}

func TestNewestRoundPerCell(t *testing.T) {
	s := New(Config{})
	s.Record(t0, Sample{Observer: "a", Target: "b", At: t0, Probe: "tcp", OK: true, RTT: 3 * time.Millisecond, Stable: false})
	s.Record(t0, Sample{Observer: "a", Target: "b", At: t0, Probe: "icmp", OK: true, RTT: 1500 * time.Microsecond})
	r, ok := s.Cell("a", "b", t0.Add(2*time.Second))
	require.True(t, ok)
	assert.Equal(t, Result{Target: "b", At: t0, AgeSeconds: 2, Reachable: true, OK: []string{"icmp", "tcp"}, P50: "1.5ms"}, r,
		"two probe types of one round merge; ICMP's RTT wins")

	// A newer round replaces it, whatever its outcome; an older one changes nothing.
	s.Record(t0, Sample{Observer: "a", Target: "b", At: t0.Add(10 * time.Second), Probe: "icmp", OK: false, Stable: true})
	s.Record(t0, Sample{Observer: "a", Target: "b", At: t0.Add(5 * time.Second), Probe: "icmp", OK: true})
	r, _ = s.Cell("a", "b", t0.Add(10*time.Second))
	assert.Equal(t, Result{Target: "b", At: t0.Add(10 * time.Second), Reachable: false, Failed: []string{"icmp"}, Stable: true}, r)
	// Another probe of that round answering makes it reachable, with failures listed.
	s.Record(t0, Sample{Observer: "a", Target: "b", At: t0.Add(10 * time.Second), Probe: "http", OK: true, RTT: 4 * time.Millisecond})
	r, _ = s.Cell("a", "b", t0.Add(10*time.Second))
	assert.True(t, r.Reachable)
	assert.Equal(t, []string{"http"}, r.OK)
	assert.Equal(t, []string{"icmp"}, r.Failed)
	assert.Equal(t, "4ms", r.P50)

	// Nothing placed nowhere, nothing towards itself.
	s.Record(t0, Sample{Observer: "", Target: "b", At: t0}, Sample{Observer: "a", Target: "", At: t0}, Sample{Observer: "a", Target: "a", At: t0})
	assert.Equal(t, 1, s.Stats().Cells)
	check(t, s)
}

func TestMaxAge(t *testing.T) {
	s := New(Config{MaxAge: time.Minute})
	s.Record(t0, Sample{Observer: "a", Target: "b", At: t0, OK: true}, Sample{Observer: "c", Target: "b", At: t0.Add(30 * time.Second), OK: true})
	assert.Len(t, s.Row("a", t0.Add(59*time.Second)), 1)
	assert.Empty(t, s.Row("a", t0.Add(time.Minute)), "never shown past MaxAge")
	// Too old on arrival: not recorded.
	s.Record(t0.Add(2*time.Minute), Sample{Observer: "d", Target: "b", At: t0, OK: true})
	// The sweep (due: more than MaxAge/8 since the last) dropped a's cell and row.
	st := s.Stats()
	assert.Equal(t, 0, st.Cells)
	assert.Equal(t, 0, st.Rows)
	s.Record(t0.Add(2*time.Minute), Sample{Observer: "c", Target: "b", At: t0.Add(2 * time.Minute), OK: true})
	assert.Equal(t, 1, s.Stats().Cells)
	check(t, s)
}

// TestOwnRowShare: a compromised agent sends results towards ever new targets, far more
// than the store holds. It fills the store while alone, but every honest observer still
// records its whole row (within its share), the attacker ends within its share, and the
// attacker never evicts a cell of a row within its share. It writes no other row: a row is
// the sample's Observer, which the exporter binds to the authenticated caller.
func TestOwnRowShare(t *testing.T) {
	const maxCells, honest, targets = 1000, 9, 60
	s := New(Config{MaxCells: maxCells})
	now := t0
	for i := range 10 * maxCells {
		s.Record(now, Sample{Observer: "evil", Target: fmt.Sprintf("fake-%d", i), At: now.Add(time.Duration(i) * time.Millisecond), OK: false})
	}
	assert.Equal(t, maxCells, s.Stats().Cells, "alone, its share is the whole store")
	check(t, s)
	for round := range 3 {
		at := now.Add(time.Duration(round) * time.Second)
		for o := range honest {
			for tg := range targets {
				s.Record(at, Sample{Observer: node(o), Target: node(100 + tg), At: at, OK: true})
			}
			// The attacker keeps going, with timestamps ahead of everyone's.
			for i := range 200 {
				s.Record(at, Sample{Observer: "evil", Target: fmt.Sprintf("more-%d-%d-%d", round, o, i), At: at.Add(time.Hour), OK: false})
			}
			check(t, s)
		}
	}
	for o := range honest {
		assert.Len(t, s.Row(node(o), now.Add(3*time.Second)), targets, "honest %s keeps its row", node(o))
	}
	assert.LessOrEqual(t, len(s.Row("evil", now.Add(3*time.Second))), maxCells-honest*targets)
	assert.Equal(t, maxCells, s.Stats().Cells)

	// Rows beyond their share: an honest row larger than the share keeps its newest.
	s2 := New(Config{MaxCells: 100})
	for o := range 4 {
		for tg := range 50 {
			s2.Record(t0, Sample{Observer: node(o), Target: node(100 + tg), At: t0.Add(time.Duration(tg) * time.Second), OK: true})
		}
		check(t, s2)
	}
	for o := range 4 {
		row := s2.Row(node(o), t0.Add(time.Minute))
		assert.Len(t, row, 25)
		assert.Equal(t, node(100+25), row[0].Target, "the oldest went: %v", row[0])
	}
}

// TestMoreRowsThanCells: unbound observer names (no require_authenticated_observers)
// exceeding MaxCells keep the bound, one cell per row, the oldest going.
func TestMoreRowsThanCells(t *testing.T) {
	s := New(Config{MaxCells: 10})
	for i := range 100 {
		s.Record(t0, Sample{Observer: fmt.Sprintf("o-%d", i), Target: "b", At: t0.Add(time.Duration(i) * time.Second), OK: true})
		check(t, s)
	}
	st := s.Stats()
	assert.Equal(t, 10, st.Cells)
	assert.Equal(t, 10, st.Rows)
	assert.Len(t, s.Row("o-99", t0.Add(100*time.Second)), 1)
	assert.Empty(t, s.Row("o-0", t0.Add(100*time.Second)))
}

// TestRandomBound: random observers, targets, times and probes never break the invariants.
func TestRandomBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := New(Config{MaxCells: 300, MaxAge: time.Minute})
	now := t0
	for i := range 20_000 {
		now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
		o, tg := rng.IntN(40), rng.IntN(80)
		s.Record(now, Sample{Observer: node(o), Target: node(tg), At: now.Add(-time.Duration(rng.IntN(90)) * time.Second),
			Probe: probeTypes[rng.IntN(len(probeTypes))], OK: rng.IntN(2) == 0, RTT: time.Duration(rng.IntN(5000)) * time.Microsecond})
		if i%500 == 0 {
			check(t, s)
		}
	}
	check(t, s)
}

func TestHub(t *testing.T) {
	h := &Hub{}
	assert.Nil(t, h.Store(), "no view: nothing to record into")
	assert.Equal(t, StateNoExporter, h.Status(nil).State)
	s, detach := h.Attach(Config{MaxCells: 5})
	s2, detach2 := h.Attach(Config{MaxCells: 7})
	assert.Same(t, s, s2, "a second view shares the store")
	assert.Same(t, s, h.Store())
	unproduce := h.Produce()
	assert.Equal(t, StateStandby, h.Status(s).State)
	unlead := h.Lead()
	st := h.Status(s)
	assert.Equal(t, StateLive, st.State)
	assert.Equal(t, 5, st.MaxCells)
	unlead()
	unlead()
	assert.Equal(t, StateStandby, h.Status(s).State)
	unproduce()
	detach()
	detach()
	assert.Same(t, s, h.Store(), "still one view")
	detach2()
	assert.Nil(t, h.Store())
}

// TestConcurrentUse: the exporter records while views read (run with -race).
func TestConcurrentUse(t *testing.T) {
	s := New(Config{MaxCells: 500, MaxAge: time.Minute})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5000 {
			at := t0.Add(time.Duration(i) * time.Millisecond)
			s.Record(at, Sample{Observer: node(i % 30), Target: node(i % 50), At: at, Probe: "icmp", OK: i%3 != 0, RTT: time.Millisecond})
		}
	}()
	for range 200 {
		for o := range 30 {
			_ = s.Row(node(o), t0.Add(time.Second))
		}
		_ = s.Stats()
	}
	<-done
	check(t, s)
}
