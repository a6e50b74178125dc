// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package planner

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Simulator knobs, e.g.
//
//	go test -run '^$' -bench Simulate -benchtime 1x ./internal/planner/ -sim.k 3
var (
	simK        = flag.Int("sim.k", 3, "planner simulator: targets per source per round")
	simZones    = flag.Int("sim.zones", 3, "planner simulator: number of zones (balanced)")
	simNs       = flag.String("sim.n", "100,1000,5000", "planner simulator: comma-separated cluster sizes")
	simBudget   = flag.Float64("sim.budget", 1000, "planner simulator: ProbeBudget in probes/s (0 = unlimited)")
	simInterval = flag.Duration("sim.interval", 10*time.Second, "planner simulator: BaseInterval")
)

// simConfig describes one simulated cluster.
type simConfig struct {
	N, Zones int
	Cfg      Config
	// ObsRounds is the number of rounds sampled for observer counts.
	ObsRounds int
	// CoverageStarts is the number of start rounds for the coverage run.
	CoverageStarts int
	// ChurnRounds caps the rounds compared for join/leave churn; 0 means a
	// whole rotation period (every round of the schedule).
	ChurnRounds int
	// DeadSamples is the number of simulated deaths.
	DeadSamples int
	Seed        uint64
}

type minAvgMax struct {
	Min, Max int
	Avg      float64
}

func (m minAvgMax) String() string { return fmt.Sprintf("%d/%.1f/%d", m.Min, m.Avg, m.Max) }

func summarize(xs []int) minAvgMax {
	if len(xs) == 0 {
		return minAvgMax{}
	}
	s := minAvgMax{Min: slices.Min(xs), Max: slices.Max(xs)}
	sum := 0
	for _, x := range xs {
		sum += x
	}
	s.Avg = float64(sum) / float64(len(xs))
	return s
}

type simResult struct {
	N, K, Zones            int
	Interval               time.Duration
	MinObs, MaxObs         int // observers per member incl. extra cross-zone targets
	MinBaseObs, MaxBaseObs int // observers per member from the K base slots
	ExtraShare             float64
	ProbesPerRound         float64 // average incl. extras
	ProbesPerSec           float64 // at Interval (stretched by the budget)
	ProbesPerSecAtBase     float64 // at BaseInterval, like for like with the mesh
	MeshPerSec             float64 // full mesh at BaseInterval
	CoverageRounds         int     // worst over the start rounds tried
	ExpectedCoverage       int     // ceil((N-1)/K)
	AssignmentsPerRound    int     // N*K
	// Churn per round for one join (N -> N+1), one leave (N -> N-1), and
	// the next K joins (N -> N+K), of which exactly one changes the period.
	Join, Leave, NextKJoins       minAvgMax
	JoinRenumbers, LeaveRenumbers bool // period or interval changed
	NextKRenumbered               int
	ChurnRoundsCompared           int
	Detect2Avg, Detect2Max        time.Duration // death -> second distinct observer probe
	Detect1Avg                    time.Duration // death -> first observer probe
	Elapsed                       time.Duration
}

func (r simResult) String() string {
	iv := r.Interval.Seconds()
	return fmt.Sprintf("N=%d K=%d zones=%d interval=%v | observers/member min=%d max=%d (base %d..%d; %.1f%% of sources add a cross-zone target) | "+
		"full pair coverage in %d rounds, ceil((N-1)/K)=%d | probes/s %.1f at interval (%.1f at base interval) vs full mesh %.1f at base interval, ratio %.5f | "+
		"churn (N*K = %d base assignments/round; counts symmetric difference incl. extras) min/avg/max over %d rounds: join %s (period/interval changed: %v), leave %s (changed: %v), next %d joins %s (%d of them changed period/interval) | "+
		"dead member seen by 2 observers after avg %.2fs = %.2f rounds, max %.2fs = %.2f rounds (first observer avg %.2fs) | sim %v",
		r.N, r.K, r.Zones, r.Interval, r.MinObs, r.MaxObs, r.MinBaseObs, r.MaxBaseObs, 100*r.ExtraShare,
		r.CoverageRounds, r.ExpectedCoverage, r.ProbesPerSec, r.ProbesPerSecAtBase, r.MeshPerSec, r.ProbesPerSecAtBase/r.MeshPerSec,
		r.AssignmentsPerRound, r.ChurnRoundsCompared, r.Join, r.JoinRenumbers, r.Leave, r.LeaveRenumbers, r.K, r.NextKJoins, r.NextKRenumbered,
		r.Detect2Avg.Seconds(), r.Detect2Avg.Seconds()/iv, r.Detect2Max.Seconds(), r.Detect2Max.Seconds()/iv,
		r.Detect1Avg.Seconds(), r.Elapsed.Round(time.Millisecond))
}

// randID returns a pod-UID-like string.
func randID(rng *rand.Rand) string {
	const hex = "0123456789abcdef"
	var b [36]byte
	for i := range b {
		b[i] = hex[rng.IntN(16)]
	}
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	return string(b[:])
}

// balancedMembers returns n members spread round-robin over zones.
func balancedMembers(rng *rand.Rand, n, zones int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{ID: randID(rng), Node: "node-" + strconv.Itoa(i), Zone: "zone-" + string(rune('a'+i%zones))}
	}
	return ms
}

// posMap maps a's ring positions to b's (-1 when absent from b).
func posMap(a, b *Plan) []int32 {
	m := make([]int32, a.Len())
	for i, mem := range a.members {
		if j, ok := b.index[mem.ID]; ok {
			m[i] = int32(j)
		} else {
			m[i] = -1
		}
	}
	return m
}

// churn counts the (source, target) assignments present in exactly one of
// a's round ra and b's round rb, ignoring any assignment whose source or
// target is missing from the other plan (the joiner or the leaver). With
// baseOnly the extra cross-zone targets are left out.
func churn(a, b *Plan, ra, rb uint64, aToB, bToA []int32, baseOnly bool) int {
	var ta, tb []int32
	changed := 0
	for i := range a.members {
		j := aToB[i]
		if j < 0 {
			continue
		}
		ta = a.appendTargets(ta[:0], i, ra)
		tb = b.appendTargets(tb[:0], int(j), rb)
		if baseOnly && !a.full {
			ta = ta[:min(len(ta), a.k)]
		}
		if baseOnly && !b.full {
			tb = tb[:min(len(tb), b.k)]
		}
		// Translate a's targets into b's positions and drop the absent.
		w := 0
		for _, t := range ta {
			if aToB[t] >= 0 {
				ta[w] = aToB[t]
				w++
			}
		}
		ta = ta[:w]
		w = 0
		for _, t := range tb {
			if bToA[t] >= 0 {
				tb[w] = t
				w++
			}
		}
		tb = tb[:w]
		for _, t := range ta {
			if !slices.Contains(tb, t) {
				changed++
			}
		}
		for _, t := range tb {
			if !slices.Contains(ta, t) {
				changed++
			}
		}
	}
	return changed
}

// churnOverRounds compares a's rounds r0, r0+1, ... with b's round at the
// same wall-clock time (b renumbers rounds if its interval differs) and
// returns the per-round churn. It covers max(period) rounds, sampled evenly
// down to at most rounds comparisons when rounds > 0.
func churnOverRounds(a, b *Plan, r0 uint64, rounds int) []int {
	aToB, bToA := posMap(a, b), posMap(b, a)
	span := max(a.period, b.period, 1)
	stride := 1
	if rounds > 0 && span > rounds {
		stride = (span + rounds - 1) / rounds
	}
	var out []int
	for d := 0; d < span; d += stride {
		ra := r0 + uint64(d)
		mid := time.Unix(0, int64(ra)*int64(a.Interval())+int64(a.Interval())/2)
		out = append(out, churn(a, b, ra, b.Round(mid), aToB, bToA, false))
	}
	return out
}

// coverageRounds returns how many rounds from start it takes until every
// ordered pair has been probed, using an N*N bitset (3 MiB at N=5000).
// It gives up after limit rounds and returns limit+1.
func coverageRounds(p *Plan, start uint64, limit int) int {
	n := p.Len()
	if n <= 1 {
		return 0
	}
	seen := make([]uint64, (n*n+63)/64)
	need, have := n*(n-1), 0
	var buf []int32
	for r := range limit {
		for s := range n {
			buf = p.appendTargets(buf[:0], s, start+uint64(r))
			for _, t := range buf {
				bit := s*n + int(t)
				if seen[bit/64]&(1<<(bit%64)) == 0 {
					seen[bit/64] |= 1 << (bit % 64)
					have++
				}
			}
		}
		if have == need {
			return r + 1
		}
	}
	return limit + 1
}

// observersByPos returns, for round r, base and total observer counts per
// ring position, and how many sources carry an extra target.
func observersByPos(p *Plan, r uint64) (base, total []int, extras int) {
	n := p.Len()
	base, total = make([]int, n), make([]int, n)
	var buf []int32
	for s := range n {
		buf = p.appendTargets(buf[:0], s, r)
		for j, t := range buf {
			total[t]++
			if p.full || j < p.k {
				base[t]++
			}
		}
		if !p.full && len(buf) > p.k {
			extras++
		}
	}
	return base, total, extras
}

// detectTimes simulates a member dying at a uniformly random moment of a
// round; it returns the delays until the first and the second distinct
// observer fire a probe at it (each source fires at round*Interval+Jitter).
func detectTimes(p *Plan, rng *rand.Rand, dead string, r0 uint64) (first, second time.Duration) {
	iv := p.Interval()
	death := time.Duration(r0)*iv + time.Duration(rng.Int64N(int64(iv)))
	seen := map[string]bool{}
	for r := r0; r < r0+uint64(4*max(p.period, 1))+4; r++ {
		obs := p.Observers(dead, r)
		slices.SortFunc(obs, func(a, b string) int { return int(p.Jitter(a) - p.Jitter(b)) })
		for _, o := range obs {
			at := time.Duration(r)*iv + p.Jitter(o)
			if at < death || seen[o] {
				continue
			}
			seen[o] = true
			switch len(seen) {
			case 1:
				first = at - death
			case 2:
				return first, at - death
			}
		}
	}
	return first, -1
}

// simulate runs every measurement for one cluster size.
func simulate(sc simConfig) simResult {
	begin := time.Now()
	rng := rand.New(rand.NewPCG(sc.Seed, 0x6e6574))
	members := balancedMembers(rng, sc.N, sc.Zones)
	p, err := New(members, sc.Cfg)
	if err != nil {
		panic(err)
	}
	n := p.Len()
	res := simResult{N: n, K: sc.Cfg.K, Zones: sc.Zones, Interval: p.Interval(), ExpectedCoverage: (n - 1 + sc.Cfg.K - 1) / sc.Cfg.K,
		MinObs: math.MaxInt, MinBaseObs: math.MaxInt, AssignmentsPerRound: n * p.k}
	// Realistic round numbers: now-ish / interval.
	r0 := p.Round(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	probes := 0
	for d := range sc.ObsRounds {
		base, total, extras := observersByPos(p, r0+uint64(d)*7919)
		res.MinObs, res.MaxObs = min(res.MinObs, slices.Min(total)), max(res.MaxObs, slices.Max(total))
		res.MinBaseObs, res.MaxBaseObs = min(res.MinBaseObs, slices.Min(base)), max(res.MaxBaseObs, slices.Max(base))
		res.ExtraShare += float64(extras) / float64(n*sc.ObsRounds)
		for _, c := range total {
			probes += c
		}
	}
	res.ProbesPerRound = float64(probes) / float64(sc.ObsRounds)
	res.ProbesPerSec = res.ProbesPerRound / p.Interval().Seconds()
	res.ProbesPerSecAtBase = res.ProbesPerRound / sc.Cfg.BaseInterval.Seconds()
	res.MeshPerSec = float64(n*(n-1)) / sc.Cfg.BaseInterval.Seconds()

	for i := range sc.CoverageStarts {
		start := r0 + uint64(i)*uint64(rng.IntN(1_000_000))
		res.CoverageRounds = max(res.CoverageRounds, coverageRounds(p, start, 4*res.ExpectedCoverage+4))
	}

	// One join: a fresh member in a random zone. One leave: a random member.
	mustNew := func(ms []Member) *Plan {
		q, err := New(ms, sc.Cfg)
		if err != nil {
			panic(err)
		}
		return q
	}
	renumbers := func(a, b *Plan) bool { return a.period != b.period || a.Interval() != b.Interval() }
	grown := slices.Clone(members)
	for range sc.Cfg.K {
		grown = append(grown, Member{ID: randID(rng), Node: "node-new", Zone: members[rng.IntN(n)].Zone})
	}
	pj := mustNew(grown[:n+1])
	gone := rng.IntN(n)
	pl := mustNew(slices.Delete(slices.Clone(members), gone, gone+1))
	js := churnOverRounds(p, pj, r0, sc.ChurnRounds)
	res.Join, res.Leave = summarize(js), summarize(churnOverRounds(p, pl, r0, sc.ChurnRounds))
	res.ChurnRoundsCompared = len(js)
	res.JoinRenumbers, res.LeaveRenumbers = renumbers(p, pj), renumbers(p, pl)

	// K consecutive joins: N -> N+1 -> ... -> N+K, all rounds of each.
	all := slices.Clone(js)
	prev := pj
	res.NextKRenumbered = b2i(res.JoinRenumbers)
	for i := 2; i <= sc.Cfg.K; i++ {
		next := mustNew(grown[:n+i])
		all = append(all, churnOverRounds(prev, next, prev.Round(time.Unix(0, int64(r0)*int64(p.Interval()))), sc.ChurnRounds)...)
		res.NextKRenumbered += b2i(renumbers(prev, next))
		prev = next
	}
	res.NextKJoins = summarize(all)

	var d1, d2 []time.Duration
	for range sc.DeadSamples {
		dead := p.members[rng.IntN(n)].ID
		f, s := detectTimes(p, rng, dead, r0+uint64(rng.IntN(1000)))
		d1, d2 = append(d1, f), append(d2, s)
	}
	if len(d2) > 0 {
		var s1, s2 time.Duration
		for i := range d2 {
			s1 += d1[i]
			s2 += d2[i]
			res.Detect2Max = max(res.Detect2Max, d2[i])
		}
		res.Detect1Avg = s1 / time.Duration(len(d1))
		res.Detect2Avg = s2 / time.Duration(len(d2))
		if slices.Min(d2) < 0 {
			res.Detect2Max = -1 // some death never reached two observers
		}
	}
	res.Elapsed = time.Since(begin)
	return res
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func defaultSimConfig(n, k, zones int) simConfig {
	return simConfig{
		N: n, Zones: zones,
		Cfg:       Config{K: k, ProbeBudget: *simBudget, BaseInterval: *simInterval},
		ObsRounds: 8, CoverageStarts: 2, ChurnRounds: 0, DeadSamples: 500, Seed: uint64(n),
	}
}

// TestSimulateSmall runs the simulator at a small size and checks what it
// measures against the guarantees.
func TestSimulateSmall(t *testing.T) {
	for _, k := range []int{1, 2, 3, 5} {
		sc := defaultSimConfig(97, k, 3)
		sc.DeadSamples = 100
		r := simulate(sc)
		t.Log(r)
		if r.MinBaseObs != k || r.MaxBaseObs != k || r.MinObs < k {
			t.Errorf("K=%d: base observers %d..%d, total min %d", k, r.MinBaseObs, r.MaxBaseObs, r.MinObs)
		}
		if r.CoverageRounds != r.ExpectedCoverage {
			t.Errorf("K=%d: coverage took %d rounds, want %d", k, r.CoverageRounds, r.ExpectedCoverage)
		}
		if k >= 2 && (r.Detect2Max < 0 || r.Detect2Max >= 2*r.Interval) {
			t.Errorf("K=%d: second observer after %v, want < 2 intervals", k, r.Detect2Max)
		}
	}
}

// BenchmarkSimulate prints the simulator figures once per size; the timed
// loop measures Targets (-benchtime 1x skips the timing).
func BenchmarkSimulate(b *testing.B) {
	for _, f := range strings.Split(*simNs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("bad -sim.n: %v", err)
		}
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			sc := defaultSimConfig(n, *simK, *simZones)
			r := simulate(sc)
			b.Log(r)
			// One line per comparison for `make bench`: the sampled plan against a full mesh
			// at the same base interval, and coverage against its bound.
			fmt.Printf("BENCH planner_probes_per_s_N%d ours=%.0f/s reference=%.0f/s(full-mesh) ratio=%.4fx\n",
				n, r.ProbesPerSec, r.MeshPerSec, r.ProbesPerSec/r.MeshPerSec)
			fmt.Printf("BENCH planner_rounds_to_full_coverage_N%d ours=%d reference=%d(ceil((N-1)/K)) ratio=%.2fx\n",
				n, r.CoverageRounds, r.ExpectedCoverage, float64(r.CoverageRounds)/float64(r.ExpectedCoverage))
			fmt.Printf("BENCH planner_observers_min_N%d ours=%d reference=%d(K) ratio=%.2fx\n",
				n, r.MinObs, sc.Cfg.K, float64(r.MinObs)/float64(sc.Cfg.K))
			p, err := New(balancedMembers(rand.New(rand.NewPCG(1, 2)), n, *simZones), sc.Cfg)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				_ = p.Targets(p.members[i%n].ID, uint64(i))
			}
			// After the loop: b.Loop resets user metrics on its first call.
			b.ReportMetric(float64(r.MinObs), "min-observers")
			b.ReportMetric(float64(r.MaxObs), "max-observers")
			b.ReportMetric(float64(r.CoverageRounds), "coverage-rounds")
			b.ReportMetric(float64(r.ExpectedCoverage), "ceil-(N-1)/K")
			b.ReportMetric(r.ProbesPerSec, "probes/s")
			b.ReportMetric(r.MeshPerSec, "mesh-probes/s")
			b.ReportMetric(r.Join.Avg, "join-churn-avg")
			b.ReportMetric(float64(r.Join.Max), "join-churn-max")
			b.ReportMetric(r.Leave.Avg, "leave-churn-avg")
			b.ReportMetric(r.NextKJoins.Avg, "nextK-join-churn-avg")
			b.ReportMetric(r.Detect2Avg.Seconds(), "detect2-avg-s")
			b.ReportMetric(r.Detect2Max.Seconds(), "detect2-max-s")
		})
	}
}

// BenchmarkNew measures plan construction, paid once per membership change.
func BenchmarkNew(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		ms := balancedMembers(rand.New(rand.NewPCG(1, 2)), n, 3)
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := New(ms, Config{K: 3, BaseInterval: 10 * time.Second}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
