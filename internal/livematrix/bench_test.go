// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package livematrix

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// heapAfter returns the live heap after fill has run (and what it returned is still
// referenced), less the heap before.
func heapAfter(fill func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := fill()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

// filled fills a store with observers rows of perRow cells each, out of n node names (a
// full n-node matrix: observers n, perRow n-1).
func filled(n, observers, perRow int) *Store {
	s := New(Config{MaxCells: observers * perRow})
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/256, i%256)
	}
	batch := make([]Sample, 0, perRow)
	for o := range observers {
		batch = batch[:0]
		for j := 1; j <= perRow; j++ {
			batch = append(batch, Sample{Observer: names[o], Target: names[(o+j)%n], At: t0, Probe: "icmp", OK: true, RTT: time.Millisecond})
		}
		s.Record(t0, batch...)
	}
	return s
}

// reference is the smallest Go map of as many entries: map[uint64]uint64 (16 bytes a
// cell), the yardstick the store's cost is compared with in the same run, so the figure
// does not depend on the machine or the Go version's map layout.
func reference(cells int) map[uint64]uint64 {
	m := make(map[uint64]uint64)
	for i := range cells {
		m[uint64(i)] = uint64(i)
	}
	return m
}

// memoryPerCell measures the store's bytes per cell with observers rows of perRow cells
// (n node names) and the reference's bytes per entry, for as many cells.
func memoryPerCell(n, observers, perRow int) (perCell, perRef float64) {
	var cells int
	perCell = heapAfter(func() any { s := filled(n, observers, perRow); cells = s.Stats().Cells; return s }) / float64(cells)
	perRef = heapAfter(func() any { return reference(cells) }) / float64(cells)
	return perCell, perRef
}

// BenchmarkCellMemory reports the memory per cell, and its ratio to the reference map's
// per entry, of the two layouts docs/view.md quotes: a full 1,000-node matrix (999,000
// cells, under DefaultMaxCells), and a 5,000-node cluster at DefaultMaxCells (each
// observer at its share, 200 cells):
//
//	go test -run '^$' -bench CellMemory -benchtime 1x ./internal/livematrix/
func BenchmarkCellMemory(b *testing.B) {
	for _, c := range []struct {
		name                 string
		n, observers, perRow int
	}{
		{"1000-nodes-full", 1000, 1000, 999},
		{"5000-nodes-at-max-cells", 5000, 5000, DefaultMaxCells / 5000},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				perCell, perRef := memoryPerCell(c.n, c.observers, c.perRow)
				b.ReportMetric(perCell, "B/cell")
				b.ReportMetric(perRef, "B/ref-entry")
				b.ReportMetric(perCell/perRef, "ratio")
				b.ReportMetric(perCell*float64(c.observers*c.perRow)/1e6, "MB")
			}
		})
	}
}

// BenchmarkRecord is the cost of one sample into a full store of 1,000 observers (the
// steady state: every new cell evicts one).
func BenchmarkRecord(b *testing.B) {
	s := New(Config{MaxCells: 200_000})
	for i := range 200_000 {
		s.Record(t0, Sample{Observer: node(i % 1000), Target: node(i / 1000), At: t0, OK: true})
	}
	b.ResetTimer()
	for i := range b.N {
		at := t0.Add(time.Duration(i) * time.Microsecond)
		s.Record(at, Sample{Observer: node(i % 1000), Target: node(200 + i%800), At: at, Probe: "icmp", OK: true, RTT: time.Millisecond})
	}
}

// TestCellMemory keeps the per-cell cost within 3 reference entries (a 200-node matrix):
// more means the cell or its key grew.
func TestCellMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	perCell, perRef := memoryPerCell(200, 200, 199)
	t.Logf("%.1f B/cell, reference %.1f B/entry, ratio %.2f", perCell, perRef, perCell/perRef)
	assert.Less(t, perCell/perRef, 3.0)
}
