// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package livematrix keeps, in the gateway's memory, the newest probe result of every
// (observer node, target node) cell: what the pod_network_health exporter accepted from
// every agent, rotating probes included, so that the connectivity view can fill the cells
// no PodNetworkHealth object covers (with sampled probing, most of them).
//
// Cells are keyed by node, not pod: the matrix is node x node, an agent is a DaemonSet pod
// (one per node), and with require_authenticated_observers the exporter binds every
// observation's source node to the authenticated caller, so a row is exactly what one
// node's agent reported. A cell holds the newest round only (several probe types of one
// round merge into it); it is an observation, not a verdict.
//
// The Store is pure (no clock, no goroutine): callers pass the time. It is bounded by
// Config.MaxCells and Config.MaxAge; see Store for the eviction rules and
// docs/view.md for the memory figures.
package livematrix // import "github.com/netpulse/netpulse/internal/livematrix"

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netpulse/netpulse/internal/contract"
)

// Probe types a cell records (the contract's netpulse.probe.type values, in its order);
// any other is recorded as "other". A cell keeps them as bits of a uint8.
var probeTypes = append(slices.Clone(contract.ProbeTypes[:]), "other")

// A cell's probe-type mask (uint8) holds the contract's probe types and "other".
var _ [8 - len(contract.ProbeTypes) - 1]struct{}

func probeBit(t string) uint8 {
	for i, p := range probeTypes[:len(probeTypes)-1] {
		if p == t {
			return 1 << i
		}
	}
	return 1 << (len(probeTypes) - 1)
}

func probeNames(mask uint8) []string {
	var out []string
	for i, p := range probeTypes {
		if mask&(1<<i) != 0 {
			out = append(out, p)
		}
	}
	return out
}

// Sample is one accepted observation, as the store needs it.
type Sample struct {
	// Observer is the observing agent's node (the authenticated caller's, with
	// require_authenticated_observers); Target the node of the target pod, or the target
	// node. Samples without either, or with both the same, are not recorded.
	Observer, Target string
	// At is the probe round's time.
	At time.Time
	// Probe is the probe type (icmp, tcp, http, dns).
	Probe string
	// OK: the target answered.
	OK bool
	// RTT is the round's p50 (0 when none).
	RTT time.Duration
	// Stable: a stable pair (probed every round); otherwise a rotating one.
	Stable bool
}

// Config bounds a Store.
type Config struct {
	// MaxCells bounds the cells of all rows together (default DefaultMaxCells).
	MaxCells int
	// MaxAge: a cell whose newest round is older is dropped (default DefaultMaxAge, the
	// exporter's default target_ttl: what the per-target judgement remembers).
	MaxAge time.Duration
}

// Defaults of Config.
const (
	// DefaultMaxCells: a 1,000-node cluster's full matrix (1,000 x 999) fits; about
	// 60 MB (docs/view.md, BenchmarkCellMemory).
	DefaultMaxCells = 1_000_000
	DefaultMaxAge   = 10 * time.Minute
)

func (c Config) withDefaults() Config {
	if c.MaxCells <= 0 {
		c.MaxCells = DefaultMaxCells
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	return c
}

// cell is one (observer, target) result: 16 bytes, the target's name interned.
type cell struct {
	at     int64  // the round's time, Unix ns
	rttUS  uint32 // p50 in µs, saturating (0: none)
	ok     uint8  // probe types that succeeded in the round (probeBit)
	failed uint8  // probe types that failed in the round
	stable bool
}

// row is one observer node's cells, keyed by the interned target.
type row struct {
	name  string
	index int // in Store.rows
	cells map[uint32]cell
}

// Store is the newest result per (observer node, target node), bounded:
//
//   - at most MaxCells cells in all; each row's share is MaxCells / rows. A row at its
//     share that records a new target drops its own oldest cell; a row below its share
//     records into a full store by dropping the oldest cell of a row above its share
//     (there always is one). So no observer, whatever it sends, holds more than its share
//     once other observers need theirs, nor evicts a row within its share;
//   - cells older than MaxAge are dropped (swept at most every MaxAge/8, and never shown).
//
// A row is written only by samples whose Observer names it: the caller feeds the source
// node the exporter bound to the authenticated caller. Safe for concurrent use.
type Store struct {
	cfg Config

	mu        sync.Mutex
	rows      []*row
	rowIndex  map[string]*row
	cells     int
	names     interner
	version   uint64
	lastSweep int64
	cursor    int // where the search for a row above its share resumes
}

// New returns an empty store.
func New(cfg Config) *Store {
	return &Store{cfg: cfg.withDefaults(), rowIndex: map[string]*row{}, names: newInterner()}
}

// Config is the store's bounds.
func (s *Store) Config() Config { return s.cfg }

// Record adds samples received at now: each replaces its cell's result when it is of a
// newer round, and merges into it when of the same round (another probe type); older
// rounds and rounds older than MaxAge change nothing.
func (s *Store) Record(now time.Time, samples ...Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nowNS := now.UnixNano()
	oldest := nowNS - int64(s.cfg.MaxAge)
	if every := max(int64(s.cfg.MaxAge)/8, int64(time.Second)); nowNS-s.lastSweep >= every {
		s.sweep(oldest)
		s.lastSweep = nowNS
	}
	for i := range samples {
		sm := &samples[i]
		if sm.Observer == "" || sm.Target == "" || sm.Observer == sm.Target {
			continue
		}
		at := sm.At.UnixNano()
		if at <= oldest {
			continue
		}
		s.record(sm, at)
	}
}

func (s *Store) record(sm *Sample, at int64) {
	bit := probeBit(sm.Probe)
	var rtt uint32
	if sm.OK && sm.RTT > 0 {
		rtt = uint32(min(max(sm.RTT.Microseconds(), 1), int64(^uint32(0))))
	}
	r := s.rowIndex[sm.Observer]
	if r != nil {
		if id, ok := s.names.lookup(sm.Target); ok {
			if c, ok := r.cells[id]; ok {
				switch {
				case at > c.at:
					c = cell{at: at, stable: sm.Stable}
				case at < c.at:
					return
				}
				if sm.OK {
					c.ok |= bit
					if rtt > 0 && (c.rttUS == 0 || bit == probeBit(contract.ProbeTypeICMP)) {
						c.rttUS = rtt // ICMP's echo RTT over a connect or request time
					}
				} else {
					c.failed |= bit
				}
				c.stable = c.stable || sm.Stable
				r.cells[id] = c
				s.version++
				return
			}
		}
	}
	// A new cell: make room first.
	if r == nil {
		r = &row{name: strings.Clone(sm.Observer), index: len(s.rows), cells: map[uint32]cell{}}
		s.rows = append(s.rows, r)
		s.rowIndex[r.name] = r
	}
	share := max(s.cfg.MaxCells/len(s.rows), 1)
	switch {
	case len(r.cells) >= share:
		if !s.evictOldest(r, at) {
			s.dropIfEmpty(r)
			return // older than every cell of its own full row
		}
	case s.cells >= s.cfg.MaxCells:
		v := s.overShare(share, r)
		s.evictOldest(v, 0)
		s.dropIfEmpty(v)
	}
	c := cell{at: at, stable: sm.Stable}
	if sm.OK {
		c.ok, c.rttUS = bit, rtt
	} else {
		c.failed = bit
	}
	r.cells[s.names.ref(sm.Target)] = c
	s.cells++
	s.version++
}

// overShare finds a row other than r holding more than share cells. One exists whenever
// the store is full, r is below its share and rows <= MaxCells: the others then hold
// more than (rows-1)*share. The search resumes where the last one ended, so repeated evictions
// cost O(rows) in all, not each.
func (s *Store) overShare(share int, r *row) *row {
	n := len(s.rows)
	for i := 0; i < n; i++ {
		c := s.rows[(s.cursor+i)%n]
		if c != r && len(c.cells) > share {
			s.cursor = (s.cursor + i) % n
			return c
		}
	}
	// More rows than MaxCells (observers the exporter did not bind to an authenticated
	// caller): every row holds one cell at most; the oldest of them goes.
	var victim *row
	var vAt int64
	for _, c := range s.rows {
		if c == r {
			continue
		}
		for _, cl := range c.cells {
			if victim == nil || cl.at < vAt {
				victim, vAt = c, cl.at
			}
		}
	}
	return victim
}

// evictOldest drops r's oldest cell when it is older than at (any cell when at is 0),
// and reports whether it did.
func (s *Store) evictOldest(r *row, at int64) bool {
	var (
		victim uint32
		vAt    int64
		found  bool
	)
	for id, c := range r.cells {
		if !found || c.at < vAt || (c.at == vAt && id < victim) {
			victim, vAt, found = id, c.at, true
		}
	}
	if !found || (at != 0 && vAt >= at) {
		return false
	}
	s.drop(r, victim)
	return true
}

func (s *Store) drop(r *row, id uint32) {
	delete(r.cells, id)
	s.names.unref(id)
	s.cells--
	s.version++
}

// dropIfEmpty removes a row without cells (swap with the last row).
func (s *Store) dropIfEmpty(r *row) {
	if len(r.cells) > 0 {
		return
	}
	last := s.rows[len(s.rows)-1]
	s.rows[r.index], last.index = last, r.index
	s.rows = s.rows[:len(s.rows)-1]
	delete(s.rowIndex, r.name)
	s.cursor = 0
}

// sweep drops every cell of a round at or before oldest: O(cells), at most every MaxAge/8.
func (s *Store) sweep(oldest int64) {
	for i := len(s.rows) - 1; i >= 0; i-- {
		r := s.rows[i]
		for id, c := range r.cells {
			if c.at <= oldest {
				s.drop(r, id)
			}
		}
		s.dropIfEmpty(r)
	}
}

// Result is one cell as the view shows it: the observer node's newest round towards the
// target node. It is an observation ("observed N s ago"), not a verdict.
type Result struct {
	Target string    `json:"target"`
	At     time.Time `json:"at"`
	// AgeSeconds is now - At (0 when At is ahead of now, within the exporter's skew).
	AgeSeconds float64 `json:"ageSeconds"`
	// Reachable: some probe of the round succeeded.
	Reachable bool `json:"reachable"`
	// OK and Failed are the probe types that succeeded and failed in the round.
	OK     []string `json:"ok,omitempty"`
	Failed []string `json:"failed,omitempty"`
	// P50 is the round's RTT p50 (ICMP's when it answered), e.g. "1.234ms"; empty when none.
	P50 string `json:"p50,omitempty"`
	// Stable: the pair was probed as a stable pair; otherwise as a rotating one.
	Stable bool `json:"stable"`
}

// Row returns observer's cells at now (none older than MaxAge), ordered by target name.
func (s *Store) Row(observer string, now time.Time) []Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rowIndex[observer]
	if r == nil {
		return nil
	}
	nowNS := now.UnixNano()
	oldest := nowNS - int64(s.cfg.MaxAge)
	out := make([]Result, 0, len(r.cells))
	for id, c := range r.cells {
		if c.at <= oldest {
			continue
		}
		res := Result{Target: s.names.name[id], At: time.Unix(0, c.at).UTC(), AgeSeconds: float64(max(nowNS-c.at, 0)) / 1e9,
			Reachable: c.ok != 0, OK: probeNames(c.ok), Failed: probeNames(c.failed), Stable: c.stable}
		if c.rttUS > 0 {
			res.P50 = (time.Duration(c.rttUS) * time.Microsecond).String()
		}
		out = append(out, res)
	}
	slices.SortFunc(out, func(a, b Result) int { return cmp.Compare(a.Target, b.Target) })
	return out
}

// Cell returns the result of (observer, target) at now.
func (s *Store) Cell(observer, target string, now time.Time) (Result, bool) {
	// A row holds at most a few thousand cells: reusing Row keeps one formatting path.
	for _, r := range s.Row(observer, now) {
		if r.Target == target {
			return r, true
		}
	}
	return Result{}, false
}

// Stats is the store's size.
type Stats struct {
	Cells    int `json:"cells"`
	Rows     int `json:"observers"`
	MaxCells int `json:"maxCells"`
	// MaxAgeSeconds is Config.MaxAge.
	MaxAgeSeconds float64 `json:"maxAgeSeconds"`
	// Version changes with every recorded change.
	Version uint64 `json:"version"`
}

// Stats returns the store's size and version.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Cells: s.cells, Rows: len(s.rows), MaxCells: s.cfg.MaxCells, MaxAgeSeconds: s.cfg.MaxAge.Seconds(), Version: s.version}
}

// interner gives each target name one uint32 and one copy of the string while any cell
// refers to it, so a cell's key is 4 bytes and a name shared by a thousand rows is
// stored once. Names nobody refers to are forgotten (their id reused).
type interner struct {
	ids  map[string]uint32
	name []string
	refs []int32
	free []uint32
}

func newInterner() interner { return interner{ids: map[string]uint32{}} }

func (n *interner) lookup(s string) (uint32, bool) {
	id, ok := n.ids[s]
	return id, ok
}

func (n *interner) ref(s string) uint32 {
	if id, ok := n.ids[s]; ok {
		n.refs[id]++
		return id
	}
	s = strings.Clone(s) // not a substring of a larger decoded buffer
	var id uint32
	if k := len(n.free); k > 0 {
		id, n.free = n.free[k-1], n.free[:k-1]
		n.name[id], n.refs[id] = s, 1
	} else {
		id = uint32(len(n.name))
		n.name, n.refs = append(n.name, s), append(n.refs, 1)
	}
	n.ids[s] = id
	return id
}

func (n *interner) unref(id uint32) {
	if n.refs[id]--; n.refs[id] > 0 {
		return
	}
	delete(n.ids, n.name[id])
	n.name[id] = ""
	n.free = append(n.free, id)
}
