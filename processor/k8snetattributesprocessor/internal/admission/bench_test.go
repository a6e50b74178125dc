// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestAdmissionBench (make bench, NETPULSE_BENCH=1): N agents, each reporting the shipped
// agent's 4 stable targets, and one compromised agent inventing 20,000 stable external
// targets every round for 10 rounds. Ours: the default limits. Reference: the same input
// with no limits (what the gateway remembered before admission). Printed: targets
// remembered and the table's retained heap.
func TestAdmissionBench(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") == "" {
		t.Skip("a benchmark: make bench (NETPULSE_BENCH=1)")
	}
	for _, n := range []int{1000, 5000} {
		run := func(l Limits) (Stats, uint64) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			tb := New(l)
			for round := range 10 {
				now := time.Unix(1_800_000_000+int64(round), 0)
				for s := range n {
					uid := fmt.Sprintf("uid-%d", s)
					for i := range 4 {
						tb.Admit(uid, now, Target(uint64(s)<<8|uint64(i)), true, false)
					}
				}
				for i := range 20000 {
					tb.Admit("uid-attacker", now, Target(1<<40|uint64(round)<<20|uint64(i)), true, true)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			st := tb.Stats()
			runtime.KeepAlive(tb)
			return st, after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
		}
		ours, oursHeap := run(Limits{})
		ref, refHeap := run(Limits{MaxStableTargetsPerSource: 1 << 30, MaxExternalTargetsPerSource: 1 << 30, MaxSources: 1 << 30})
		oursTargets := ours.StableTargets + ours.ExternalTargets
		refTargets := ref.StableTargets + ref.ExternalTargets
		if oursTargets > n*4+DefaultMaxStableTargetsPerSource+DefaultMaxExternalTargetsPerSource {
			t.Errorf("n=%d: %d targets remembered, over the bound", n, oursTargets)
		}
		fmt.Printf("BENCH admission_targets_remembered_n%d_flood ours=%d reference=%d ratio=%.1f\n", n, oursTargets, refTargets, float64(refTargets)/float64(oursTargets))
		fmt.Printf("BENCH admission_table_heap_bytes_n%d_flood ours=%d reference=%d ratio=%.1f\n", n, oursHeap, refHeap, float64(refHeap)/float64(max(oursHeap, 1)))
	}
}
