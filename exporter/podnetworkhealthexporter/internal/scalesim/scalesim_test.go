// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package scalesim

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkBounds asserts the scale model on one simulated run.
func checkBounds(t *testing.T, cfg Config, r Result) {
	t.Helper()
	cfg = cfg.withDefaults()
	t.Logf("N=%d interval=%v rounds=%d observations=%d objects=%d (max %d) writes=%d (%.2f/s, by priority %v) backlog max %d end %d heartbeat %v events %d dead target %.2f intervals, its stable pair written after %.2f heap %.1f MiB series %d (reference %d)",
		r.N, r.Interval, r.Rounds, r.Observations, r.Objects, r.ObjectsMax, r.Writes, r.WritesPerSec, r.WritesByPrio, r.MaxBacklog,
		r.PendingAtEnd, r.Heartbeat, r.EventsEmitted, r.DeadTargetIntervals, r.DeadPairWrittenIntervals, r.HeapMiB, r.Series, r.ReferenceSeries)
	assert.LessOrEqual(t, r.ObjectsMax, (cfg.M+1)*cfg.N, "objects <= (M+1)·N at any time")
	assert.Greater(t, r.Objects, 0)
	assert.LessOrEqual(t, r.WritesPerSec, cfg.WritesPerSecond)
	require.Greater(t, r.DeadTargetIntervals, 0.0, "the dead target was never judged Unreachable")
	assert.LessOrEqual(t, r.DeadTargetIntervals, 2.0, "dead target Unreachable within 2 probe intervals")
	require.Greater(t, r.DeadPairWrittenIntervals, 0.0, "the dead target's stable pair was never written Unreachable")
	assert.LessOrEqual(t, r.DeadPairWrittenIntervals, 2.0+1/r.Interval.Seconds(), "its object is written within 2 intervals + 1 s")
	assert.Zero(t, r.FalseUnreachable, "no healthy target judged Unreachable")
	assert.Zero(t, r.OtherNodesMarked, "no other node blamed")
	assert.LessOrEqual(t, r.Series, (cfg.M*cfg.PairSeries+cfg.TargetSeries)*cfg.N, "series O(N)")
}

// A sampled cluster (N=100: each pair is probed once every 33 rounds) for 30 simulated
// minutes, the target dying after 15: every bound of the scale model holds.
func TestScaleModelSmall(t *testing.T) {
	cfg := Config{N: 100, Duration: 30 * time.Minute}
	r, err := Run(cfg)
	require.NoError(t, err)
	checkBounds(t, cfg, r)
}

// TestScaleBench prints the BENCH lines of `make bench` (NETPULSE_BENCH=1): N = 1,000 and
// 5,000 over 2 simulated hours with the shipped defaults, against the pair-per-object
// model of the first release.
func TestScaleBench(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") != "1" {
		t.Skip("set NETPULSE_BENCH=1 (make bench)")
	}
	perPair, perStreamPair := ReferenceBytes(20000)
	t.Logf("reference model: %.0f B per summarised pair, %.0f B per pair of decoder streams", perPair, perStreamPair)
	for _, n := range []int{1000, 5000} {
		cfg := Config{N: n}
		start := time.Now()
		r, err := Run(cfg)
		require.NoError(t, err)
		t.Logf("N=%d simulated in %v", n, time.Since(start).Round(time.Second))
		checkBounds(t, cfg, r)
		refObjects := n * (n - 1)
		refHeap := (float64(r.PairsSeenInTTL)*perPair + float64(r.PairsSeenTotal)*perStreamPair) / (1 << 20)
		fmt.Printf("BENCH pnh_objects_n%d ours=%d reference=%d ratio=%.1f\n", n, r.Objects, refObjects, float64(refObjects)/float64(r.Objects))
		fmt.Printf("BENCH pnh_writes_per_s_n%d ours=%.2f reference=5 ratio=%.2f\n", n, r.WritesPerSec, 5/r.WritesPerSec)
		fmt.Printf("BENCH dead_target_rounds_n%d ours=%.2f reference=2 ratio=%.2f\n", n, r.DeadTargetIntervals, 2/r.DeadTargetIntervals)
		fmt.Printf("BENCH gateway_heap_mib_n%d ours=%.1f reference=%.0f ratio=%.1f\n", n, r.HeapMiB, refHeap, refHeap/r.HeapMiB)
		fmt.Printf("BENCH gateway_series_n%d ours=%d reference=%d ratio=%.1f\n", n, r.Series, r.ReferenceSeries, float64(r.ReferenceSeries)/float64(r.Series))
		fmt.Printf("# N=%d interval=%v objects_max=%d backlog_max=%d pending_end=%d heartbeat=%v dead_pair_written_intervals=%.2f writes_by_priority=%v pairs_in_ttl=%d pairs_2h=%d\n",
			n, r.Interval, r.ObjectsMax, r.MaxBacklog, r.PendingAtEnd, r.Heartbeat, r.DeadPairWrittenIntervals, r.WritesByPrio, r.PairsSeenInTTL, r.PairsSeenTotal)
	}
}
