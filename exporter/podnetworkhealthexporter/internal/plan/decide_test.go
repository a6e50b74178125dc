// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/stretchr/testify/assert"
)

func baseSummary() observation.Summary {
	return observation.Summary{
		Key: simKey, Verdict: observation.VerdictReachable, LastObserved: t0,
		RTT:     observation.Latency{Count: 90, P50: 300 * time.Microsecond, P90: 320 * time.Microsecond, P99: 330 * time.Microsecond, Max: 2 * time.Millisecond},
		HasLoss: true, LossRatio: 0.01, Sent: 90, Lost: 1,
	}
}

func TestDecideRules(t *testing.T) {
	p := DefaultPolicy()
	base := baseSummary()
	written := observation.WrittenFrom(base, t0)
	later := func(d time.Duration, mut func(*observation.Summary)) (bool, string) {
		s := base
		s.LastObserved = t0.Add(d) // new data arrived: the content differs
		if mut != nil {
			mut(&s)
		}
		return Decide(written, s, t0.Add(d), p)
	}
	// lossFrom: written with wasLost of 90 echoes lost, now lost of 90, 2 minutes later.
	lossFrom := func(wasLost, lost uint64) (bool, string) {
		was := base
		was.LossRatio, was.Lost = float64(wasLost)/90, wasLost
		s := base
		s.LastObserved = t0.Add(2 * time.Minute)
		s.LossRatio, s.Lost = float64(lost)/90, lost
		return Decide(observation.WrittenFrom(was, t0), s, t0.Add(2*time.Minute), p)
	}
	type want struct {
		write  bool
		reason string
	}
	cases := []struct {
		name string
		got  func() (bool, string)
		want want
	}{
		{"never written", func() (bool, string) { return Decide(observation.Written{}, base, t0, p) }, want{true, ReasonInitial}},
		{"identical content, even after the heartbeat", func() (bool, string) { return Decide(written, base, t0.Add(time.Hour), p) }, want{false, ReasonUnchanged}},
		{"verdict change at once", func() (bool, string) {
			return later(time.Second, func(s *observation.Summary) { s.Verdict = observation.VerdictUnreachable })
		}, want{true, ReasonVerdict}},
		{"RTT within 20%", func() (bool, string) {
			return later(2*time.Minute, func(s *observation.Summary) { s.RTT.P50 = 355 * time.Microsecond })
		}, want{false, ReasonWithin}},
		{"RTT beyond 20% but under the 100us floor", func() (bool, string) {
			return later(2*time.Minute, func(s *observation.Summary) { s.RTT.P50 = 390 * time.Microsecond })
		}, want{false, ReasonWithin}},
		{"RTT beyond 20% and the floor", func() (bool, string) {
			return later(2*time.Minute, func(s *observation.Summary) { s.RTT.P50 = 450 * time.Microsecond })
		}, want{true, ReasonLatency}},
		{"RTT gone", func() (bool, string) {
			return later(2*time.Minute, func(s *observation.Summary) { s.RTT = observation.Latency{} })
		}, want{true, ReasonLatency}},
		{"RTT appears where the last write had none: at once", func() (bool, string) {
			cold := base
			cold.RTT = observation.Latency{}
			w := observation.WrittenFrom(cold, t0)
			return Decide(w, base, t0.Add(time.Second), p)
		}, want{true, ReasonLatency}},
		{"RTT gone within MinChangeInterval is deferred", func() (bool, string) {
			return later(30*time.Second, func(s *observation.Summary) { s.RTT = observation.Latency{} })
		}, want{false, ReasonDeferred}},
		{"loss within 0.02", func() (bool, string) {
			return later(2*time.Minute, func(s *observation.Summary) { s.LossRatio, s.Lost = 0.0222, 2 })
		}, want{false, ReasonWithin}},
		{"loss beyond 0.02 but within the counts' noise", func() (bool, string) {
			return later(2*time.Minute, func(s *observation.Summary) { s.LossRatio, s.Lost = 0.0333, 3 })
		}, want{false, ReasonWithin}},
		{"2 of 90 echoes lost from a written 0: plausibly under the 0.5 % floor", func() (bool, string) {
			return lossFrom(0, 2)
		}, want{false, ReasonWithin}},
		{"3 of 90 echoes lost from a written 0: above the floor", func() (bool, string) {
			return lossFrom(0, 3)
		}, want{true, ReasonLoss}},
		{"a written loss healed to 0 of 90", func() (bool, string) {
			return lossFrom(18, 0)
		}, want{true, ReasonLoss}},
		{"loss beyond 0.02 and beyond the counts' noise", func() (bool, string) {
			return later(2*time.Minute, func(s *observation.Summary) { s.LossRatio, s.Lost = 0.111, 10 })
		}, want{true, ReasonLoss}},
		{"loss change within MinChangeInterval is deferred", func() (bool, string) {
			return later(30*time.Second, func(s *observation.Summary) { s.LossRatio, s.Lost = 0.5, 45 })
		}, want{false, ReasonDeferred}},
		{"loss and RTT while Unreachable restate the verdict", func() (bool, string) {
			w := observation.WrittenFrom(observation.Summary{Key: simKey, Verdict: observation.VerdictUnreachable, HasLoss: true, LossRatio: 0.3, Sent: 30, Lost: 9}, t0)
			return Decide(w, observation.Summary{Key: simKey, Verdict: observation.VerdictUnreachable, HasLoss: true, LossRatio: 0.9, LastObserved: t0}, t0.Add(5*time.Minute), p)
		}, want{false, ReasonWithin}},
		{"heartbeat", func() (bool, string) { return later(10*time.Minute, nil) }, want{true, ReasonHeartbeat}},
		{"before the heartbeat", func() (bool, string) { return later(10*time.Minute-time.Second, nil) }, want{false, ReasonWithin}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, r := c.got()
			assert.Equal(t, c.want, want{w, r})
		})
	}
}

func TestDecideHeartbeatPolicy(t *testing.T) {
	base := baseSummary()
	written := observation.WrittenFrom(base, t0)
	s := base
	s.LastObserved = t0.Add(time.Minute)
	w, r := Decide(written, s, t0.Add(5*time.Minute), Policy{HeartbeatInterval: 5 * time.Minute})
	assert.True(t, w)
	assert.Equal(t, ReasonHeartbeat, r)
	w, _ = Decide(written, s, t0.Add(5*time.Minute), Policy{})
	assert.False(t, w, "zero policy = defaults: 10m heartbeat")
	s.LossRatio, s.Lost = 0.5, 45
	w, r = Decide(written, s, t0.Add(time.Second), Policy{MinChangeInterval: -1})
	assert.Equal(t, []any{true, ReasonLoss}, []any{w, r}, "MinChangeInterval disabled")
}

// freshness: lease: an unchanged status is never rewritten, however old its last write; a
// verdict change is written at once and a figures' move once MinChangeInterval has passed,
// as with a heartbeat.
func TestDecideLeaseFreshnessHasNoHeartbeat(t *testing.T) {
	base := baseSummary()
	written := observation.WrittenFrom(base, t0)
	p := Policy{HeartbeatInterval: 5 * time.Minute, LeaseFreshness: true}
	s := base
	s.LastObserved = t0.Add(24 * time.Hour)
	w, r := Decide(written, s, t0.Add(24*time.Hour), p)
	assert.Equal(t, []any{false, ReasonWithin}, []any{w, r}, "a day-old unchanged status")
	moved := s
	moved.LossRatio, moved.Lost = 0.5, 45
	w, r = Decide(written, moved, t0.Add(30*time.Second), p)
	assert.Equal(t, []any{false, ReasonDeferred}, []any{w, r}, "a move within MinChangeInterval")
	w, r = Decide(written, moved, t0.Add(2*time.Minute), p)
	assert.Equal(t, []any{true, ReasonLoss}, []any{w, r}, "a move after it")
	down := s
	down.Verdict = observation.VerdictUnreachable
	w, r = Decide(written, down, t0.Add(time.Second), p)
	assert.Equal(t, []any{true, ReasonVerdict}, []any{w, r})
}

// Drift accumulates against the last *written* value instead of hiding under the
// tolerance one small step at a time.
func TestDecideComparesWithLastWritten(t *testing.T) {
	p := DefaultPolicy()
	s := baseSummary()
	s.RTT.P50 = 1 * time.Millisecond
	last := observation.WrittenFrom(s, t0)
	writes := 0
	now := t0
	for range 30 { // +5% per 2 minutes
		now = now.Add(2 * time.Minute)
		s.RTT.P50 = s.RTT.P50 * 105 / 100
		s.LastObserved = now
		if w, r := Decide(last, s, now, p); w {
			writes++
			if r != ReasonHeartbeat {
				assert.Equal(t, ReasonLatency, r)
			}
			last = observation.WrittenFrom(s, now)
		}
	}
	assert.GreaterOrEqual(t, writes, 6)
}

// Property: whatever the summary, writing it and asking again never writes (until the
// content changes).
func TestDecideNeverRewritesIdenticalContent(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	verdicts := []observation.Verdict{observation.VerdictUnknown, observation.VerdictReachable, observation.VerdictUnreachable}
	for range 500 {
		s := baseSummary()
		s.Verdict = verdicts[rng.IntN(3)]
		s.RTT.P50 = time.Duration(rng.Int64N(int64(time.Second)))
		s.HasLoss = rng.IntN(2) == 0
		s.LossRatio = rng.Float64()
		s.Probes = []observation.ProbeResult{{Type: "icmp", Sent: rng.Uint64N(100), LastFailure: &observation.Failure{Time: t0, Reason: "Timeout"}}}
		s.Outages = []observation.Outage{{Start: t0, Message: "x"}}
		w := observation.WrittenFrom(s, t0)
		after := time.Duration(rng.Int64N(int64(24 * time.Hour)))
		write, reason := Decide(w, s, t0.Add(after), DefaultPolicy())
		assert.False(t, write)
		assert.Equal(t, ReasonUnchanged, reason)
	}
}

func TestFingerprintSeesEveryField(t *testing.T) {
	base := baseSummary()
	base.Probes = []observation.ProbeResult{{Type: "icmp", Sent: 3, LastFailure: &observation.Failure{Time: t0, Reason: "Timeout", Message: "m"}}}
	base.Outages = []observation.Outage{{Start: t0, Message: "m"}}
	base.ObserverNodes = []string{"node-a"}
	f := observation.Fingerprint(base)
	muts := map[string]func(*observation.Summary){
		"verdict":        func(s *observation.Summary) { s.Verdict = observation.VerdictUnknown },
		"p99":            func(s *observation.Summary) { s.RTT.P99++ },
		"loss":           func(s *observation.Summary) { s.LossRatio += 1e-9 },
		"last observed":  func(s *observation.Summary) { s.LastObserved = s.LastObserved.Add(time.Nanosecond) },
		"probe sent":     func(s *observation.Summary) { s.Probes[0].Sent++ },
		"failure msg":    func(s *observation.Summary) { s.Probes[0].LastFailure.Message = "n" },
		"outage end":     func(s *observation.Summary) { s.Outages[0].End = t0.Add(time.Second) },
		"observer nodes": func(s *observation.Summary) { s.ObserverNodes = []string{"node-b"} },
		"window":         func(s *observation.Summary) { s.WindowStart = t0 },
		"target node":    func(s *observation.Summary) { s.Target.Node = "x" },
	}
	for name, mut := range muts {
		s := base
		s.Probes = []observation.ProbeResult{base.Probes[0]}
		fl := *base.Probes[0].LastFailure
		s.Probes[0].LastFailure = &fl
		s.Outages = append([]observation.Outage(nil), base.Outages...)
		mut(&s)
		assert.NotEqual(t, f, observation.Fingerprint(s), name)
	}
	assert.Equal(t, f, observation.Fingerprint(base), "the mutations worked on copies")
}

var (
	t0     = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	simKey = observation.PairKey{SourceNamespace: "default", SourcePod: "a", SourceUID: "uid-a",
		TargetKind: observation.TargetPod, TargetNamespace: "default", TargetName: "b", TargetUID: "uid-b"}
)
