// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package admission bounds what one source of pod_probe data may make the gateway remember:
// distinct stable targets and distinct external targets per source pod, source pods in
// total. It is pure (no I/O, no clock of its own): the processor gives it the time.
//
// What is over a limit is refused; nothing already admitted is evicted by a newcomer. A
// remembered target is forgotten only when its source has not reported it for IdleTTL, so
// a source whose plan moves on (the ring changed) gets its new targets once the old ones
// have gone quiet.
package admission

import (
	"sync"
	"time"
)

// Reason says why a data point was refused.
type Reason string

// Refusal reasons (the processor's admission.refused telemetry and docs).
const (
	// Admitted: not refused.
	Admitted Reason = ""
	// SourceLimit: a source pod beyond MaxSources.
	SourceLimit Reason = "source_limit"
	// StableTargetLimit: a new stable target beyond MaxStableTargetsPerSource.
	StableTargetLimit Reason = "stable_target_limit"
	// ExternalTargetLimit: a new external target beyond MaxExternalTargetsPerSource.
	ExternalTargetLimit Reason = "external_target_limit"
)

// Limits of a Table. Zero fields take the defaults.
type Limits struct {
	// MaxSources: distinct source pods remembered.
	MaxSources int
	// MaxStableTargetsPerSource: distinct targets a source reports as stable pairs.
	MaxStableTargetsPerSource int
	// MaxExternalTargetsPerSource: distinct external targets (stable or not) per source.
	MaxExternalTargetsPerSource int
	// IdleTTL: a target (and a source) not reported this long is forgotten.
	IdleTTL time.Duration
}

// Defaults (docs: processor README, admission).
const (
	DefaultMaxSources                  = 10000
	DefaultMaxStableTargetsPerSource   = 16
	DefaultMaxExternalTargetsPerSource = 8
	DefaultIdleTTL                     = 3 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.MaxSources <= 0 {
		l.MaxSources = DefaultMaxSources
	}
	if l.MaxStableTargetsPerSource <= 0 {
		l.MaxStableTargetsPerSource = DefaultMaxStableTargetsPerSource
	}
	if l.MaxExternalTargetsPerSource <= 0 {
		l.MaxExternalTargetsPerSource = DefaultMaxExternalTargetsPerSource
	}
	if l.IdleTTL <= 0 {
		l.IdleTTL = DefaultIdleTTL
	}
	return l
}

// Target identifies a target of one source: a hash of its address, port and probe type.
type Target uint64

// source is what one source pod has been admitted: target -> last seen (unix seconds).
type source struct {
	stable, external map[Target]int64
	seen             int64
}

// Table remembers, per source pod, the targets admitted. Safe for concurrent use.
//
// Memory: per source ~100 B plus ~40 B per remembered target, so at most about
// MaxSources x (100 + 40 x (MaxStableTargetsPerSource + MaxExternalTargetsPerSource)) B:
// 10 MB at the defaults, 0.2 MB for 1,000 agents with 4 stable targets each.
type Table struct {
	lim     Limits
	mu      sync.Mutex
	sources map[string]*source
	swept   int64
}

// New returns an empty Table.
func New(l Limits) *Table {
	return &Table{lim: l.withDefaults(), sources: map[string]*source{}}
}

// Limits returns the limits in force (defaults filled in).
func (t *Table) Limits() Limits { return t.lim }

// Admit decides one data point's target, reported by source pod uid at now. It holds the
// Table's lock only for its own bookkeeping (the caller sanitises and enriches outside it).
// Points of cluster targets that are not stable (the planner's rotating peers: real pods
// and nodes, which the index confirmed) need no memory; they are refused only when their
// source is (SourceLimit), and the per-request limits bound them.
func (t *Table) Admit(uid string, now time.Time, tg Target, stable, external bool) Reason {
	sec := now.Unix()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked(sec)
	s := t.sources[uid]
	if s == nil {
		if len(t.sources) >= t.lim.MaxSources {
			return SourceLimit
		}
		s = &source{}
		t.sources[uid] = s
	}
	s.seen = sec
	if external {
		if r := admit(&s.external, tg, sec, t.lim.MaxExternalTargetsPerSource, ExternalTargetLimit); r != Admitted {
			return r
		}
	}
	if stable {
		return admit(&s.stable, tg, sec, t.lim.MaxStableTargetsPerSource, StableTargetLimit)
	}
	return Admitted
}

func admit(m *map[Target]int64, tg Target, now int64, limit int, reason Reason) Reason {
	if *m == nil {
		*m = map[Target]int64{}
	}
	if _, ok := (*m)[tg]; !ok && len(*m) >= limit {
		return reason
	}
	(*m)[tg] = now
	return Admitted
}

// sweepLocked forgets idle targets and sources, at most once per IdleTTL/4 (so a target
// is forgotten between IdleTTL and 1.25 IdleTTL after it was last reported).
func (t *Table) sweepLocked(now int64) {
	idle := int64(t.lim.IdleTTL / time.Second)
	if now-t.swept < max(1, idle/4) {
		return
	}
	t.swept = now
	for uid, s := range t.sources {
		for _, m := range []map[Target]int64{s.stable, s.external} {
			for tg, seen := range m {
				if now-seen > idle {
					delete(m, tg)
				}
			}
		}
		if now-s.seen > idle {
			delete(t.sources, uid)
		}
	}
}

// Stats is what a Table holds.
type Stats struct{ Sources, StableTargets, ExternalTargets int }

// Stats counts what the Table holds.
func (t *Table) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := Stats{Sources: len(t.sources)}
	for _, s := range t.sources {
		st.StableTargets += len(s.stable)
		st.ExternalTargets += len(s.external)
	}
	return st
}
