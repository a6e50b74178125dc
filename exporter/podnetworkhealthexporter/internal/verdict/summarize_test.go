// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/contract"
)

const iv = 10 * time.Second

// at returns the time of round i.
func at(i int) time.Time { return t0.Add(time.Duration(i) * iv) }

// obs builds an observation of the simulated pair; ICMP observations carry 3 echoes.
func obs(i int, typ string, ok bool, rtts ...float64) observation.Observation {
	o := observation.Observation{Source: simSource(), Target: simTarget(), ProbeType: typ, Timestamp: at(i), Success: ok}
	o.RTT = observation.NewHistogram(observation.DefaultScale)
	for _, r := range rtts {
		o.RTT.Record(r)
	}
	if typ == contract.ProbeTypeICMP {
		o.Sent = 3
		if !ok {
			o.Lost = 3
		}
	}
	if !ok {
		o.ErrorType = contract.ErrorTypeTimeout
		o.Message = typ + " 10.0.2.10: timeout"
	}
	return o
}

func icmpRound(i int, ok bool) observation.Observation {
	if ok {
		return obs(i, contract.ProbeTypeICMP, true, 300e-6, 310e-6, 320e-6)
	}
	return obs(i, contract.ProbeTypeICMP, false)
}

var simKey = func() observation.PairKey { o := icmpRound(0, true); return observation.KeyOf(&o) }()

func verdictAfter(t *testing.T, s *Summarizer) observation.Verdict {
	t.Helper()
	sum, ok := s.Summary(simKey)
	require.True(t, ok)
	return sum.Verdict
}

func TestVerdictHysteresis(t *testing.T) {
	s := NewSummarizer(SummaryConfig{})
	steps := []struct {
		ok   bool
		want observation.Verdict
	}{
		{false, observation.VerdictUnknown}, {false, observation.VerdictUnknown}, // Unknown needs 3 failures too
		{true, observation.VerdictReachable},                                                                               // first success from Unknown: at once
		{false, observation.VerdictReachable}, {false, observation.VerdictReachable}, {true, observation.VerdictReachable}, // 2 failures are not enough
		{false, observation.VerdictReachable}, {false, observation.VerdictReachable}, {false, observation.VerdictUnreachable}, // the 3rd is
		{true, observation.VerdictUnreachable}, {false, observation.VerdictUnreachable}, {true, observation.VerdictUnreachable}, // successes must be consecutive
		{true, observation.VerdictReachable},
	}
	for i, st := range steps {
		s.Add(icmpRound(i, st.ok))
		assert.Equal(t, st.want, verdictAfter(t, s), "after round %d", i)
	}
	sum, _ := s.Summary(simKey)
	require.Len(t, sum.Outages, 1)
	o := sum.Outages[0]
	assert.Equal(t, at(6), o.Start, "the first failed round of the run")
	assert.Equal(t, at(11), o.End, "the first successful round of the restoring run")
	assert.Equal(t, "restored after 50s", o.Message)
	assert.Equal(t, "Timeout", o.Reason)
	assert.Equal(t, at(12), sum.VerdictSince)
}

func TestVerdictUnknownToUnreachable(t *testing.T) {
	s := NewSummarizer(SummaryConfig{FailuresToUnreachable: 2})
	s.Add(icmpRound(0, false))
	s.Add(icmpRound(1, false))
	sum, _ := s.Summary(simKey)
	assert.Equal(t, observation.VerdictUnreachable, sum.Verdict)
	require.Len(t, sum.Outages, 1)
	assert.True(t, sum.Outages[0].Ongoing())
	assert.Equal(t, at(0), sum.Outages[0].Start)
	assert.Contains(t, sum.Outages[0].Message, "unreachable after 2 consecutive failed rounds: icmp 10.0.2.10: timeout")
	tr := s.Transitions()
	require.Len(t, tr, 1)
	assert.Equal(t, observation.Transition{Key: simKey, Old: observation.VerdictUnknown, New: observation.VerdictUnreachable, At: at(1), Flips: 1, Message: sum.Outages[0].Message}, tr[0])
}

// refVerdicts is an independent model of the hysteresis rules.
func refVerdicts(rounds []bool, f, sN int) []observation.Verdict {
	v := observation.VerdictUnknown
	fails, succs := 0, 0
	out := make([]observation.Verdict, len(rounds))
	for i, ok := range rounds {
		if ok {
			fails, succs = 0, succs+1
		} else {
			fails, succs = fails+1, 0
		}
		switch {
		case ok && v == observation.VerdictUnknown:
			v = observation.VerdictReachable
		case ok && v == observation.VerdictUnreachable && succs >= sN:
			v = observation.VerdictReachable
		case !ok && fails >= f:
			v = observation.VerdictUnreachable
		}
		out[i] = v
	}
	return out
}

func TestVerdictMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for iter := range 200 {
		f, sN, maxOut := 1+rng.IntN(4), 1+rng.IntN(3), 1+rng.IntN(4)
		pFail := rng.Float64()
		rounds := make([]bool, 20+rng.IntN(150))
		for i := range rounds {
			rounds[i] = rng.Float64() >= pFail
		}
		want := refVerdicts(rounds, f, sN)
		s := NewSummarizer(SummaryConfig{FailuresToUnreachable: f, SuccessesToReachable: sN, MaxOutages: maxOut})
		downs := 0
		for i, ok := range rounds {
			// Split the round over two calls and probe types, in a random order: the round
			// succeeds when either succeeded.
			a, b := obs(i, contract.ProbeTypeICMP, ok && rng.IntN(2) == 0), obs(i, contract.ProbeTypeTCP, false)
			if ok && !a.Success {
				b = obs(i, contract.ProbeTypeTCP, true, 1e-3)
			}
			if rng.IntN(2) == 0 {
				a, b = b, a
			}
			if rng.IntN(2) == 0 {
				s.Add(a, b)
			} else {
				s.Add(a)
				if rng.IntN(3) == 0 {
					s.Transitions() // a reader in between must not matter
				}
				s.Add(b)
			}
			sum, _ := s.Summary(simKey)
			require.Equal(t, want[i], sum.Verdict, "iter %d round %d (F=%d S=%d)", iter, i, f, sN)
			if i > 0 && want[i] == observation.VerdictUnreachable && want[i-1] != observation.VerdictUnreachable || i == 0 && want[0] == observation.VerdictUnreachable {
				downs++
			}
			// Outage invariants.
			require.Len(t, sum.Outages, min(downs, maxOut))
			for j, o := range sum.Outages {
				if j == 0 {
					assert.Equal(t, sum.Verdict == observation.VerdictUnreachable, o.Ongoing())
				} else {
					assert.False(t, o.Ongoing())
					assert.False(t, o.End.After(sum.Outages[j-1].Start), "newest first, no overlap")
				}
				if !o.Ongoing() {
					assert.False(t, o.End.Before(o.Start))
				}
			}
		}
	}
}

func TestLateSuccessOfTheSameRound(t *testing.T) {
	for _, readBetween := range []bool{false, true} {
		t.Run(fmt.Sprintf("transitions read in between=%v", readBetween), func(t *testing.T) {
			s := NewSummarizer(SummaryConfig{})
			s.Add(icmpRound(0, true))
			s.Add(icmpRound(1, false))
			s.Add(icmpRound(2, false))
			s.Transitions()
			s.Add(icmpRound(3, false)) // third failure: Unreachable
			assert.Equal(t, observation.VerdictUnreachable, verdictAfter(t, s))
			if readBetween {
				tr := s.Transitions()
				require.Len(t, tr, 1)
				assert.Equal(t, observation.VerdictUnreachable, tr[0].New)
			}
			s.Add(obs(3, contract.ProbeTypeTCP, true, 1e-3)) // the same round succeeded after all
			sum, _ := s.Summary(simKey)
			assert.Equal(t, observation.VerdictReachable, sum.Verdict)
			assert.Empty(t, sum.Outages, "the outage is withdrawn")
			assert.Equal(t, 2, sum.FailedRounds, "round 3 no longer counts as failed (rounds 1 and 2 do)")
			tr := s.Transitions()
			if readBetween {
				require.Len(t, tr, 1)
				assert.Equal(t, observation.VerdictUnreachable, tr[0].Old)
				assert.Equal(t, observation.VerdictReachable, tr[0].New)
			} else {
				assert.Empty(t, tr, "nothing changed as far as the reader knows")
			}
			// A late *failure* of a successful round changes nothing.
			s.Add(obs(3, contract.ProbeTypeHTTP, false))
			assert.Equal(t, observation.VerdictReachable, verdictAfter(t, s))
		})
	}
}

func TestWindowFigures(t *testing.T) {
	s := NewSummarizer(SummaryConfig{Window: time.Minute, Slots: 6})
	// Rounds 0..5 (one minute): fast; then rounds 6..11: slow with 1 of 3 echoes lost.
	for i := range 6 {
		s.Add(obs(i, contract.ProbeTypeICMP, true, 100e-6, 100e-6, 100e-6))
	}
	sum, _ := s.Summary(simKey)
	assert.Equal(t, 6, sum.Rounds)
	assert.Equal(t, uint64(18), sum.RTT.Count)
	assert.InEpsilon(t, 100e-6, sum.RTT.P50.Seconds(), 0.03)
	assert.Equal(t, "icmp", sum.RTTFrom)
	assert.True(t, sum.HasLoss)
	assert.Zero(t, sum.LossRatio)
	assert.Equal(t, at(0), sum.WindowStart)
	assert.Equal(t, at(5), sum.WindowEnd)

	for i := 6; i < 12; i++ {
		o := obs(i, contract.ProbeTypeICMP, true, 2e-3, 2e-3)
		o.Lost = 1
		s.Add(o)
	}
	sum, _ = s.Summary(simKey)
	assert.Equal(t, 6, sum.Rounds, "the fast minute left the window")
	assert.Equal(t, uint64(12), sum.RTT.Count)
	assert.InEpsilon(t, 2e-3, sum.RTT.P50.Seconds(), 0.03)
	assert.InEpsilon(t, 2e-3, sum.RTT.Max.Seconds(), 1e-9)
	assert.InDelta(t, 1.0/3, sum.LossRatio, 1e-12)
	assert.Equal(t, uint64(18), sum.Sent)
	assert.Equal(t, uint64(6), sum.Lost)
	assert.Equal(t, at(6), sum.WindowStart)
	assert.Equal(t, at(11), sum.WindowEnd)
	assert.Equal(t, at(11), sum.LastObserved)

	// The window is anchored at the newest observation: no new data, same figures.
	again, _ := s.Summary(simKey)
	assert.Equal(t, sum, again)

	// A sparse pair (probed again 17 minutes later): the window holds only that round.
	s.Add(obs(12+6*17, contract.ProbeTypeICMP, true, 1e-3))
	sum, _ = s.Summary(simKey)
	assert.Equal(t, 1, sum.Rounds)
	assert.Equal(t, uint64(1), sum.RTT.Count)
	assert.Equal(t, sum.WindowStart, sum.WindowEnd)
}

func TestProbeResultsAndFallbacks(t *testing.T) {
	s := NewSummarizer(SummaryConfig{})
	s.Add(obs(0, contract.ProbeTypeTCP, true, 1e-3), obs(0, contract.ProbeTypeHTTP, true, 4e-3))
	s.Add(obs(1, contract.ProbeTypeTCP, false), obs(1, contract.ProbeTypeHTTP, true, 4e-3))
	refused := obs(2, contract.ProbeTypeTCP, false)
	refused.ErrorType, refused.Message = contract.ErrorTypeRefused, "tcp 10.0.2.10:80: refused"
	s.Add(refused, obs(2, contract.ProbeTypeHTTP, true, 4e-3))
	sum, _ := s.Summary(simKey)
	assert.Equal(t, observation.VerdictReachable, sum.Verdict, "a round succeeds when any probe type did")
	assert.Equal(t, 0, sum.FailedRounds)
	assert.Equal(t, "tcp,http", sum.RTTFrom, "without ICMP the other durations are the RTT")
	assert.Equal(t, uint64(4), sum.RTT.Count)
	assert.True(t, sum.HasLoss)
	assert.InDelta(t, 2.0/6, sum.LossRatio, 1e-12, "without ICMP echoes: failed probes over probes")
	require.Len(t, sum.Probes, 2)
	tcp, http := sum.Probes[0], sum.Probes[1]
	assert.Equal(t, "tcp", tcp.Type)
	assert.Equal(t, uint64(3), tcp.Sent)
	assert.Equal(t, uint64(2), tcp.Lost)
	assert.Equal(t, at(0), tcp.LastSuccess)
	require.NotNil(t, tcp.LastFailure)
	assert.Equal(t, observation.Failure{Time: at(2), ErrorType: "refused", Reason: "ConnectionRefused", Message: "tcp 10.0.2.10:80: refused"}, *tcp.LastFailure)
	assert.Equal(t, uint64(1), tcp.RTT.Count)
	assert.Equal(t, "http", http.Type)
	assert.Nil(t, http.LastFailure)
	assert.InEpsilon(t, 4e-3, http.RTT.P99.Seconds(), 0.03)

	// With ICMP, ICMP is the RTT and the loss.
	s.Add(obs(3, contract.ProbeTypeICMP, true, 300e-6), obs(3, contract.ProbeTypeTCP, true, 1e-3))
	sum, _ = s.Summary(simKey)
	assert.Equal(t, "icmp", sum.RTTFrom)
	assert.Equal(t, uint64(1), sum.RTT.Count)
	assert.Equal(t, uint64(3), sum.Sent)
	assert.Zero(t, sum.LossRatio)
	require.Len(t, sum.Probes, 3)
	assert.Equal(t, []string{"icmp", "tcp", "http"}, []string{sum.Probes[0].Type, sum.Probes[1].Type, sum.Probes[2].Type})
}

func TestObservers(t *testing.T) {
	s := NewSummarizer(SummaryConfig{})
	a := icmpRound(0, true)
	b := icmpRound(1, true)
	b.Source.Node = "node-c" // the same pod seen from another node (e.g. a gateway merging)
	c := icmpRound(2, true)
	s.Add(a, b, c)
	sum, _ := s.Summary(simKey)
	assert.Equal(t, 2, sum.Observers)
	assert.Equal(t, []string{"node-a", "node-c"}, sum.ObserverNodes)
	assert.Equal(t, "node-a", sum.ObservedFromNode, "the newest observation's node")
}

func TestOutageHistoryBounded(t *testing.T) {
	s := NewSummarizer(SummaryConfig{FailuresToUnreachable: 1, SuccessesToReachable: 1, MaxOutages: 3})
	for i := range 20 {
		s.Add(icmpRound(i, i%2 == 0))
	}
	sum, _ := s.Summary(simKey)
	require.Len(t, sum.Outages, 3)
	assert.Equal(t, at(19), sum.Outages[0].Start)
	assert.True(t, sum.Outages[0].Ongoing())
	assert.Equal(t, at(17), sum.Outages[1].Start)
	assert.Equal(t, at(18), sum.Outages[1].End)
	assert.Equal(t, "restored after 10s", sum.Outages[1].Message)
	tr := s.Transitions()
	require.Len(t, tr, 1, "coalesced per pair")
	assert.Equal(t, observation.Transition{Key: simKey, Old: observation.VerdictUnknown, New: observation.VerdictUnreachable, At: at(19), Flips: 20, Message: sum.Outages[0].Message}, tr[0])
	assert.Empty(t, s.Transitions(), "read once")
}

func TestTransitionsOrderedAndFlapsReported(t *testing.T) {
	s := NewSummarizer(SummaryConfig{FailuresToUnreachable: 1, SuccessesToReachable: 1})
	other := icmpRound(0, true)
	other.Target.UID, other.Target.Name = "uid-c", "agent-c"
	s.Add(icmpRound(0, true))
	s.Add(other)
	s.Transitions()
	s.Add(icmpRound(1, false))
	s.Add(icmpRound(2, true)) // flapped back
	o2 := other
	o2.Timestamp = at(1).Add(time.Second)
	o2.Success = false
	s.Add(o2)
	tr := s.Transitions()
	require.Len(t, tr, 2)
	assert.Equal(t, observation.VerdictUnreachable, tr[0].New)
	assert.Equal(t, at(1).Add(time.Second), tr[0].At)
	assert.Equal(t, observation.Transition{Key: simKey, Old: observation.VerdictReachable, New: observation.VerdictReachable, At: at(2), Flips: 2, Message: "restored after 10s"}, tr[1])
}

func TestForgetExpireAndStats(t *testing.T) {
	s := NewSummarizer(SummaryConfig{})
	s.Add(icmpRound(0, true))
	other := icmpRound(30, true)
	other.Target = observation.Target{Kind: observation.TargetExternal, Address: "192.0.2.1"}
	s.Add(other)
	assert.Equal(t, 2, s.Stats().Pairs)
	assert.Equal(t, 1, s.Add(observation.Observation{ProbeType: "icmp", Timestamp: t0}), "no pair key")
	bad := icmpRound(1, true)
	bad.ProbeType = "sctp"
	assert.Equal(t, 1, s.Add(bad))
	late := icmpRound(-1, false)
	s.Add(late)
	assert.Equal(t, SummaryStats{Pairs: 2, Ignored: 2, Late: 1}, s.Stats())
	assert.Equal(t, observation.VerdictReachable, verdictAfter(t, s), "a late failure does not count")

	assert.Empty(t, s.ExpireIdle(at(0).Add(5*time.Minute), 5*time.Minute), "idle exactly ttl: kept")
	gone := s.ExpireIdle(at(0).Add(5*time.Minute+time.Second), 5*time.Minute)
	assert.Equal(t, []observation.PairKey{simKey}, gone)
	_, ok := s.Summary(simKey)
	assert.False(t, ok)
	k := observation.KeyOf(&other)
	assert.Equal(t, "netpulse/agent-a(uid-a)->External:192.0.2.1", k.String())
	assert.Equal(t, []observation.PairKey{k}, s.Keys())
	assert.True(t, s.Forget(k))
	assert.False(t, s.Forget(k))
	assert.Empty(t, s.Summaries())
}

// Memory per pair does not grow with the number of rounds.
func TestMemoryBounded(t *testing.T) {
	s := NewSummarizer(SummaryConfig{})
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range 3600 { // one hour of 1 s rounds with widely spread RTTs
		o := observation.Observation{Source: simSource(), Target: simTarget(), ProbeType: contract.ProbeTypeICMP,
			Timestamp: t0.Add(time.Duration(i) * time.Second), Success: i%50 != 0, Sent: 3}
		o.RTT = observation.NewHistogram(observation.MaxScale)
		for range 3 {
			o.RTT.Record(1e-6 * float64(1+rng.IntN(1_000_000)))
		}
		s.Add(o)
	}
	s.mu.Lock()
	p := s.pairs[simKey]
	assert.Len(t, p.ring, DefaultSlots)
	for _, sl := range p.ring {
		a := sl.probe(observation.ProbeIndex(contract.ProbeTypeICMP))
		require.NotNil(t, a)
		assert.LessOrEqual(t, len(a.hist.h.Counts)+len(observation.UnpackCounts(a.hist.packed, nil)), observation.MaxBuckets)
		assert.LessOrEqual(t, len(sl.observers), maxObserversPerSlot)
	}
	assert.LessOrEqual(t, len(p.outages), DefaultMaxOutages)
	s.mu.Unlock()
	sum, _ := s.Summary(simKey)
	assert.Equal(t, 300, sum.Rounds, "5 minutes of 1 s rounds (10 slots of 30 s)")
}

// Packing the slots' histograms (slotHist) changes nothing a summary reports: the window's
// RTT is the merge of the rounds it holds, late rounds into older slots included, and no
// slot keeps its histogram unpacked.
func TestSealedSlotsKeepTheWindow(t *testing.T) {
	s := NewSummarizer(SummaryConfig{})
	rng := rand.New(rand.NewPCG(2, 2))
	rtt := func() observation.Histogram {
		h := observation.NewHistogram(observation.DefaultScale)
		for range 3 {
			h.Record(1e-6 * float64(50+rng.IntN(5000)))
		}
		return h
	}
	var want [2]observation.Histogram // ICMP and TCP of the last 5 minutes (10 slots of 30 s)
	const rounds = 900
	slotW := int64(DefaultWindow / DefaultSlots)
	start := time.Unix(0, (floorDiv(t0.Add((rounds-1)*time.Second).UnixNano(), slotW)-DefaultSlots+1)*slotW) // the oldest slot's start
	add := func(i int, late bool) {
		ts := t0.Add(time.Duration(i) * time.Second)
		for j, pt := range []string{contract.ProbeTypeICMP, contract.ProbeTypeTCP} {
			if pt == contract.ProbeTypeTCP && i%3 != 0 {
				continue
			}
			o := observation.Observation{Source: simSource(), Target: simTarget(), ProbeType: pt, Timestamp: ts, Success: true, Sent: 3, RTT: rtt()}
			if late {
				o.Timestamp = ts.Add(-90*time.Second + time.Millisecond) // into an older slot, a round of its own
			}
			if !o.Timestamp.Before(start) {
				want[j].Merge(&o.RTT)
			}
			s.Add(o)
		}
	}
	for i := range rounds {
		add(i, false)
		if i%100 == 99 && i >= 600 {
			add(i, true)
		}
	}
	s.mu.Lock()
	p := s.pairs[simKey]
	for i := range p.ring {
		for _, sp := range p.ring[i].probes {
			assert.Empty(t, sp.hist.h.Counts, "packed")
			assert.NotEmpty(t, sp.hist.packed)
		}
	}
	s.mu.Unlock()
	sum, ok := s.Summary(simKey)
	require.True(t, ok)
	for j, pt := range []string{contract.ProbeTypeICMP, contract.ProbeTypeTCP} {
		var got observation.ProbeResult
		for _, r := range sum.Probes {
			if r.Type == pt {
				got = r
			}
		}
		assert.Equal(t, LatencyOf(&want[j]), got.RTT, "%s: the window's RTT", pt)
	}
	assert.Equal(t, LatencyOf(&want[0]), sum.RTT)
}

func TestSummarizerConcurrentUse(t *testing.T) {
	s := NewSummarizer(SummaryConfig{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				o := icmpRound(i, (i+w)%7 != 0)
				o.Source.UID = fmt.Sprint("uid-", w)
				s.Add(o)
				if i%10 == 0 {
					_ = s.Summaries()
					_ = s.Transitions()
					_ = s.ExpireIdle(at(i), time.Hour)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 4, s.Stats().Pairs)
}

// A seeded Unreachable pair keeps its ongoing outage (start and reason) while it keeps
// failing, reports no transition for that, and on recovery ends the same outage.
func TestSeedContinuesTheRecord(t *testing.T) {
	s := NewSummarizer(SummaryConfig{})
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	key := observation.PairKey{SourceNamespace: "ns", SourcePod: "a", SourceUID: "ua", TargetKind: observation.TargetPod, TargetNamespace: "ns", TargetName: "b", TargetUID: "ub"}
	src := observation.Source{Namespace: "ns", Name: "a", UID: "ua", Node: "n1"}
	tgt := observation.Target{Kind: observation.TargetPod, Namespace: "ns", Name: "b", UID: "ub", Node: "n2", Address: "10.0.0.2"}
	out := []observation.Outage{{Start: t0, Reason: "Timeout", Message: "unreachable after 3 consecutive failed rounds"}}
	require.True(t, s.Seed(key, src, tgt, observation.VerdictUnreachable, t0.Add(2*time.Second), t0.Add(20*time.Second), t0.Add(20*time.Second), out))
	require.False(t, s.Seed(key, src, tgt, observation.VerdictReachable, t0, t0, t0, nil), "a summarised pair is not re-seeded")
	obs := func(at time.Time, ok bool) observation.Observation {
		return observation.Observation{Source: src, Target: tgt, ProbeType: "icmp", Timestamp: at, Success: ok, Sent: 3, Lost: map[bool]uint64{true: 0, false: 3}[ok]}
	}
	s.Add(obs(t0.Add(30*time.Second), false))
	assert.Empty(t, s.Transitions(), "still Unreachable: nothing new to report")
	sum, _ := s.Summary(key)
	assert.Equal(t, observation.VerdictUnreachable, sum.Verdict)
	require.Len(t, sum.Outages, 1)
	assert.Equal(t, t0, sum.Outages[0].Start)
	assert.True(t, sum.Outages[0].Ongoing())
	s.Add(obs(t0.Add(31*time.Second), true), obs(t0.Add(32*time.Second), true))
	tr := s.Transitions()
	require.Len(t, tr, 1)
	assert.Equal(t, observation.VerdictUnreachable, tr[0].Old)
	assert.Equal(t, observation.VerdictReachable, tr[0].New)
	sum, _ = s.Summary(key)
	require.Len(t, sum.Outages, 1, "the same outage ended, no second one")
	assert.Equal(t, t0, sum.Outages[0].Start)
	assert.Equal(t, t0.Add(31*time.Second), sum.Outages[0].End)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func simSource() observation.Source {
	return observation.Source{Namespace: "netpulse", Name: "agent-a", UID: "uid-a", Node: "node-a", IP: "10.0.1.10"}
}
func simTarget() observation.Target {
	return observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: "agent-b", UID: "uid-b", Node: "node-b", Address: "10.0.2.10"}
}
