// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package gray

import (
	"math"
	"math/rand/v2"
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

// AddWindow sums two windows slot by slot: the scales of the sum are the sums of the
// scales, and slots older than the destination's range are dropped.
func TestAddWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	a, b := NewWindow(4, 10*time.Second), NewWindow(4, 10*time.Second)
	a.Add(t0, 10, 1)
	a.Add(t0.Add(10*time.Second), 10, 2)
	b.Add(t0.Add(10*time.Second), 5, 5)
	b.Add(t0.Add(20*time.Second), 6, 0)
	sum := NewWindow(4, 10*time.Second)
	sum.AddWindow(a)
	sum.AddWindow(b)
	now := t0.Add(25 * time.Second)
	if got, want := sum.Total(now), (Counts{Sent: 31, Lost: 8}); got != want {
		t.Fatalf("total %+v, want %+v", got, want)
	}
	var buf [16]Scale
	if sc := sum.Scales(now, time.Time{}, buf[:0]); sc[0].Counts != (Counts{Sent: 6}) || sc[1].Counts != (Counts{Sent: 21, Lost: 7}) || sc[1].Worst != 7 {
		t.Fatalf("scales %+v", sc)
	}
	sum.Reset()
	if sum.Total(now) != (Counts{}) {
		t.Fatal("reset keeps counts")
	}
	// b's oldest slot falls outside a 1-slot window.
	one := NewWindow(1, 10*time.Second)
	one.AddWindow(b)
	if got := one.Total(now); got != (Counts{Sent: 6}) {
		t.Fatalf("1-slot sum %+v", got)
	}
}

// The burst test's grain is a third of a slot among the newest two slots: a loss that
// began at a slot's start shows in two thirds of it after 20 s, not in two slots after 30 s
// or more; losses all in one third are still one burst; a slot older than the fine ring,
// or losses the ring missed, count whole.
func TestBurstGrainIsAThirdOfASlot(t *testing.T) {
	start := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) // a slot's start
	spread := NewWindow(60, 30*time.Second)
	spread.Add(start.Add(time.Second), 36, 6)
	spread.Add(start.Add(11*time.Second), 36, 6)
	now := start.Add(12 * time.Second)
	s := spread.Scales(now, time.Time{}, nil)
	require.NotEmpty(t, s)
	assert.Equal(t, uint64(6), s[0].Worst, "the most lost in a third")
	var l Loss
	LossConfig{}.Judge(&l, spread, Counts{}, now)
	assert.True(t, l.Lossy, "12 of 72 echoes over two thirds of one slot")

	together := NewWindow(60, 30*time.Second)
	together.Add(start.Add(time.Second), 36, 6)
	together.Add(start.Add(9*time.Second), 36, 6)
	s = together.Scales(now, time.Time{}, nil)
	assert.Equal(t, uint64(12), s[0].Worst, "one third holds every loss")
	var l2 Loss
	LossConfig{}.Judge(&l2, together, Counts{}, now)
	assert.False(t, l2.Lossy, "12 of 72 echoes within 10 s: a burst")

	// Three slots on, the first slot's thirds have left the fine ring: a late count into
	// it is judged whole.
	late := NewWindow(60, 30*time.Second)
	late.Add(start.Add(95*time.Second), 10, 1)
	late.Add(start.Add(time.Second), 36, 3)
	late.Add(start.Add(11*time.Second), 36, 3)
	s = late.Scales(start.Add(95*time.Second), time.Time{}, nil)
	assert.Equal(t, uint64(6), s[len(s)-1].Worst, "the old slot's losses are one burst")

	// Pooled windows keep the grain.
	sum := NewWindow(60, 30*time.Second)
	sum.AddWindow(spread)
	sum.AddWindow(together)
	s = sum.Scales(now, time.Time{}, nil)
	assert.Equal(t, uint64(18), s[0].Worst, "6 + 12 in the first third")
	sum.Reset()
	assert.Equal(t, Counts{}, sum.Total(now))
}

// A healed loss is one episode, whatever the heal's phase in a slot and however late its
// rounds are counted: the rounds of the episode's end, dated before the clear, must not
// set it again (dual-stack real nodes: 5 s rounds, 2 observers, 11 or 22 echoes a round).
func TestAHealedLossIsOneEpisode(t *testing.T) {
	for _, perRound := range []uint64{11, 22} {
		for _, delay := range []time.Duration{0, 5 * time.Second, 10 * time.Second} {
			for phase := range 30 {
				for seed := range uint64(4) {
					rng := rand.New(rand.NewPCG(seed, uint64(phase)))
					w := NewWindow(60, 30*time.Second)
					var l Loss
					heal := t0.Add(5*time.Minute + time.Duration(phase)*time.Second)
					type round struct {
						at         time.Time
						sent, lost uint64
					}
					var pending []round
					onsets, clears := 0, 0
					for now := t0; now.Before(heal.Add(10 * time.Minute)); now = now.Add(time.Second) {
						if now.Sub(t0)%(5*time.Second) == 0 {
							p := 0.2
							if !now.Before(heal) {
								p = 0
							}
							r := round{at: now, sent: perRound}
							for range r.sent {
								if rng.Float64() < p {
									r.lost++
								}
							}
							pending = append(pending, r)
						}
						for len(pending) > 0 && !pending[0].at.Add(delay).After(now) {
							w.Add(pending[0].at, pending[0].sent, pending[0].lost)
							pending = pending[1:]
						}
						if (LossConfig{}).Judge(&l, w, Counts{}, now) {
							if l.Lossy {
								onsets++
							} else {
								clears++
							}
						}
					}
					require.Equal(t, 1, onsets, "%d a round, delay %v, heal at %d s into a slot, seed %d: episodes", perRound, delay, phase, seed)
					require.Equal(t, 1, clears, "delay %v, heal at %d s into a slot, seed %d: clears", delay, phase, seed)
				}
			}
		}
	}
}

// A verdict on a short window clears once the window no longer holds its evidence, even
// where the window can never hold the clean echoes the rate test asks for at a low level:
// a pair's own window (10 slots, ~360 echoes at 1.2 echoes/s) against ~490 for a verdict
// at 2.5 %. Before, such a verdict, set on a healed episode's losses, held for good.
func TestAShortWindowsVerdictDoesNotOutliveItsEvidence(t *testing.T) {
	w := NewWindow(10, 30*time.Second)
	var l Loss
	cfg := LossConfig{Evidence: 18}
	at := t0
	for range 10 {
		w.Add(at, 36, 1) // 2.8 %
		cfg.Judge(&l, w, Counts{}, at.Add(29*time.Second))
		at = at.Add(30 * time.Second)
	}
	require.True(t, l.Lossy, "2.8 %% over 5 minutes")
	require.Less(t, l.Level, 0.03)
	cleared := -1
	for s := range 30 {
		w.Add(at, 36, 0)
		if cfg.Judge(&l, w, Counts{}, at.Add(29*time.Second)) && !l.Lossy {
			cleared = s + 1
			break
		}
		at = at.Add(30 * time.Second)
	}
	require.Positive(t, cleared, "never cleared")
	assert.LessOrEqual(t, cleared, 10, "cleared within the window's length of clean slots")
}
