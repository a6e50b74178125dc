// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package planner decides which peers each netpulse agent probes in each
// round. Every agent computes the same plan on its own from the same
// membership list, so a plan is a pure function of (members, Config, round).
// The package does no I/O.
//
// Members sit on a ring ordered by a seeded 64-bit hash of their ID. The
// first M ring offsets 1..M are stable: every source probes its M ring
// successors every round (those pairs get PodNetworkHealth objects and
// per-pair series). The other offsets M+1..N-1 rotate: with period
// P = ceil((N-1-M)/K), round r uses block b = r mod P of K consecutive
// rotating offsets (wrapping), and the source at ring position i probes
// i+d for each offset d of the round. Each offset is a permutation of the
// ring, so every member has exactly M+K observers per round (M of them
// stable), and any P consecutive rounds run through all offsets 1..N-1, so
// every ordered pair is probed. See docs/planner.md for the guarantees, the
// churn figures and the trade-offs.
package planner

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Member is one agent in the membership list.
type Member struct {
	// ID is the stable identity (for example the pod UID). It must be
	// non-empty and unique; it alone decides the ring position.
	ID string
	// Node is informational and returned unchanged with targets.
	Node string
	// Zone is the topology zone. "" is a zone like any other.
	Zone string
}

// Config holds the planner settings. All agents must use the same values.
type Config struct {
	// K is the number of rotating targets per source per round (>= 1).
	K int
	// Stable is the number of stable peers per source (M >= 0): its ring
	// successors, probed every round besides the K rotating targets.
	Stable int
	// ProbeBudget caps the cluster-wide base probe rate in probes per
	// second; 0 means unlimited. Interval is stretched to respect it.
	ProbeBudget float64
	// BaseInterval is the round length when the budget does not bind.
	BaseInterval time.Duration
	// Seed changes the ring order and the jitter. 0 is a fine default.
	Seed uint64
}

var (
	// ErrInvalidConfig is wrapped by errors about Config fields.
	ErrInvalidConfig = errors.New("planner: invalid config")
	// ErrInvalidMembers is wrapped by errors about the membership list.
	ErrInvalidMembers = errors.New("planner: invalid members")
)

// Plan is an immutable probe plan for one membership. Build a new one on
// every membership change. It is safe for concurrent use.
type Plan struct {
	members []Member       // ring order
	index   map[string]int // ID -> ring position
	zone    []int32        // zone number per ring position
	multi   bool           // more than one zone
	// nextDiff[p] / prevDiff[p]: nearest position after / before p whose
	// zone differs from zone[p]; only set when multi.
	nextDiff []int32
	prevDiff []int32

	k        int     // rotating targets per source, min(K, N-1-m)
	m        int     // stable targets per source, min(Stable, N-1)
	full     bool    // K+M >= N-1: everyone probes everyone every round
	period   int     // rounds to full coverage
	probes   float64 // expected probes per round, counted against the budget
	interval time.Duration
	seed     uint64
}

// Hash domains keep ring order and jitter uncorrelated.
const (
	domainRing   = 'r'
	domainJitter = 'j'
)

// New validates the inputs and builds the plan. The order of members does
// not matter.
func New(members []Member, cfg Config) (*Plan, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := len(members)
	type keyed struct {
		h  uint64
		in int // input index, for error messages
		m  Member
	}
	ring := make([]keyed, n)
	for i, m := range members {
		if m.ID == "" {
			return nil, fmt.Errorf("%w: members[%d].ID is empty", ErrInvalidMembers, i)
		}
		ring[i] = keyed{hash64(cfg.Seed, domainRing, m.ID), i, m}
	}
	slices.SortFunc(ring, func(a, b keyed) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		if c := cmp.Compare(a.m.ID, b.m.ID); c != 0 {
			return c
		}
		return cmp.Compare(a.in, b.in)
	})
	// Equal IDs have equal hashes, so duplicates end up adjacent.
	for i := 1; i < n; i++ {
		if a, b := ring[i-1], ring[i]; a.m.ID == b.m.ID {
			return nil, fmt.Errorf("%w: duplicate ID %q at members[%d] and members[%d]", ErrInvalidMembers, a.m.ID, a.in, b.in)
		}
	}

	p := &Plan{
		members: make([]Member, n),
		index:   make(map[string]int, n),
		zone:    make([]int32, n),
		seed:    cfg.Seed,
	}
	zoneNames := make([]string, 0, n)
	for _, m := range members {
		zoneNames = append(zoneNames, m.Zone)
	}
	slices.Sort(zoneNames)
	zoneNames = slices.Compact(zoneNames)
	zoneSize := make([]int, len(zoneNames))
	for i, km := range ring {
		p.members[i] = km.m
		p.index[km.m.ID] = i
		z, _ := slices.BinarySearch(zoneNames, km.m.Zone)
		p.zone[i] = int32(z)
		zoneSize[z]++
	}
	p.multi = len(zoneNames) > 1
	if p.multi {
		p.buildZoneRuns()
	}

	switch {
	case n <= 1:
		p.k, p.period = 0, 0
	case cfg.K+cfg.Stable >= n-1:
		p.m, p.full, p.period = n-1, true, 1
	default:
		p.k, p.m = cfg.K, cfg.Stable
		p.period = (n - 1 - p.m + cfg.K - 1) / cfg.K
	}
	p.probes = float64(n * (p.k + p.m))
	if p.multi && !p.full {
		p.probes += expectedExtras(zoneSize, n, p.k+p.m)
	}
	p.interval = stretchInterval(p.probes, cfg.BaseInterval, cfg.ProbeBudget)
	return p, nil
}

// expectedExtras estimates how many sources per round add a cross-zone
// target: a source in zone z needs one when its K targets, which behave
// like a uniform sample of the other members, are all in z. The explicit
// float64 conversions stop the compiler from fusing multiply-adds, so
// amd64 and arm64 agents compute the same interval.
func expectedExtras(zoneSize []int, n, k int) float64 {
	var sum float64
	for _, nz := range zoneSize {
		prob := 1.0
		for i := range k {
			prob = float64(prob * float64(max(nz-1-i, 0)) / float64(n-1-i))
		}
		sum = float64(sum + float64(float64(nz)*prob))
	}
	return sum
}

func (c Config) validate() error {
	if c.K < 1 {
		return fmt.Errorf("%w: K must be >= 1, got %d", ErrInvalidConfig, c.K)
	}
	if c.Stable < 0 {
		return fmt.Errorf("%w: Stable must be >= 0, got %d", ErrInvalidConfig, c.Stable)
	}
	if c.BaseInterval <= 0 {
		return fmt.Errorf("%w: BaseInterval must be > 0, got %v", ErrInvalidConfig, c.BaseInterval)
	}
	if c.ProbeBudget < 0 || math.IsNaN(c.ProbeBudget) || math.IsInf(c.ProbeBudget, 0) {
		return fmt.Errorf("%w: ProbeBudget must be a finite number >= 0 (0 = unlimited), got %v", ErrInvalidConfig, c.ProbeBudget)
	}
	return nil
}

// buildZoneRuns fills nextDiff/prevDiff with two passes around the ring so
// that runs crossing position 0 are handled.
func (p *Plan) buildZoneRuns() {
	n := len(p.members)
	p.nextDiff = make([]int32, n)
	p.prevDiff = make([]int32, n)
	for i := range n {
		p.nextDiff[i], p.prevDiff[i] = -1, -1
	}
	for s := 2*n - 1; s >= 0; s-- {
		i := s % n
		j := (i + 1) % n
		if p.zone[j] != p.zone[i] {
			p.nextDiff[i] = int32(j)
		} else if p.nextDiff[j] >= 0 {
			p.nextDiff[i] = p.nextDiff[j]
		}
	}
	for s := 0; s < 2*n; s++ {
		i := s % n
		j := (i + n - 1) % n
		if p.zone[j] != p.zone[i] {
			p.prevDiff[i] = int32(j)
		} else if p.prevDiff[j] >= 0 {
			p.prevDiff[i] = p.prevDiff[j]
		}
	}
}

// Len returns the number of members.
func (p *Plan) Len() int { return len(p.members) }

// RoundsToFullCoverage returns the number of consecutive rounds, starting at
// any round, after which every ordered pair (a, b), a != b, has been
// probed: ceil((N-1-M)/K), 1 for a full mesh and 0 for N <= 1.
func (p *Plan) RoundsToFullCoverage() int { return p.period }

// Targets returns the members sourceID probes in round. There are
// min(M+K, N-1) of them, distinct and never the source itself: the M stable
// peers first (StableTargets), then the rotating ones in slot order; when
// there are several zones and none of them is in another zone, one extra
// cross-zone target is appended (the only case with M+K+1). It returns nil
// for an unknown source or N <= 1.
func (p *Plan) Targets(sourceID string, round uint64) []Member {
	i, ok := p.index[sourceID]
	if !ok {
		return nil
	}
	pos := p.appendTargets(make([]int32, 0, p.k+1), i, round)
	out := make([]Member, len(pos))
	for j, t := range pos {
		out[j] = p.members[t]
	}
	return out
}

// StableTargets returns the members sourceID probes every round: its M
// ring successors (all other members in a full mesh). They lead every
// Targets result. It returns nil for an unknown source or N <= 1.
func (p *Plan) StableTargets(sourceID string) []Member {
	i, ok := p.index[sourceID]
	if !ok {
		return nil
	}
	out := make([]Member, 0, p.m)
	for d := 1; d <= p.m; d++ {
		out = append(out, p.members[p.step(i, d)])
	}
	return out
}

// Stable returns the number of stable peers per source (M, or N-1 in a full
// mesh).
func (p *Plan) Stable() int { return p.m }

// Observers returns the IDs of the members that probe targetID in round:
// exactly min(M+K, N-1) base observers (its M stable observers first) plus
// any source that picked it as its extra cross-zone target. It is the
// exact inverse of Targets.
func (p *Plan) Observers(targetID string, round uint64) []string {
	q, ok := p.index[targetID]
	if !ok || p.k+p.m == 0 {
		return nil
	}
	out := make([]string, 0, p.m+p.k+1)
	for d := 1; d <= p.m; d++ {
		out = append(out, p.members[p.step(q, -d)].ID)
	}
	if p.full {
		return out
	}
	n := len(p.members)
	b := p.block(round)
	for j := range p.k {
		out = append(out, p.members[p.step(q, -p.offset(b, j))].ID)
	}
	if !p.multi {
		return out
	}
	// A source s with extra target q started scanning at its first target
	// t0 inside the run of zone z that ends right before q, so only that
	// run can hold t0.
	last := (q + n - 1) % n
	z := p.zone[last]
	if z == p.zone[q] {
		return out
	}
	e0 := p.firstOffset(b)
	first := (int(p.prevDiff[last]) + 1) % n
	var buf [16]int32
	for t0 := last; ; t0 = (t0 + n - 1) % n {
		s := p.step(t0, -e0)
		if p.zone[s] == z && p.needsExtra(s, p.appendBase(buf[:0], s, b)) {
			out = append(out, p.members[s].ID)
		}
		if t0 == first {
			break
		}
	}
	return out
}

// appendTargets appends the ring positions of source i's targets.
func (p *Plan) appendTargets(dst []int32, i int, round uint64) []int32 {
	if p.k+p.m == 0 {
		return dst
	}
	if p.full {
		return p.appendBase(dst, i, 0)
	}
	start := len(dst)
	dst = p.appendBase(dst, i, p.block(round))
	if p.multi && p.needsExtra(i, dst[start:]) {
		// The first position after the first target that is in another zone.
		dst = append(dst, p.nextDiff[dst[start]])
	}
	return dst
}

// appendBase appends the stable targets, then the rotating ones of block b.
func (p *Plan) appendBase(dst []int32, i int, b int) []int32 {
	for d := 1; d <= p.m; d++ {
		dst = append(dst, int32(p.step(i, d)))
	}
	for j := range p.k {
		dst = append(dst, int32(p.step(i, p.offset(b, j))))
	}
	return dst
}

func (p *Plan) needsExtra(i int, base []int32) bool {
	for _, t := range base {
		if p.zone[t] != p.zone[i] {
			return false
		}
	}
	return true
}

// block is the index of the slot block used in round.
func (p *Plan) block(round uint64) int { return int(round % uint64(p.period)) }

// offset is the ring offset of the j-th rotating slot of block b: block b
// holds offsets M+bK+1 .. M+bK+K, and the last block wraps to M+1, M+2, ...
// so that every round has K. The offsets do not depend on N except in that
// last block, so a membership change that keeps the period keeps each
// round's offsets.
func (p *Plan) offset(b, j int) int {
	return p.m + 1 + (b*p.k+j)%(len(p.members)-1-p.m)
}

// firstOffset is the ring offset of a source's first target in block b
// (where its cross-zone scan starts).
func (p *Plan) firstOffset(b int) int {
	if p.m > 0 {
		return 1
	}
	return p.offset(b, 0)
}

// step returns ring position i+d.
func (p *Plan) step(i, d int) int {
	n := len(p.members)
	return ((i+d)%n + n) % n
}

// hash64 is FNV-1a over (seed, domain, s) followed by the splitmix64
// finalizer; FNV alone leaves IDs that differ only in the last byte close
// together on the ring.
func hash64(seed uint64, domain byte, s string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := range 8 {
		h ^= (seed >> (8 * i)) & 0xff
		h *= prime
	}
	h ^= uint64(domain)
	h *= prime
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
