// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package planner

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testCfg = Config{K: 3, BaseInterval: 10 * time.Second}

// randomMembers draws a membership with 1..zones zones; when skewed, zone
// sizes follow weights 1, 1/2, 1/4, ... or one zone takes ~90%.
func randomMembers(rng *rand.Rand, n, zones int) []Member {
	weights := make([]float64, zones)
	switch rng.IntN(3) {
	case 0: // balanced
		for i := range weights {
			weights[i] = 1
		}
	case 1: // geometric
		for i := range weights {
			weights[i] = math.Pow(0.5, float64(i))
		}
	default: // one dominant zone
		for i := range weights {
			weights[i] = 0.1 / float64(zones)
		}
		weights[0] = 0.9
	}
	var total float64
	for _, w := range weights {
		total += w
	}
	ms := make([]Member, n)
	for i := range ms {
		x, z := rng.Float64()*total, 0
		for z < zones-1 && x >= weights[z] {
			x -= weights[z]
			z++
		}
		id := randID(rng)
		if rng.IntN(4) == 0 { // sequential names stress the hash mixing
			id = "pod-" + strconv.Itoa(i)
		}
		ms[i] = Member{ID: id, Node: "node-" + strconv.Itoa(i/3), Zone: "zone-" + strconv.Itoa(z)}
	}
	return ms
}

// randomPlan draws one case of the property tests: N 1..300, 1..5 zones,
// K 1..8, M (stable peers) 0..2.
func randomPlan(t *testing.T, rng *rand.Rand) (*Plan, []Member, Config) {
	t.Helper()
	n := 1 + rng.IntN(300)
	if rng.IntN(4) == 0 {
		n = 1 + rng.IntN(12) // small sizes hit the full-mesh and N<=2 edges
	}
	ms := randomMembers(rng, n, 1+rng.IntN(5))
	cfg := Config{K: 1 + rng.IntN(8), Stable: rng.IntN(3), BaseInterval: time.Duration(1+rng.IntN(60)) * time.Second, Seed: rng.Uint64()}
	if rng.IntN(2) == 0 {
		cfg.ProbeBudget = 1 + rng.Float64()*100
	}
	p, err := New(ms, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, ms, cfg
}

func sampleRounds(rng *rand.Rand) []uint64 {
	return []uint64{0, 1, rng.Uint64N(1 << 40), rng.Uint64(), math.MaxUint64}
}

func zoneCount(ms []Member) int {
	zs := map[string]bool{}
	for _, m := range ms {
		zs[m.Zone] = true
	}
	return len(zs)
}

func TestNewErrors(t *testing.T) {
	ok := []Member{{ID: "a"}, {ID: "b"}}
	for _, tc := range []struct {
		name    string
		members []Member
		cfg     Config
		target  error
		want    string
	}{
		{"K zero", ok, Config{K: 0, BaseInterval: time.Second}, ErrInvalidConfig, "K must be >= 1, got 0"},
		{"K negative", ok, Config{K: -2, BaseInterval: time.Second}, ErrInvalidConfig, "K must be >= 1, got -2"},
		{"interval", ok, Config{K: 1}, ErrInvalidConfig, "BaseInterval must be > 0"},
		{"budget negative", ok, Config{K: 1, BaseInterval: time.Second, ProbeBudget: -1}, ErrInvalidConfig, "ProbeBudget"},
		{"budget NaN", ok, Config{K: 1, BaseInterval: time.Second, ProbeBudget: math.NaN()}, ErrInvalidConfig, "ProbeBudget"},
		{"budget Inf", ok, Config{K: 1, BaseInterval: time.Second, ProbeBudget: math.Inf(1)}, ErrInvalidConfig, "ProbeBudget"},
		{"empty ID", []Member{{ID: "a"}, {ID: ""}}, testCfg, ErrInvalidMembers, "members[1].ID is empty"},
		{"duplicate ID", []Member{{ID: "a"}, {ID: "b"}, {ID: "a", Zone: "z"}}, testCfg, ErrInvalidMembers, `duplicate ID "a" at members[0] and members[2]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.members, tc.cfg)
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.target, tc.want)
			}
		})
	}
}

func TestSmallMemberships(t *testing.T) {
	for n := 0; n <= 5; n++ {
		ms := make([]Member, n)
		for i := range ms {
			ms[i] = Member{ID: fmt.Sprint("m", i), Zone: fmt.Sprint("z", i%2)}
		}
		p, err := New(ms, Config{K: 3, BaseInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		wantCov := map[int]int{0: 0, 1: 0, 2: 1, 3: 1, 4: 1, 5: 2}[n]
		if got := p.RoundsToFullCoverage(); got != wantCov {
			t.Errorf("N=%d: RoundsToFullCoverage = %d, want %d", n, got, wantCov)
		}
		for _, m := range ms {
			for r := range uint64(3) {
				got := p.Targets(m.ID, r)
				want := min(3, n-1)
				if len(got) != want {
					t.Errorf("N=%d %s round %d: %d targets, want %d", n, m.ID, r, len(got), want)
				}
				if obs := p.Observers(m.ID, r); len(obs) != want {
					t.Errorf("N=%d %s round %d: %d observers, want %d", n, m.ID, r, len(obs), want)
				}
			}
		}
	}
	p, _ := New([]Member{{ID: "a"}}, testCfg)
	if p.Targets("nope", 0) != nil || p.Observers("nope", 0) != nil {
		t.Error("unknown IDs must give nil")
	}
}

// TestBlockOffsets checks that the P blocks hit every offset 1..N-1 and
// that no block repeats an offset, for every N up to 600 and K up to 9.
func TestBlockOffsets(t *testing.T) {
	for n := 3; n <= 600; n++ {
		for k := 1; k < min(n-1, 10); k++ {
			p := &Plan{members: make([]Member, n), k: k, period: (n - 1 + k - 1) / k}
			seen := make([]bool, n)
			for b := range p.period {
				inBlock := map[int]bool{}
				for j := range k {
					d := p.offset(b, j)
					if d < 1 || d > n-1 || inBlock[d] {
						t.Fatalf("N=%d K=%d block %d: offset %d out of range or repeated", n, k, b, d)
					}
					inBlock[d], seen[d] = true, true
				}
			}
			if slices.Contains(seen[1:], false) {
				t.Fatalf("N=%d K=%d: some offset never used", n, k)
			}
		}
	}
}

// TestGuarantees checks guarantees 1, 2 and 3 and that Observers inverts
// Targets, over random memberships.
func TestGuarantees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for it := range 200 {
		p, ms, cfg := randomPlan(t, rng)
		n, multi := len(ms), zoneCount(ms) > 1
		wantK := min(cfg.K+cfg.Stable, max(n-1, 0))
		wantM := min(cfg.Stable, max(n-1, 0))
		if cfg.K+cfg.Stable >= n-1 {
			wantM = max(n-1, 0) // full mesh: every peer is stable
		}
		ctx := fmt.Sprintf("case %d: N=%d K=%d M=%d zones=%d", it, n, cfg.K, cfg.Stable, zoneCount(ms))

		wantCov := min(n-1, 1) // full mesh or N <= 1
		if n > 1 && cfg.K+cfg.Stable < n-1 {
			wantCov = (n - 1 - cfg.Stable + cfg.K - 1) / cfg.K
		}
		if p.Stable() != wantM {
			t.Fatalf("%s: Stable() = %d, want %d", ctx, p.Stable(), wantM)
		}
		if p.RoundsToFullCoverage() != wantCov {
			t.Fatalf("%s: RoundsToFullCoverage = %d, want %d", ctx, p.RoundsToFullCoverage(), wantCov)
		}
		for _, r := range sampleRounds(rng) {
			base := make(map[string]int, n)
			observedBy := make(map[string][]string, n)
			for _, src := range ms {
				ts := p.Targets(src.ID, r)
				// The stable peers lead every round's targets.
				st := p.StableTargets(src.ID)
				if len(st) != wantM || (len(ts) >= wantM && !slices.Equal(st, ts[:wantM])) {
					t.Fatalf("%s round %d: %s stable targets %v do not lead %v", ctx, r, src.ID, st, ts)
				}
				seen := map[string]bool{}
				cross := false
				for j, tg := range ts {
					if tg.ID == src.ID || seen[tg.ID] {
						t.Fatalf("%s round %d: %s has self or duplicate target %s", ctx, r, src.ID, tg.ID)
					}
					seen[tg.ID] = true
					cross = cross || tg.Zone != src.Zone
					if j < wantK {
						base[tg.ID]++
					}
					observedBy[tg.ID] = append(observedBy[tg.ID], src.ID)
				}
				switch len(ts) {
				case wantK:
				case wantK + 1:
					// Guarantee 2 fallback: only when the K base targets
					// all share the source's zone, and the extra does not.
					for _, tg := range ts[:wantK] {
						if tg.Zone != src.Zone {
							t.Fatalf("%s round %d: %s got an extra target despite a cross-zone one", ctx, r, src.ID)
						}
					}
					if !multi || ts[wantK].Zone == src.Zone {
						t.Fatalf("%s round %d: %s extra target %v is not cross-zone", ctx, r, src.ID, ts[wantK])
					}
				default:
					t.Fatalf("%s round %d: %s has %d targets, want %d or %d", ctx, r, src.ID, len(ts), wantK, wantK+1)
				}
				if multi && !cross {
					t.Fatalf("%s round %d: %s has no cross-zone target (guarantee 2)", ctx, r, src.ID)
				}
			}
			for _, m := range ms {
				// Guarantee 1: exactly K base observers, so at least K.
				if base[m.ID] != wantK {
					t.Fatalf("%s round %d: %s has %d base observers, want %d", ctx, r, m.ID, base[m.ID], wantK)
				}
				got, want := p.Observers(m.ID, r), observedBy[m.ID]
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("%s round %d: Observers(%s) = %v, want %v", ctx, r, m.ID, got, want)
				}
			}
		}

		// Guarantee 3: every window of RoundsToFullCoverage rounds, from
		// any start, covers all ordered pairs.
		if n > 1 {
			cov := p.RoundsToFullCoverage()
			for _, start := range []uint64{0, rng.Uint64N(1 << 40), math.MaxUint64 - uint64(cov) - rng.Uint64N(1000)} {
				if got := coverageRounds(p, start, cov); got > cov {
					t.Fatalf("%s: rounds %d..+%d do not cover every ordered pair", ctx, start, cov)
				}
			}
		}
	}
}

// TestOrderIndependence checks guarantee 4: a shuffled membership list
// gives the same plan.
func TestOrderIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for it := range 100 {
		p, ms, cfg := randomPlan(t, rng)
		shuffled := slices.Clone(ms)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		q, err := New(shuffled, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if p.Interval() != q.Interval() || p.RoundsToFullCoverage() != q.RoundsToFullCoverage() {
			t.Fatalf("case %d: interval or period differ", it)
		}
		for _, r := range sampleRounds(rng) {
			for _, m := range ms {
				if !slices.Equal(p.Targets(m.ID, r), q.Targets(m.ID, r)) {
					t.Fatalf("case %d round %d: targets of %s depend on input order", it, r, m.ID)
				}
				if p.Jitter(m.ID) != q.Jitter(m.ID) {
					t.Fatalf("case %d: jitter of %s depends on input order", it, m.ID)
				}
			}
		}
	}
	// A different seed must give a different ring.
	ms := balancedMembers(rand.New(rand.NewPCG(3, 3)), 50, 3)
	a, _ := New(ms, Config{K: 2, BaseInterval: time.Second, Seed: 1})
	b, _ := New(ms, Config{K: 2, BaseInterval: time.Second, Seed: 2})
	if slices.Equal(a.members, b.members) {
		t.Error("seed does not change the ring order")
	}
}

// TestChurnBound checks guarantee 5 where it can be exact: when a join or
// leave keeps the rotation period, a round outside the wrapping last block
// keeps its offsets d0+1 .. d0+K. Only a source whose path to its farthest
// target spans the changed ring position sees a change, its targets shift
// by one member, so at most 2 assignments change per such source: the
// bound is 2*(d0+K).
func TestChurnBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	checked := 0
	for it := range 150 {
		n := 10 + rng.IntN(290)
		ms := randomMembers(rng, n, 1+rng.IntN(5))
		cfg := Config{K: 1 + rng.IntN(8), BaseInterval: time.Second, Seed: rng.Uint64()}
		p, err := New(ms, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var other []Member
		if it%2 == 0 {
			other = append(slices.Clone(ms), Member{ID: randID(rng), Zone: ms[rng.IntN(n)].Zone})
		} else {
			i := rng.IntN(n)
			other = slices.Delete(slices.Clone(ms), i, i+1)
		}
		q, err := New(other, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if p.full || q.full || p.period != q.period {
			continue
		}
		aToB, bToA := posMap(p, q), posMap(q, p)
		for b := range p.period - 1 {
			r := uint64(b) + uint64(p.period)*rng.Uint64N(1<<30)
			bound := 2 * p.offset(b, p.k-1)
			if got := churn(p, q, r, r, aToB, bToA, true); got > bound {
				t.Fatalf("case %d N=%d->%d K=%d block %d: %d base assignments changed, bound %d", it, n, len(other), cfg.K, b, got, bound)
			}
			checked++
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d rounds checked", checked)
	}
}

// TestInterval checks guarantee 6 (budget part).
func TestInterval(t *testing.T) {
	base := 10 * time.Second
	mk := func(n, k int, budget float64) *Plan {
		t.Helper()
		p, err := New(balancedMembers(rand.New(rand.NewPCG(5, uint64(n))), n, 3), Config{K: k, BaseInterval: base, ProbeBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if iv := mk(5000, 3, 0).Interval(); iv != base {
		t.Errorf("unlimited budget: interval %v, want %v", iv, base)
	}
	if iv := mk(100, 3, 1000).Interval(); iv != base {
		t.Errorf("budget not binding: interval %v, want %v", iv, base)
	}
	step := base / stretchSteps
	for _, budget := range []float64{0.5, 7, 33.3, 1000} {
		prev := time.Duration(0)
		for n := 1; n <= 3000; n += 1 + n/7 {
			for _, k := range []int{1, 3, 8} {
				p := mk(n, k, budget)
				iv := p.Interval()
				probes := p.probes
				if want := float64(n * min(k, max(n-1, 0))); probes < want || probes > want+float64(n) {
					t.Fatalf("N=%d K=%d: probes per round %v, want %v plus extras", n, k, probes, want)
				}
				if probes/iv.Seconds() > budget || iv < base {
					t.Fatalf("N=%d K=%d budget %v: interval %v gives %.3f probes/s", n, k, budget, iv, probes/iv.Seconds())
				}
				if iv > base && (iv%step != 0 || probes/(iv-step).Seconds() <= budget) {
					t.Fatalf("N=%d K=%d budget %v: interval %v is not the smallest multiple of %v", n, k, budget, iv, step)
				}
				if k == 3 {
					if iv < prev {
						t.Fatalf("budget %v: interval shrank from %v to %v at N=%d", budget, prev, iv, n)
					}
					prev = iv
				}
			}
		}
	}
	if iv := stretchInterval(1<<40, time.Hour, 1e-300); iv <= 0 {
		t.Errorf("huge stretch overflowed: %v", iv)
	}
}

// TestClock checks Round, Jitter and NextProbe (guarantee 6, jitter part).
func TestClock(t *testing.T) {
	ms := balancedMembers(rand.New(rand.NewPCG(6, 6)), 2000, 3)
	p, err := New(ms, Config{K: 3, BaseInterval: 7 * time.Second, ProbeBudget: 500})
	if err != nil {
		t.Fatal(err)
	}
	iv := p.Interval()
	if iv <= 7*time.Second {
		t.Fatalf("interval %v not stretched", iv)
	}
	if p.Round(time.Unix(-5, 0)) != 0 {
		t.Error("pre-1970 time must map to round 0")
	}
	for _, r := range []uint64{0, 1, 12345, 1 << 25} {
		start := time.Unix(0, int64(r)*int64(iv))
		if p.Round(start) != r || p.Round(start.Add(iv-1)) != r || p.Round(start.Add(iv)) != r+1 {
			t.Errorf("Round is not floor(t/interval) around round %d", r)
		}
	}

	// Same ID, same interval, different membership: same jitter.
	q, _ := New(ms[:1500], Config{K: 3, BaseInterval: iv})
	buckets := make([]int, 10)
	rng := rand.New(rand.NewPCG(7, 7))
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, m := range ms {
		j := p.Jitter(m.ID)
		if j < 0 || j >= iv {
			t.Fatalf("jitter %v outside [0, %v)", j, iv)
		}
		if j != p.Jitter(m.ID) || (q.Interval() == iv && j != q.Jitter(m.ID)) {
			t.Fatalf("jitter of %s not deterministic", m.ID)
		}
		buckets[int(j*10/iv)]++

		at := now.Add(time.Duration(rng.Int64N(int64(3 * iv))))
		r, fire := p.NextProbe(m.ID, at)
		if fire.Before(at) || fire.Sub(at) >= iv || p.Round(fire) != r || fire.Sub(time.Unix(0, int64(r)*int64(iv))) != j {
			t.Fatalf("NextProbe(%s, %v) = %d, %v; jitter %v", m.ID, at, r, fire, j)
		}
	}
	// 2000 IDs in 10 buckets: expect 200 each; 130..270 is > 5 sigma.
	for i, c := range buckets {
		if c < 130 || c > 270 {
			t.Errorf("jitter bucket %d has %d of 2000 sources: not spread", i, c)
		}
	}
}
