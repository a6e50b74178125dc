// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/contract"
)

// The write-budget simulation: one object, simulated hours of 10 s probe rounds, fed
// straight into Summarizer + Decide (no Decoder, no clock). Run with
//
//	go test ./exporter/podnetworkhealthexporter/internal/plan -run TestWriteBudget -v
//
// to print the BENCH lines. The figures are computed and deterministic (fixed seed); the
// test asserts the rules, not particular numbers.

// referenceWritesPerHour is the OpenShift connectivity-check model: one status update per
// check per minute.
const referenceWritesPerHour = 60.0

// referenceDetect is the same model's time from a fault to a visible verdict: checks run
// once a minute and the first failed check is recorded, so uniform over (0, 60s].
const (
	referenceDetectMean = 30 * time.Second
	referenceDetectMax  = 60 * time.Second
)

var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func simSource() observation.Source {
	return observation.Source{Namespace: "netpulse", Name: "agent-a", UID: "uid-a", Node: "node-a", IP: "10.0.1.10"}
}

func simTarget() observation.Target {
	return observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: "agent-b", UID: "uid-b", Node: "node-b", Address: "10.0.2.10"}
}

// simRound builds one ICMP observation of count echoes: RTT 300us +-10%, 0.5% outliers
// (5-30x), 0.1% echo loss; all lost while down.
func simRound(rng *rand.Rand, ts time.Time, down bool) observation.Observation {
	const count = 3
	o := observation.Observation{Source: simSource(), Target: simTarget(), ProbeType: contract.ProbeTypeICMP, Timestamp: ts, Sent: count}
	o.RTT = observation.NewHistogram(observation.DefaultScale)
	if down {
		o.Lost, o.ErrorType = count, contract.ErrorTypeTimeout
		o.Message = "icmp 10.0.2.10: timeout (3 of 3 echoes lost)"
	} else {
		for range count {
			if rng.Float64() < 0.001 {
				o.Lost++
				continue
			}
			rtt := 300e-6 * (0.9 + 0.2*rng.Float64())
			if rng.Float64() < 0.005 {
				rtt *= 5 + 25*rng.Float64()
			}
			o.RTT.Record(rtt)
		}
		o.Success = o.Lost < count
	}
	o.LossRatio, o.HasLoss = float64(o.Lost)/count, true
	return o
}

type simResult struct {
	hours   float64
	writes  int
	reasons map[string]int
	// writeTimes of every write.
	writeTimes []time.Time
	// verdictWrites: the time of each verdict write and the verdict written.
	verdictWrites []time.Time
	verdicts      []observation.Verdict
	transitions   []observation.Transition
}

func (r simResult) perHour() float64 { return float64(r.writes) / r.hours }

func (r simResult) breakdown() string {
	var ks []string
	for k := range r.reasons {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.reasons[k]))
	}
	return strings.Join(parts, " ")
}

// simulate runs rounds every interval for the given duration; down(t) says whether the
// target is down at offset t.
func simulate(d, interval time.Duration, down func(time.Duration) bool, pol Policy, cfg verdict.SummaryConfig, seed uint64) simResult {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := verdict.NewSummarizer(cfg)
	res := simResult{hours: d.Hours(), reasons: map[string]int{}}
	var last observation.Written
	key := observation.PairKey{}
	for off := time.Duration(0); off < d; off += interval {
		now := simEpoch.Add(off)
		o := simRound(rng, now, down(off))
		key = observation.KeyOf(&o)
		s.Add(o)
		res.transitions = append(res.transitions, s.Transitions()...)
		sum, _ := s.Summary(key)
		if write, reason := Decide(last, sum, now, pol); write {
			res.writes++
			res.reasons[reason]++
			res.writeTimes = append(res.writeTimes, now)
			if reason == ReasonVerdict {
				res.verdictWrites = append(res.verdictWrites, now)
				res.verdicts = append(res.verdicts, sum.Verdict)
			}
			last = observation.WrittenFrom(sum, now)
		}
	}
	return res
}

func never(time.Duration) bool { return false }

// flapping: down for the first minute of every two, starting after a steady first 10m.
func flapping(t time.Duration) bool {
	if t < 10*time.Minute {
		return false
	}
	return ((t-10*time.Minute)/time.Minute)%2 == 0
}

func bench(name, ours, reference string, ratio float64) {
	if testing.Verbose() {
		fmt.Printf("BENCH %s ours=%s reference=%s ratio=%.1fx\n", name, ours, reference, ratio)
	}
}

func TestWriteBudget(t *testing.T) {
	const interval = 10 * time.Second
	const hours = 6 * time.Hour
	pol := DefaultPolicy()
	cfg := verdict.SummaryConfig{}

	// Steady target.
	steady := simulate(hours, interval, never, pol, cfg, 1)
	again := simulate(hours, interval, never, pol, cfg, 1)
	require.Equal(t, steady.writes, again.writes, "the simulation is deterministic")
	assert.Equal(t, map[string]int{ReasonInitial: 1, ReasonHeartbeat: steady.writes - 1}, steady.reasons,
		"a steady target is written once and then only by heartbeat")
	for i := 1; i < len(steady.writeTimes); i++ {
		assert.GreaterOrEqual(t, steady.writeTimes[i].Sub(steady.writeTimes[i-1]), pol.HeartbeatInterval)
	}
	assert.LessOrEqual(t, steady.perHour(), float64(time.Hour/pol.HeartbeatInterval)+1/hours.Hours())
	bench("pnh_writes_per_object_hour_steady", fmt.Sprintf("%.1f/h", steady.perHour()),
		fmt.Sprintf("%.1f/h(openshift)", referenceWritesPerHour), referenceWritesPerHour/steady.perHour())

	// The same with a 5-minute heartbeat.
	pol5 := pol
	pol5.HeartbeatInterval = 5 * time.Minute
	steady5 := simulate(hours, interval, never, pol5, cfg, 1)
	assert.Equal(t, map[string]int{ReasonInitial: 1, ReasonHeartbeat: steady5.writes - 1}, steady5.reasons)
	bench("pnh_writes_per_object_hour_steady_heartbeat5m", fmt.Sprintf("%.1f/h", steady5.perHour()),
		fmt.Sprintf("%.1f/h(openshift)", referenceWritesPerHour), referenceWritesPerHour/steady5.perHour())

	// freshness: lease (the default beside a summary): written once, never rewritten to
	// look fresh; the writer's Lease says it is current.
	polLease := pol
	polLease.LeaseFreshness = true
	steadyLease := simulate(hours, interval, never, polLease, cfg, 1)
	assert.Equal(t, map[string]int{ReasonInitial: 1}, steadyLease.reasons, "freshness: lease: a steady target is written once")
	outageLease := simulate(time.Hour, interval, func(t time.Duration) bool { return t >= 30*time.Minute && t < 33*time.Minute }, polLease, cfg, 4)
	assert.Equal(t, 2, outageLease.reasons[ReasonVerdict], "freshness: lease: an outage is news, written at once")
	bench("pnh_writes_per_object_hour_steady_lease", fmt.Sprintf("%.2f/h", steadyLease.perHour()),
		fmt.Sprintf("%.1f/h(heartbeat)", steady.perHour()), steady.perHour()/steadyLease.perHour())

	// Flapping target: 1 min down / 1 min up.
	flap := simulate(hours, interval, flapping, pol, cfg, 2)
	// Every verdict transition is written at once, exactly once (the first one, Unknown ->
	// Reachable, by the initial write).
	var changes int
	for _, tr := range flap.transitions {
		if tr.Old != tr.New {
			changes++
		}
	}
	require.NotEmpty(t, flap.transitions)
	assert.Equal(t, observation.VerdictUnknown, flap.transitions[0].Old)
	assert.Equal(t, changes-1, flap.reasons[ReasonVerdict], "one verdict write per verdict change")
	assert.Greater(t, changes, int(hours/(2*time.Minute)), "every down and up minute is detected")
	// Latency/loss-driven writes respect MinChangeInterval.
	for i := 1; i < len(flap.writeTimes); i++ {
		if !contains(flap.verdictWrites, flap.writeTimes[i]) {
			assert.GreaterOrEqual(t, flap.writeTimes[i].Sub(flap.writeTimes[i-1]), pol.MinChangeInterval)
		}
	}
	bench("pnh_writes_per_object_hour_flapping_1m", fmt.Sprintf("%.1f/h", flap.perHour()),
		fmt.Sprintf("%.1f/h(openshift)", referenceWritesPerHour), referenceWritesPerHour/flap.perHour())
	// An hour with one 3-minute outage.
	outage := simulate(time.Hour, interval, func(t time.Duration) bool { return t >= 30*time.Minute && t < 33*time.Minute }, pol, cfg, 4)
	assert.Equal(t, 2, outage.reasons[ReasonVerdict])
	bench("pnh_writes_per_object_hour_one_3m_outage", fmt.Sprintf("%.1f/h", outage.perHour()),
		fmt.Sprintf("%.1f/h(openshift)", referenceWritesPerHour), referenceWritesPerHour/outage.perHour())
	if testing.Verbose() {
		fmt.Printf("writes by reason: steady[%s] steady_heartbeat5m[%s] steady_lease[%s] one_3m_outage_lease[%s] flapping_1m[%s] one_3m_outage[%s]\n",
			steady.breakdown(), steady5.breakdown(), steadyLease.breakdown(), outageLease.breakdown(), flap.breakdown(), outage.breakdown())
	}

	// Time from a fault to the decided (written) verdict, for fault starts spread over the
	// probe interval.
	var down, up []time.Duration
	for phase := 500 * time.Millisecond; phase < interval; phase += time.Second {
		faultStart := 10*time.Minute + phase
		faultEnd := faultStart + 3*time.Minute
		r := simulate(20*time.Minute, interval, func(t time.Duration) bool { return t >= faultStart && t < faultEnd }, pol, cfg, 3)
		require.Len(t, r.verdictWrites, 2, "one outage: down and up")
		require.Equal(t, []observation.Verdict{observation.VerdictUnreachable, observation.VerdictReachable}, r.verdicts)
		down = append(down, r.verdictWrites[0].Sub(simEpoch.Add(faultStart)))
		up = append(up, r.verdictWrites[1].Sub(simEpoch.Add(faultEnd)))
	}
	f, sN := time.Duration(verdict.DefaultFailuresToUnreachable), time.Duration(verdict.DefaultSuccessesToReachable)
	for _, d := range down {
		assert.LessOrEqual(t, d, f*interval, "Unreachable is decided by the %d-th failed round", f)
		assert.Greater(t, d, (f-1)*interval)
	}
	for _, d := range up {
		assert.LessOrEqual(t, d, sN*interval, "Reachable is decided by the %d-th successful round", sN)
		assert.Greater(t, d, (sN-1)*interval)
	}
	meanDown, maxDown := meanMax(down)
	meanUp, maxUp := meanMax(up)
	iv := func(d time.Duration) string {
		return fmt.Sprintf("%.2fintervals(%.1fs)", float64(d)/float64(interval), d.Seconds())
	}
	bench("pnh_verdict_unreachable_after_fault_mean", iv(meanDown), fmt.Sprintf("%.1fs(openshift:1check/min)", referenceDetectMean.Seconds()), float64(referenceDetectMean)/float64(meanDown))
	bench("pnh_verdict_unreachable_after_fault_max", iv(maxDown), fmt.Sprintf("%.1fs(openshift:1check/min)", referenceDetectMax.Seconds()), float64(referenceDetectMax)/float64(maxDown))
	bench("pnh_verdict_reachable_after_recovery_mean", iv(meanUp), fmt.Sprintf("%.1fs(openshift:1check/min)", referenceDetectMean.Seconds()), float64(referenceDetectMean)/float64(meanUp))
	bench("pnh_verdict_reachable_after_recovery_max", iv(maxUp), fmt.Sprintf("%.1fs(openshift:1check/min)", referenceDetectMax.Seconds()), float64(referenceDetectMax)/float64(maxUp))
}

func contains(ts []time.Time, t time.Time) bool {
	for _, x := range ts {
		if x.Equal(t) {
			return true
		}
	}
	return false
}

func meanMax(ds []time.Duration) (mean, maxD time.Duration) {
	var sum time.Duration
	for _, d := range ds {
		sum += d
		maxD = max(maxD, d)
	}
	return sum / time.Duration(len(ds)), maxD
}
