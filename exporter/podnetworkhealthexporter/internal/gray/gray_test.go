// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package gray

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func TestWindowScalesForgetTheOld(t *testing.T) {
	w := NewWindow(8, 10*time.Second)
	w.Add(t0, 10, 5)                     // slot 0
	w.Add(t0.Add(15*time.Second), 10, 1) // slot 1
	w.Add(t0.Add(75*time.Second), 10, 0) // slot 7
	s := w.Scales(t0.Add(75*time.Second), time.Time{}, nil)
	require.NotEmpty(t, s)
	assert.Equal(t, Counts{Sent: 10}, s[0].Counts, "the newest slot alone")
	assert.Equal(t, Counts{Sent: 30, Lost: 6}, s[len(s)-1].Counts, "the whole window")
	// 85 s: slot 0 has left the window.
	w.Add(t0.Add(85*time.Second), 10, 0)
	assert.Equal(t, Counts{Sent: 30, Lost: 1}, w.Total(t0.Add(85*time.Second)))
	// notBefore cuts the older slots.
	s = w.Scales(t0.Add(85*time.Second), t0.Add(70*time.Second), nil)
	assert.Equal(t, Counts{Sent: 20}, s[len(s)-1].Counts)
	// Long after, nothing is left.
	assert.Equal(t, Counts{}, w.Total(t0.Add(time.Hour)))
}

func TestStatistics(t *testing.T) {
	assert.InDelta(t, 0.01407, KL(0.01, 0.001), 1e-4)
	assert.Zero(t, LLR(1, 1000, 0.001), "at the background: no evidence")
	assert.Greater(t, LLR(20, 144, 0.001), 12.0)
	assert.InDelta(t, 0.0, WilsonLower(0, 100, 2), 1e-12)
	assert.InDelta(t, 0.0385, WilsonUpper(0, 100, 2), 1e-3)
	assert.InDelta(t, 853, SamplesToDetect(0.01, 0.001, 12), 1)
	assert.True(t, math.IsInf(SamplesToDetect(0.001, 0.001, 12), 1))
}

// feed adds one round of echoes of a target with loss p from observers observers, each
// sending echoes echoes.
func feed(rng *rand.Rand, w *Window, c *Contributors, at time.Time, p float64, observers, echoes int, span time.Duration) {
	for o := range observers {
		lost := 0
		for range echoes {
			if rng.Float64() < p {
				lost++
			}
		}
		w.Add(at, uint64(echoes), uint64(lost))
		if c != nil {
			c.Add(string(rune('a'+o)), uint64(echoes), uint64(lost), at, span, time.Time{})
		}
	}
}

// detect runs the loss judgement on a target lossy at p from start, at the shipped
// budget (10 s rounds, 4 observers, 3 echoes), and returns the rounds to a verdict (-1:
// none within limit).
func detect(seed uint64, p float64, limit int) int {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := NewWindow(60, 30*time.Second)
	var c Contributors
	var l Loss
	cfg := LossConfig{}
	for r := range limit {
		at := t0.Add(time.Duration(r) * 10 * time.Second)
		feed(rng, w, &c, at, p, 4, 3, 30*time.Minute)
		_, top := c.Top()
		if cfg.Judge(&l, w, top, at) && l.Lossy {
			return r + 1
		}
	}
	return -1
}

func TestLossIsJudgedAndBackgroundIsNot(t *testing.T) {
	for seed := range uint64(20) {
		r := detect(seed, 0.05, 200)
		require.Positive(t, r, "seed %d: 5%% loss judged", seed)
		assert.LessOrEqual(t, r, 18, "seed %d: 5%% loss within 3 minutes at 10 s rounds", seed)
		assert.Equal(t, -1, detect(seed, 0.001, 180), "seed %d: 30 minutes of 0.1%% background loss: no verdict", seed)
	}
}

func TestLossClearsWithHysteresis(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	w := NewWindow(60, 30*time.Second)
	var l Loss
	cfg := LossConfig{}
	at := t0
	for range 30 {
		at = at.Add(10 * time.Second)
		feed(rng, w, nil, at, 0.2, 4, 3, 0)
		cfg.Judge(&l, w, Counts{}, at)
	}
	require.True(t, l.Lossy)
	assert.InDelta(t, 0.2, l.Level, 0.08)
	cleared := -1
	for r := range 120 {
		at = at.Add(10 * time.Second)
		feed(rng, w, nil, at, 0, 4, 3, 0)
		if cfg.Judge(&l, w, Counts{}, at) {
			cleared = r
			break
		}
	}
	require.False(t, l.Lossy, "healed")
	assert.Positive(t, cleared, "not on the first healthy round")
	// The old episode still fills the long scales: no new verdict on it.
	for range 60 {
		at = at.Add(10 * time.Second)
		feed(rng, w, nil, at, 0, 4, 3, 0)
		assert.False(t, cfg.Judge(&l, w, Counts{}, at) && l.Lossy, "the cleared episode sets nothing again")
	}
}

func TestOneContributorIsLeftOut(t *testing.T) {
	// One observer loses everything it sends (a lossy observer, or a liar); three others
	// see no loss: the target is not lossy.
	w := NewWindow(60, 30*time.Second)
	var c Contributors
	var l Loss
	for r := range 120 {
		at := t0.Add(time.Duration(r) * 10 * time.Second)
		w.Add(at, 3, 3)
		c.Add("liar", 3, 3, at, 30*time.Minute, time.Time{})
		for _, o := range []string{"a", "b", "c"} {
			w.Add(at, 3, 0)
			c.Add(o, 3, 0, at, 30*time.Minute, time.Time{})
		}
		_, top := c.Top()
		LossConfig{}.Judge(&l, w, top, at)
		require.False(t, l.Lossy, "round %d: one node's losses make no verdict", r)
	}
	// Without leaving it out the same counts are judged lossy: the test can fail.
	LossConfig{}.Judge(&l, w, Counts{}, t0.Add(1200*time.Second))
	assert.True(t, l.Lossy)
}

func TestContributorsAreBounded(t *testing.T) {
	var c Contributors
	for i := range 1000 {
		c.Add(string(rune(i)), 3, uint64(i%3), t0, time.Minute, time.Time{})
	}
	assert.LessOrEqual(t, c.Distinct(), 4)
	k, top := c.Top()
	assert.NotEmpty(t, k)
	assert.Equal(t, uint64(2), top.Lost)
}

func TestLatencyBaselineAndRun(t *testing.T) {
	var b Baseline
	cfg := LatencyConfig{}
	for range 100 {
		b.Learn(cfg, 200*time.Microsecond)
	}
	require.True(t, b.Warm(cfg))
	assert.InDelta(t, 200e3, float64(b.RTT()), 1e3)
	assert.False(t, b.High(cfg, 5*time.Millisecond))
	assert.True(t, b.High(cfg, 21*time.Millisecond), "+20 ms is high")
	// A congestion does not become the baseline within it.
	for range 200 {
		b.Learn(cfg, 200*time.Millisecond)
	}
	assert.True(t, b.High(cfg, 200*time.Millisecond), "still high after 200 high samples")

	var l Latency
	for i := range 2 {
		assert.False(t, cfg.Step(&l, true, t0.Add(time.Duration(i)*time.Second), t0), "not before 3 rounds")
	}
	assert.False(t, cfg.Step(&l, true, t0.Add(time.Second), t0), "the same round counts once")
	assert.True(t, cfg.Step(&l, true, t0.Add(2*time.Second), t0))
	assert.True(t, l.High)
	assert.True(t, Majority(2, 3))
	assert.False(t, Majority(1, 1), "one voter is never a majority")
	assert.False(t, Majority(2, 4))
}

func TestConfigValidate(t *testing.T) {
	assert.NoError(t, LossConfig{}.Validate())
	assert.ErrorContains(t, LossConfig{Threshold: 0.0005}.Validate(), "threshold")
	assert.ErrorContains(t, LossConfig{Background: 1}.Validate(), "background")
	assert.ErrorContains(t, LatencyConfig{Margin: -1}.Validate(), "margin")
}

// A burst in a small sample (a starved agent losing a few echoes in a row) sets nothing,
// nor does a burst in one slot however many echoes it holds; the same rate spread over
// two slots does.
func TestSmallBurstsSetNothing(t *testing.T) {
	w := NewWindow(60, 30*time.Second)
	w.Add(t0, 18, 4)
	var l Loss
	LossConfig{}.Judge(&l, w, Counts{}, t0)
	assert.False(t, l.Lossy, "4 of 18 echoes")
	for i := range 6 {
		w.Add(t0.Add(time.Duration(i)*time.Second), 18, 4)
	}
	LossConfig{}.Judge(&l, w, Counts{}, t0.Add(6*time.Second))
	assert.False(t, l.Lossy, "28 of 126 echoes, all in one slot")
	// The CI case: 4 of one pair's 60 echoes lost in a second, then a clean minute.
	p := NewWindow(10, 30*time.Second)
	p.Add(t0, 60, 4)
	p.Add(t0.Add(30*time.Second), 90, 0)
	p.Add(t0.Add(60*time.Second), 90, 0)
	var pl Loss
	for s := range 90 {
		LossConfig{}.Judge(&pl, p, Counts{}, t0.Add(time.Duration(s)*time.Second))
		assert.False(t, pl.Lossy, "a burst of 4 in one slot, at %ds", s)
	}
	next := t0.Add(30 * time.Second)
	for i := range 6 {
		w.Add(next.Add(time.Duration(i)*time.Second), 18, 4)
	}
	LossConfig{}.Judge(&l, w, Counts{}, next.Add(6*time.Second))
	assert.True(t, l.Lossy, "56 of 252 echoes over two slots")
}

// Scales carry the worst slot's losses.
func TestScalesWorstSlot(t *testing.T) {
	w := NewWindow(8, time.Second)
	w.Add(t0, 10, 1)
	w.Add(t0.Add(time.Second), 10, 5)
	w.Add(t0.Add(2*time.Second), 10, 2)
	s := w.Scales(t0.Add(2*time.Second), time.Time{}, nil)
	require.Len(t, s, 4) // 1, 2, 4 and the whole 8 slots
	assert.Equal(t, []uint64{2, 5, 5, 5}, []uint64{s[0].Worst, s[1].Worst, s[2].Worst, s[3].Worst})
}

// A verdict clears within a few slots of clean echoes after the heal, however long the
// episode ran: the level does not dilute (on real nodes, at 1.2 echoes/s, a 20 % loss
// outlived its heal by more than 5 minutes when it did).
func TestClearsSoonAfterTheHeal(t *testing.T) {
	for _, lossySlots := range []int{4, 12, 40} {
		w := NewWindow(60, 30*time.Second)
		var l Loss
		at := t0
		for range lossySlots {
			w.Add(at, 36, 7) // 20 % at 1.2 echoes/s
			LossConfig{}.Judge(&l, w, Counts{}, at.Add(29*time.Second))
			at = at.Add(30 * time.Second)
		}
		require.True(t, l.Lossy, "%d slots of 20 %% loss", lossySlots)
		cleared := -1
		for s := range 20 {
			w.Add(at, 36, 0)
			if (LossConfig{}).Judge(&l, w, Counts{}, at.Add(29*time.Second)) && !l.Lossy {
				cleared = s + 1
				break
			}
			at = at.Add(30 * time.Second)
		}
		require.Positive(t, cleared, "never cleared after %d lossy slots", lossySlots)
		assert.LessOrEqual(t, cleared, 3, "clean slots to clear after %d lossy slots", lossySlots)
	}
}

// A sender judged lossy is left out up to its last lossy verdict; what it sends after its
// heal competes with the others for the leave-one-out, like any sender's.
func TestExcludingKeepsAHealedSendersFreshEchoes(t *testing.T) {
	var c Contributors
	lossyAt := t0.Add(time.Minute)
	span := 30 * time.Minute
	c.Add("healed", 30, 10, t0, span, time.Time{})               // its own loss, before its verdict
	c.Add("healed", 30, 6, t0.Add(2*time.Minute), span, lossyAt) // after the heal
	c.Add("other", 30, 4, t0.Add(2*time.Minute), span, time.Time{})
	judged := func(key string) (time.Time, bool) { return lossyAt, key == "healed" }
	// Left out: the healed sender's 10 before its verdict, and the largest of the rest:
	// its fresh 6 (not the other's 4).
	assert.Equal(t, Counts{Sent: 60, Lost: 16}, c.Excluding(judged))
	// Judged lossy again later: everything it sent so far is its own, the other is the rest.
	again := func(key string) (time.Time, bool) { return t0.Add(3 * time.Minute), key == "healed" }
	assert.Equal(t, Counts{Sent: 90, Lost: 20}, c.Excluding(again))
	// Not judged: the largest sender alone.
	assert.Equal(t, Counts{Sent: 60, Lost: 16}, c.Excluding(nil))
}

// nodeRound adds one round of a node's two sides: its target side (observers observers
// towards it) and its observer side (towards targets targets), echoes each, each echo lost
// at p, the senders named by node ("n0", "n1", ...) on both lists as the engine names them
// (a voter key, a target's "node:" key).
func nodeRound(rng *rand.Rand, target, observer *Window, tc, oc *Contributors, at time.Time, p float64, peers, echoes int) {
	for i := range peers {
		for _, side := range []struct {
			w   *Window
			c   *Contributors
			key string
		}{{target, tc, fmt.Sprintf("n%d", i)}, {observer, oc, fmt.Sprintf("node:n%d", i)}} {
			lost := 0
			for range echoes {
				if rng.Float64() < p {
					lost++
				}
			}
			side.w.Add(at, uint64(echoes), uint64(lost))
			side.c.Add(side.key, uint64(echoes), uint64(lost), at, 30*time.Minute, time.Time{})
		}
	}
}

func nodeOf(key string) string { return strings.TrimPrefix(key, "node:") }

// A node losing 5 % on both sides (its input: its peers' requests and its echoes'
// replies) is judged sooner on both sides' echoes than on either alone, as the bound
// counts them; healthy at the background, neither judges in 30 minutes.
func TestBothSidesOfALossyNodeAreJudgedTogether(t *testing.T) {
	run := func(seed uint64, p float64, both bool, limit int) int {
		rng := rand.New(rand.NewPCG(seed, 3))
		tw, ow := NewWindow(60, 30*time.Second), NewWindow(60, 30*time.Second)
		var tc, oc Contributors
		var l Loss
		for r := range limit {
			at := t0.Add(time.Duration(r) * 10 * time.Second)
			nodeRound(rng, tw, ow, &tc, &oc, at, p, 4, 3)
			_, top := tc.Top()
			var set bool
			if both {
				set = LossConfig{}.JudgeNode(&l, tw, top, []*Window{ow}, ExcludingAcross(nodeOf, nil, &tc, &oc), at)
			} else {
				set = LossConfig{}.Judge(&l, tw, top, at)
			}
			if set && l.Lossy {
				return r + 1
			}
		}
		return -1
	}
	var together, alone []float64
	for seed := range uint64(40) {
		b, a := run(seed, 0.05, true, 200), run(seed, 0.05, false, 200)
		require.Positive(t, b, "seed %d: judged on both sides", seed)
		require.Positive(t, a, "seed %d: judged on one side", seed)
		together, alone = append(together, float64(b)), append(alone, float64(a))
		assert.Equal(t, -1, run(seed, 0.001, true, 180), "seed %d: 30 minutes of 0.1 %% background", seed)
	}
	slices.Sort(together)
	slices.Sort(alone)
	t.Logf("5 %%: rounds to a verdict p50 %v on both sides, %v on one", together[20], alone[20])
	assert.Less(t, together[20], alone[20], "both sides' echoes judge sooner")
	assert.LessOrEqual(t, together[20], 7.0, "5 %% on both sides within 70 s at the median")
}

// One side's losses never make the other side lossy: a compromised agent reporting 60 %
// towards every target (its observer side) leaves its node's target side, which lost
// nothing, unjudged; its observer side is judged.
func TestOneSideNeverMakesTheOtherLossy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 3))
	tw, ow := NewWindow(60, 30*time.Second), NewWindow(60, 30*time.Second)
	var tc, oc Contributors
	var tl, ol Loss
	for r := range 90 {
		at := t0.Add(time.Duration(r) * 10 * time.Second)
		nodeRound(rng, tw, NewWindow(60, 30*time.Second), &tc, &Contributors{}, at, 0, 4, 3)
		nodeRound(rng, NewWindow(60, 30*time.Second), ow, &Contributors{}, &oc, at, 0.6, 4, 3)
		all := ExcludingAcross(nodeOf, nil, &tc, &oc)
		_, ttop := tc.Top()
		_, otop := oc.Top()
		LossConfig{}.JudgeNode(&tl, tw, ttop, []*Window{ow}, all, at)
		LossConfig{}.JudgeNode(&ol, ow, otop, []*Window{tw}, all, at)
		require.False(t, tl.Lossy, "round %d: the target side lost nothing", r)
	}
	assert.True(t, ol.Lossy, "the observer side is its own")
}

// One peer's losses in both directions (its echoes towards the node and the node's
// towards it: a lossy peer, or a liar) count as one node across both sides, and are left
// out: the node is not judged. Leaving out each side's largest apart would not remove the
// peer's losses on the other side, and the same counts judge the node lossy.
func TestOnePeerOnBothSidesIsLeftOutOnce(t *testing.T) {
	tw, ow := NewWindow(60, 30*time.Second), NewWindow(60, 30*time.Second)
	var tc, oc Contributors
	var l, weak Loss
	for r := range 60 {
		at := t0.Add(time.Duration(r) * 10 * time.Second)
		for i, name := range []string{"peer", "a", "b", "c"} {
			lost := uint64(0)
			if i == 0 {
				lost = 2
			}
			tw.Add(at, 3, lost)
			tc.Add(name, 3, lost, at, 30*time.Minute, time.Time{})
			ow.Add(at, 3, lost)
			oc.Add("node:"+name, 3, lost, at, 30*time.Minute, time.Time{})
		}
		_, top := tc.Top()
		LossConfig{}.JudgeNode(&l, tw, top, []*Window{ow}, ExcludingAcross(nodeOf, nil, &tc, &oc), at)
		require.False(t, l.Lossy, "round %d: one peer's losses on both sides", r)
		LossConfig{}.JudgeNode(&weak, tw, top, []*Window{ow}, top, at)
	}
	assert.True(t, weak.Lossy, "leaving out the peer on one side only judges the node")
}

// A burst on both sides of a node in one round (a starved agent: every observer's echoes
// towards it and its own towards every target, within one tick) sets nothing, however many
// echoes it holds; losses in two rounds of the same slot, on both sides, set it within the
// slot, where one side alone needs losses in two slots.
func TestABurstInOneRoundSetsNothing(t *testing.T) {
	fill := func(tw, ow *Window, tc, oc *Contributors, from, to int, lost func(r, i int) uint64) {
		for r := from; r < to; r++ {
			at := t0.Add(time.Duration(r) * 10 * time.Second)
			for i := range 4 {
				tw.Add(at, 3, lost(r, i))
				tc.Add(fmt.Sprintf("n%d", i), 3, lost(r, i), at, 30*time.Minute, time.Time{})
				ow.Add(at, 3, lost(r, i))
				oc.Add(fmt.Sprintf("node:n%d", i), 3, lost(r, i), at, 30*time.Minute, time.Time{})
			}
		}
	}
	judge := func(l *Loss, tw, ow *Window, tc, oc *Contributors, at time.Time) {
		_, top := tc.Top()
		LossConfig{}.JudgeNode(l, tw, top, []*Window{ow}, ExcludingAcross(nodeOf, nil, tc, oc), at)
	}
	// Slot-aligned: rounds 0-2 are one slot, in three ticks.
	tw, ow := NewWindow(60, 30*time.Second), NewWindow(60, 30*time.Second)
	var tc, oc Contributors
	var l Loss
	fill(tw, ow, &tc, &oc, -30, 0, func(int, int) uint64 { return 0 }) // five clean minutes
	fill(tw, ow, &tc, &oc, 0, 1, func(int, int) uint64 { return 2 })   // 16 of 24 echoes in one round
	for r := 1; r < 30; r++ {
		fill(tw, ow, &tc, &oc, r, r+1, func(int, int) uint64 { return 0 })
		judge(&l, tw, ow, &tc, &oc, t0.Add(time.Duration(r)*10*time.Second))
		require.False(t, l.Lossy, "round %d: a burst in one round", r)
	}

	// The same losses over two rounds of one slot: judged before the slot ends, on both
	// sides; one side alone (Judge) is not.
	tw, ow = NewWindow(60, 30*time.Second), NewWindow(60, 30*time.Second)
	tc, oc = Contributors{}, Contributors{}
	l = Loss{}
	var alone Loss
	fill(tw, ow, &tc, &oc, -30, 0, func(int, int) uint64 { return 0 })
	fill(tw, ow, &tc, &oc, 0, 2, func(int, int) uint64 { return 1 })
	at := t0.Add(20 * time.Second)
	judge(&l, tw, ow, &tc, &oc, at)
	assert.True(t, l.Lossy, "losses in two rounds from four nodes on both sides")
	_, top := tc.Top()
	LossConfig{}.Judge(&alone, tw, top, at)
	assert.False(t, alone.Lossy, "one side alone needs them in two slots")
}

// ScalesOf sums windows slot by slot and tick by tick; WorstTick is the worst tick of the
// sum, Worst the worst slot.
func TestScalesOfSumsWindowsAndTicks(t *testing.T) {
	a, b := NewWindow(8, 30*time.Second), NewWindow(8, 30*time.Second)
	a.Add(t0, 10, 2)                     // slot 0, tick 0
	b.Add(t0.Add(5*time.Second), 10, 1)  // slot 0, tick 0
	b.Add(t0.Add(25*time.Second), 10, 2) // slot 0, tick 2
	a.Add(t0.Add(40*time.Second), 10, 1) // slot 1, tick 1
	s := ScalesOf(t0.Add(40*time.Second), time.Time{}, nil, a, nil, b)
	require.NotEmpty(t, s)
	whole := s[len(s)-1]
	assert.Equal(t, Counts{Sent: 40, Lost: 6}, whole.Counts)
	assert.Equal(t, uint64(5), whole.Worst, "slot 0: 2+1+2")
	assert.Equal(t, uint64(3), whole.WorstTick, "slot 0, tick 0: 2+1")
	assert.Equal(t, Counts{Sent: 10, Lost: 1}, s[0].Counts, "the newest slot")
	assert.Equal(t, a.Scales(t0.Add(40*time.Second), time.Time{}, nil), ScalesOf(t0.Add(40*time.Second), time.Time{}, nil, a))
}

func TestExcludingAcrossCountsANodeOnce(t *testing.T) {
	var tc, oc Contributors
	tc.Add("x", 30, 6, t0, time.Hour, time.Time{})
	tc.Add("y", 30, 4, t0, time.Hour, time.Time{})
	oc.Add("node:y", 30, 4, t0, time.Hour, time.Time{})
	oc.Add("node:z", 30, 1, t0, time.Hour, time.Time{})
	assert.Equal(t, Counts{Sent: 60, Lost: 8}, ExcludingAcross(nodeOf, nil, &tc, &oc), "y's 4+4 is the largest")
	assert.Equal(t, Counts{Sent: 90, Lost: 14}, ExcludingAcross(nodeOf, func(n string) (time.Time, bool) { return t0, n == "x" }, &tc, &oc), "x blamed, and y")
}

// Both sides together need half the sample (30 echoes): a young window whose two sides
// lose in two rounds, from several nodes, is judged on 48 echoes; a starved agent's burst
// over two rounds (its own echoes' replies, one side) on the same sample is not.
func TestBothSidesNeedHalfTheSample(t *testing.T) {
	judge := func(targetLost, observerLost func(i int) uint64) bool {
		tw, ow := NewWindow(60, 30*time.Second), NewWindow(60, 30*time.Second)
		var tc, oc Contributors
		var l Loss
		for r := range 2 {
			at := t0.Add(time.Duration(r) * 10 * time.Second)
			for i := range 4 {
				tw.Add(at, 3, targetLost(i))
				tc.Add(fmt.Sprintf("n%d", i), 3, targetLost(i), at, 30*time.Minute, time.Time{})
				ow.Add(at, 3, observerLost(i))
				oc.Add(fmt.Sprintf("node:n%d", i), 3, observerLost(i), at, 30*time.Minute, time.Time{})
			}
		}
		_, top := oc.Top()
		LossConfig{}.JudgeNode(&l, ow, top, []*Window{tw}, ExcludingAcross(nodeOf, nil, &tc, &oc), t0.Add(10*time.Second))
		return l.Lossy
	}
	half := func(i int) uint64 { return uint64(1 - i%2) }
	none := func(int) uint64 { return 0 }
	assert.True(t, judge(half, half), "8 of 48 echoes over two rounds, both sides")
	assert.False(t, judge(none, func(int) uint64 { return 2 }), "16 of 24 of one side's echoes over two rounds")
}
