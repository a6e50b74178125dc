// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plausibleConfig is what the exporter sets for the shipped agents (3 echoes a round,
// rounds of at least 1 s).
func plausibleConfig() DecoderConfig {
	return DecoderConfig{FirstSightMaxAge: time.Minute, MaxPerRound: 10, MinRoundInterval: time.Second, MaxFutureSkew: time.Minute}
}

func icmpProbe(sent, lost int) probe {
	p := probe{addr: "10.0.2.10", typ: "icmp", kind: "pod", success: lost < sent, errType: "timeout", sent: sent, lost: lost, stable: true}
	for range sent - lost {
		p.rtts = append(p.rtts, 1e-3)
	}
	return p
}

// Real rounds, 1 s apart with jitter and occasionally two in one batch, are never taken
// for forgeries: every echo is counted.
func TestPlausibleRealRoundsAreAllCounted(t *testing.T) {
	d := NewDecoder(plausibleConfig())
	a := newFakeAgent()
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0
	var sent uint64
	for i := range 2000 {
		now = now.Add(time.Second + time.Duration(rng.IntN(400)-200)*time.Millisecond)
		lost := 0
		if i%50 == 0 {
			lost = 3
		}
		r := d.Decode(a.round(now, icmpProbe(3, lost)), now)
		require.Empty(t, r.Skipped, "round %d", i)
		require.Len(t, r.Observations, 1)
		sent += r.Observations[0].Sent
	}
	assert.Equal(t, uint64(3*2000), sent, "every echo, the first round too (its series started with it)")
}

// The forgery: one point whose cumulative counts grew by ~1,000 rounds' worth of
// lost echoes. It is discarded and counted; the real rounds after it count as before and
// the pair's loss over the window is the real one.
func TestPlausibleForgedJumpIsDiscarded(t *testing.T) {
	d := NewDecoder(plausibleConfig())
	s := verdict.NewSummarizer(verdict.SummaryConfig{})
	a := newFakeAgent()
	now := t0
	feed := func(p probe) DecodeResult {
		now = now.Add(time.Second)
		r := d.Decode(a.round(now, p), now)
		s.Add(r.Observations...)
		return r
	}
	for range 30 {
		feed(icmpProbe(3, 0))
	}
	// The forger's round: 3,000 echoes sent, all lost, since the previous point 1 s ago.
	r := feed(icmpProbe(3000, 3000))
	assert.Equal(t, 2, r.Skipped[SkipImplausibleIncrement], "sent and lost (the histogram had no new reply)")
	require.Len(t, r.Observations, 1)
	assert.Zero(t, r.Observations[0].Sent, "the increment is not used")
	assert.False(t, r.Observations[0].Success, "its status still is")
	for range 30 {
		r = feed(icmpProbe(3, 0))
		require.Empty(t, r.Skipped)
		require.Equal(t, uint64(3), r.Observations[0].Sent)
	}
	sum, ok := s.Summary(observation.KeyOf(&r.Observations[0]))
	require.True(t, ok)
	assert.Zero(t, sum.LossRatio, "the forged echoes are not in the window")

	// Without the bound the same forgery dominates the window, as the issue measured.
	d0 := NewDecoder(DecoderConfig{FirstSightMaxAge: time.Minute})
	s0 := verdict.NewSummarizer(verdict.SummaryConfig{})
	a0 := newFakeAgent()
	now = t0
	for i := range 61 {
		now = now.Add(time.Second)
		p := icmpProbe(3, 0)
		if i == 30 {
			p = icmpProbe(3000, 3000)
		}
		r0 := d0.Decode(a0.round(now, p), now)
		s0.Add(r0.Observations...)
	}
	sum0, _ := s0.Summary(observation.KeyOf(&r.Observations[0]))
	assert.Greater(t, sum0.LossRatio, 0.9, "the reference: one point of 1,000 rounds outweighs 60 real ones")
}

// A forger interleaving points with the real agent's stream, 1 ns apart, cannot add more
// than the credit the stream earns: two rounds per second of its timestamps, at most four.
func TestPlausibleInterleavedForgerIsRateBound(t *testing.T) {
	d := NewDecoder(plausibleConfig())
	a := newFakeAgent()
	now := t0
	d.Decode(a.round(now, icmpProbe(3, 0)), now) // baseline
	var forged uint64
	for sec := range 60 {
		now = t0.Add(time.Duration(sec+1) * time.Second)
		for i := range 100 {
			ts := now.Add(time.Duration(i))
			r := d.Decode(a.round(ts, icmpProbe(10, 10)), ts)
			for _, o := range r.Observations {
				forged += o.Lost
			}
		}
	}
	// 60 s at 2 rounds/s of 10 echoes, plus the initial credit.
	assert.LessOrEqual(t, forged, uint64(60*2*10+4*10))
	assert.Greater(t, forged, uint64(0))
}

// After a gateway restart an agent's lifetime counts are a baseline, not one round, even
// when the series started less than FirstSightMaxAge ago.
func TestPlausibleFirstSightOfAHistoryIsABaseline(t *testing.T) {
	a := newFakeAgent()
	now := t0
	for range 50 {
		now = now.Add(time.Second)
		a.round(now, icmpProbe(3, 3))
	}
	d := NewDecoder(plausibleConfig())
	now = now.Add(time.Second)
	r := d.Decode(a.round(now, icmpProbe(3, 0)), now)
	require.Len(t, r.Observations, 1)
	assert.Empty(t, r.Skipped, "a history is no forgery")
	assert.Zero(t, r.Observations[0].Sent, "51 s of history (< FirstSightMaxAge) is still only a baseline")
	now = now.Add(time.Second)
	r = d.Decode(a.round(now, icmpProbe(3, 0)), now)
	assert.Equal(t, uint64(3), r.Observations[0].Sent)
	assert.Zero(t, r.Observations[0].Lost)

	// A series that started one round ago counts in full.
	b := newFakeAgent()
	now = now.Add(time.Second)
	r = d.Decode(b.round(now, probe{addr: "10.0.3.10", typ: "icmp", kind: "pod", sent: 3, lost: 1, success: true, rtts: []float64{1e-3, 1e-3}, stable: true}), now)
	require.Len(t, r.Observations, 1)
	assert.Equal(t, uint64(3), r.Observations[0].Sent)
}

// A count that goes down while its StartTimestamp stays is no restart: it is discarded,
// not taken whole as an increment.
func TestPlausibleDecreaseWithinASeries(t *testing.T) {
	d := NewDecoder(plausibleConfig())
	a := newFakeAgent()
	now := t0
	for range 5 {
		now = now.Add(time.Second)
		d.Decode(a.round(now, icmpProbe(3, 0)), now)
	}
	s := a.series["10.0.2.10|icmp"]
	s.sent -= 9 // the next point reports fewer echoes than the previous one, same start
	now = now.Add(time.Second)
	r := d.Decode(a.round(now, icmpProbe(3, 0)), now)
	assert.Equal(t, 1, r.Skipped[SkipImplausibleIncrement])
	assert.Zero(t, r.Resets)
	assert.Zero(t, r.Observations[0].Sent)
	now = now.Add(time.Second)
	r = d.Decode(a.round(now, icmpProbe(3, 0)), now)
	assert.Empty(t, r.Skipped)
	assert.Equal(t, uint64(3), r.Observations[0].Sent, "the lower value became the baseline")
}

func TestPlausibleFutureTimestamps(t *testing.T) {
	d := NewDecoder(plausibleConfig())
	a := newFakeAgent()
	r := d.Decode(a.round(t0.Add(2*time.Minute), icmpProbe(3, 0)), t0)
	assert.Empty(t, r.Observations)
	assert.Equal(t, 5, r.Skipped[SkipFutureTimestamp], "status, loss, sent, lost, duration")
	r = d.Decode(a.round(t0.Add(30*time.Second), icmpProbe(3, 0)), t0)
	assert.Len(t, r.Observations, 1, "within the skew")
}
