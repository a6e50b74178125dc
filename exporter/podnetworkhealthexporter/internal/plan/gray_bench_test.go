// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"
)

// The gray judgement against the physical limit (issue item 8). At the shipped budget (10 s
// rounds, K+M = 4 observers of each target a round, 3 echoes each: 1.2 echoes/s towards a
// node's pod, and as many from its own agent: 2.4/s cross the lossy node), how long does
// the engine take to blame a node losing p of its input, over many seeds, against the
// shortest expected time any sequential detector needs to tell p from the background p0
// with false-alarm odds e^-h from those echoes: h/KL(p‖p0) echoes (Wald, Lorden;
// gray.SamplesToDetect)? And how often does it blame a node in a healthy mesh with 0.1 %
// background loss? NETPULSE_BENCH=1 prints the BENCH lines (make bench,
// hack/bench.d/80-gray.sh); without it the test runs a few seeds as a smoke test.

const (
	benchRound       = 10 * time.Second
	benchEchoesPerS  = 2 * 4 * 3 / 10.0 // both sides of the node: (K+M) observers × 3 echoes per 10 s round, each way
	benchWarmRounds  = 6
	benchLimitRounds = 360 // an hour
)

// detectRounds runs the ring with node 5 losing p of its input from round benchWarmRounds
// (plus 0 to 2 rounds by seed: a fault begins anywhere in the judgement's 30 s slots, not
// always at a slot's start) and returns the rounds until node-5 is blamed for PacketLoss
// (-1: not within the limit).
func detectRounds(seed uint64, p float64) int {
	g := newGrayRun(12, seed)
	g.run(benchWarmRounds+int(seed%3), baseFate)
	for r := range benchLimitRounds {
		g.run(1, nodeLoss(5, p))
		if nodes := g.grayNodes(); nodes["node-5"] != "" && nodes["node-5"][:len("PacketLoss")] == "PacketLoss" {
			return r + 1
		}
	}
	return -1
}

// idealRounds is the reference detector on the same budget: a CUSUM of the exact
// per-echo log-likelihood ratio of p against the background p0 (it knows p: no real
// detector does better on average, Lorden), over every echo across the node (both sides,
// answered or not), alarming at h nats; a round's echoes are seen when the round ends.
// It returns the rounds to its alarm (-1: not within the limit). Its p50 and p99 are
// the bound's spread: the mean alone (SamplesToDetect) understates what any detector's
// p99 can be.
func idealRounds(seed uint64, p, p0, h float64) int {
	b := newBinomial(seed)
	perRound := int(benchEchoesPerS * benchRound.Seconds())
	up, down := math.Log(p/p0), math.Log((1-p)/(1-p0))
	s := 0.0
	for r := range benchLimitRounds {
		lost := b.lost(perRound, p)
		for i := range perRound {
			if i < lost {
				s += up
			} else {
				s = max(0, s+down)
			}
		}
		if s >= h {
			return r + 1
		}
	}
	return -1
}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)]
}

func TestGrayDetectionAgainstTheBound(t *testing.T) {
	bench := os.Getenv("NETPULSE_BENCH") == "1"
	seeds := uint64(4)
	if bench {
		seeds = 200
	}
	cfg := gray.LossConfig{}.WithDefaults()
	for _, p := range []float64{0.01, 0.02, 0.05, 0.1, 0.5} {
		var secs []float64
		missed := 0
		for seed := range seeds {
			r := detectRounds(seed*7919+uint64(p*1e4), p)
			if r < 0 {
				missed++
				continue
			}
			secs = append(secs, float64(r)*benchRound.Seconds())
		}
		// No detector sees a round before it ends: the bound is at least one round.
		bound := max(gray.SamplesToDetect(p, cfg.Background, cfg.Evidence)/benchEchoesPerS, benchRound.Seconds())
		// A detector that must not read one burst (a starved agent) as loss needs losses in
		// two rounds, and one that must not read an outage's edge (answered part-way) as
		// loss sees a round's fate only with the next round: 3 rounds at least, whatever p.
		// (The echoes are not independent in those two cases; the bound above assumes they
		// are.)
		robust := max(bound, 3*benchRound.Seconds())
		if len(secs) == 0 {
			t.Errorf("%.0f %% loss never blamed within an hour", 100*p)
			continue
		}
		p50, p99 := quantile(secs, 0.5), quantile(secs, 0.99)
		var ideal []float64
		for seed := range seeds {
			if r := idealRounds(seed*7919+uint64(p*1e4), p, cfg.Background, cfg.Evidence); r > 0 {
				ideal = append(ideal, float64(r)*benchRound.Seconds())
			}
		}
		i50, i99 := quantile(ideal, 0.5), quantile(ideal, 0.99)
		t.Logf("%5.1f %% loss: blamed in p50 %.0f s, p99 %.0f s (%d of %d seeds; %d missed the hour); bound %.0f s (burst- and edge-robust: %.0f s); the ideal CUSUM p50 %.0f s, p99 %.0f s", 100*p, p50, p99, len(secs), seeds, missed, bound, robust, i50, i99)
		if bench {
			fmt.Printf("BENCH gray_loss_%gpct_detect_p50_s ours=%.0f reference=%.0f ratio=%.2fx\n", 100*p, p50, bound, p50/bound)
			fmt.Printf("BENCH gray_loss_%gpct_detect_p99_s ours=%.0f reference=%.0f ratio=%.2fx\n", 100*p, p99, bound, p99/bound)
			fmt.Printf("BENCH gray_loss_%gpct_detect_p50_vs_robust_bound_s ours=%.0f reference=%.0f ratio=%.2fx\n", 100*p, p50, robust, p50/robust)
			fmt.Printf("BENCH gray_loss_%gpct_detect_p50_vs_ideal_s ours=%.0f reference=%.0f ratio=%.2fx\n", 100*p, p50, i50, p50/i50)
			fmt.Printf("BENCH gray_loss_%gpct_detect_p99_vs_ideal_s ours=%.0f reference=%.0f ratio=%.2fx\n", 100*p, p99, i99, p99/i99)
		}
		if p >= 0.05 {
			// The goal: 5 % judged and blamed within 2 minutes at the shipped rounds.
			if p50 > 120 {
				t.Errorf("%.0f %% loss: p50 %.0f s, over 2 minutes", 100*p, p50)
			}
		}
		if missed > 0 && p >= 0.02 {
			t.Errorf("%.0f %% loss missed the hour in %d seeds", 100*p, missed)
		}
	}
	// The budget for 1 % in 5 minutes: the echoes per target the bound needs, times the
	// engine's measured p50 ratio at 1 %.
	need := gray.SamplesToDetect(0.01, cfg.Background, cfg.Evidence) / 300
	// Both sides of the node count, so each side needs half.
	perRound := need / 2 * 10 / 3
	t.Logf("1 %% in 5 minutes needs %.1f echoes/s across the node at the bound: %.1f observers × 3 echoes per 10 s round on each side (shipped: 4)", need, perRound)
	if bench {
		fmt.Printf("BENCH gray_budget_for_1pct_in_5min_observers_per_round ours=%.1f reference=4 ratio=%.2fx\n", perRound, perRound/4)
	}
}

// False verdicts in a healthy mesh with 0.1 % background loss on every path: the pure
// judgement of one target window at the shipped budget over many target-hours (the engine
// adds the leave-one-out test on top, which only removes verdicts).
func TestGrayFalseVerdictsAtBackground(t *testing.T) {
	hours := 50
	if os.Getenv("NETPULSE_BENCH") == "1" {
		hours = 20000
	}
	cfg := gray.LossConfig{}
	falses := 0
	for h := range hours {
		rng := newBinomial(uint64(h))
		w := gray.NewWindow(60, 30*time.Second)
		var l gray.Loss
		t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
		for r := range benchLimitRounds {
			at := t0.Add(time.Duration(r) * benchRound)
			for range 4 {
				if lost := rng.lost(3, 0.001); lost < 3 {
					w.Add(at, 3, uint64(lost)) // answered rounds only, as the engine counts
				}
			}
			if cfg.Judge(&l, w, gray.Counts{}, at) && l.Lossy {
				falses++
			}
		}
	}
	// A node has three tests (its targets' side, its observer's side and both pooled,
	// graypooled.go), counted as independent: an upper bound, since the pooled one shares
	// the sides' echoes.
	perKiloNodeDay := 3 * float64(falses) / float64(hours) * 24 * 1000
	// With none seen, the rule of three bounds the rate at 95 %.
	upper := 3 * 3 / float64(hours) * 24 * 1000
	if falses > 0 {
		upper = perKiloNodeDay
	}
	t.Logf("0.1 %% background: %d false verdicts in %d target-hours: %.2f per 1,000 nodes per day (95 %% upper bound %.2f)", falses, hours, perKiloNodeDay, upper)
	if os.Getenv("NETPULSE_BENCH") == "1" {
		fmt.Printf("BENCH gray_false_verdicts_per_1000_nodes_day ours=%.2f reference=%.2f ratio=%s\n", perKiloNodeDay, upper, "upper95")
	}
	if falses > 0 && hours <= 50 {
		t.Errorf("%d false verdicts in %d target-hours of 0.1 %% background", falses, hours)
	}
}

// binomial draws losses.
type binomial struct{ rng *rand.Rand }

func newBinomial(seed uint64) binomial { return binomial{rand.New(rand.NewPCG(seed, 11))} }

func (b binomial) lost(n int, p float64) int {
	k := 0
	for range n {
		if b.rng.Float64() < p {
			k++
		}
	}
	return k
}
