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

func logResult(t *testing.T, r Result) {
	t.Helper()
	t.Logf("N=%d interval=%v rounds=%d batches=%d points=%d observations=%d skipped=%d refused=%d objects=%d (max %d, API %d) writes=%d (%.2f/s, peak %d/min) conflicts=%d failed=%d backlog max %d end %d drain %v heartbeat %v events %d detect verdict %.2f write %.2f rounds heap %.1f MiB rss %.0f MiB series %d wall %v requests %v",
		r.N, r.Interval, r.Rounds, r.Batches, r.DataPoints, r.Observations, r.DecodeSkipped, r.AdmissionRefused, r.Objects, r.ObjectsMax, r.APIObjects,
		r.Writes, r.WritesPerSec, r.PeakWritesPerMinute, r.Conflicts, r.FailedWrites, r.MaxBacklog, r.PendingAtEnd, r.DrainAfterFault, r.Heartbeat,
		r.EventsEmitted, r.DetectVerdictRounds, r.DetectWriteRounds, r.HeapMiB, r.PeakRSSMiB, r.Series, r.Wall.Round(time.Second), r.Requests)
}

// checkBounds asserts the scale model on one simulated run.
func checkBounds(t *testing.T, cfg Config, r Result) {
	t.Helper()
	cfg = cfg.withDefaults()
	logResult(t, r)
	assert.Zero(t, r.DecodeSkipped, "the decoder used every data point the agents sent")
	assert.Zero(t, r.AdmissionRefused, "the admission refused nothing")
	assert.Greater(t, r.Observations, 0)
	// Dual-stack pods have one object per family and pair: (M+1) per source and family.
	assert.LessOrEqual(t, r.ObjectsMax, 2*(cfg.M+1)*cfg.N, "objects O(N) at any time")
	assert.Greater(t, r.Objects, 0)
	assert.LessOrEqual(t, float64(r.PeakWritesPerMinute), cfg.QPS*60+float64(cfg.Burst), "never above the write budget in any minute")
	assert.Greater(t, r.Conflicts, 0, "conflicts were injected")
	require.Greater(t, r.DetectVerdictRounds, 0.0, "the dead target was never judged Unreachable")
	assert.LessOrEqual(t, r.DetectVerdictRounds, 3.0, "dead target Unreachable within 3 probe intervals")
	require.Greater(t, r.DetectWriteRounds, 0.0, "no Unreachable status of the dead target's pairs reached the API")
	assert.Zero(t, r.FalseUnreachable, "no healthy target judged Unreachable")
	assert.Zero(t, r.OtherNodesMarked, "no other node blamed")
	assert.LessOrEqual(t, r.Series, (cfg.M*cfg.PairSeries+cfg.TargetSeries)*cfg.N*2, "series O(N)")
}

// A sampled cluster (N=100: each pair is probed once every 33 rounds) for 30 simulated
// minutes, a node dying after 15: every bound of the scale model holds.
func TestScaleModelSmall(t *testing.T) {
	cfg := Config{N: 100, Duration: 30 * time.Minute}
	r, err := Run(t, cfg)
	require.NoError(t, err)
	checkBounds(t, cfg, r)
}

// TestScaleBench prints the BENCH lines of `make bench` (NETPULSE_BENCH=1): N = 1,000 and
// 5,000 over 2 simulated hours with the shipped defaults.
func TestScaleBench(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") != "1" {
		t.Skip("set NETPULSE_BENCH=1 (make bench)")
	}
	for _, n := range []int{1000, 5000} {
		cfg := Config{N: n}
		r, err := Run(t, cfg)
		require.NoError(t, err)
		checkBounds(t, cfg, r)
		fmt.Printf("BENCH pnh_objects_n%d ours=%d reference=- ratio=-\n", n, r.Objects)
		fmt.Printf("BENCH api_writes_peak_per_min_n%d ours=%d reference=%d ratio=%.2f\n", n, r.PeakWritesPerMinute, int(5*60), float64(5*60)/float64(r.PeakWritesPerMinute))
		fmt.Printf("# N=%d wall=%v\n", n, r.Wall.Round(time.Second))
	}
}
