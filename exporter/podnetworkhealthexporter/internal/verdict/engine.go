// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package verdict is the pod_network_health exporter's judgement stage: it turns
// observations into pair verdicts with hysteresis (Summarizer), per-target verdicts (judged
// across all observers of a target, so a dead target is found within one or two probe
// intervals at any cluster size), observer silence, and the node judgement (quorum); it
// keeps pair summaries only for the pairs that have objects (stable pairs, failing pairs).
// It is pure: no I/O, the clock is injected. docs/summary.md explains the rules with their
// figures.
package verdict // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// Priority orders writes (the write queue's priorities).
type Priority = writequeue.Priority

// Priorities, most urgent first.
const (
	PriorityVerdict   = writequeue.Verdict   // verdict changes, objects of newly failing pairs, condition changes
	PriorityEvent     = writequeue.Event     // Events
	PriorityUpdate    = writequeue.Update    // first writes of stable pairs, latency/loss changes
	PriorityHeartbeat = writequeue.Heartbeat // unchanged status rewritten so staleness shows
	PriorityCleanup   = writequeue.Cleanup   // deletes
)

// Config configures an Engine. Zero fields take the defaults.
type Config struct {
	// Summary configures the pair summaries (window, hysteresis, outages).
	Summary SummaryConfig
	// Heartbeat is the configured heartbeat of objects (plan.Policy.HeartbeatInterval,
	// default 10m), stretched to fit the budget (HeartbeatShare): an object not written
	// for that long is looked at again.
	Heartbeat time.Duration
	// TargetQuorum distinct observer nodes must fail, with no success after them, for a
	// target to be Unreachable (default 3; fewer when fewer observers exist).
	TargetQuorum int
	// TargetRecovery distinct observer nodes must reach an Unreachable target again
	// (default 2).
	TargetRecovery int
	// TargetTTL: targets, and stable pairs, not observed this long are forgotten; their
	// objects are deleted (default 10m).
	TargetTTL time.Duration
	// FailingPairRetention: the object of a rotating pair that failed is kept this long
	// after its last failure, so its outage stays readable (default 30m).
	FailingPairRetention time.Duration
	// FailingPairsPerSource bounds the rotating pairs of one source tracked because they
	// failed while others reached their target (default 1), so that objects stay
	// <= (M+1)·N plus declared pairs under any fault. The bound is per source, not shared:
	// what one source reports never takes another's place.
	FailingPairsPerSource int
	// Namespace: when set, only sources in it are written (all-in-one mode).
	Namespace string
	// WritesPerSecond is the API write budget (default 5); HeartbeatShare of it (default
	// 0.5) is what heartbeats of all objects may use: the heartbeat interval stretches with
	// the object count (writequeue.HeartbeatInterval).
	WritesPerSecond float64
	HeartbeatShare  float64
	// MaxProbeInterval caps the round length an observer is believed to have (default 1m):
	// an observer is silent after three of its rounds without a report.
	MaxProbeInterval time.Duration
	// MaxFutureSkew: observations dated more than this after their arrival are refused
	// (default DefaultMaxFutureSkew; the decoder refuses them first, counted as
	// future_timestamp).
	MaxFutureSkew time.Duration
	// Voter says which observer node an observation's source votes for in the per-target
	// judgement (and so in the node quorum built on its evidence), and whether it votes at
	// all. nil: every source votes for its own node (Source.Node, else its pod).
	//
	// Hook for roles (#28 item 3): only agents' nodes count toward a quorum; the identity
	// package decides who is an agent. A source that does not vote still has its own
	// pairs summarised.
	Voter func(src observation.Source) (node string, votes bool)
}

// Defaults of Config.
const (
	DefaultTargetQuorum         = 3
	DefaultTargetRecovery       = 2
	DefaultTargetTTL            = 10 * time.Minute
	DefaultFailingPairRetention = 30 * time.Minute
	DefaultWritesPerSecond      = 5
	DefaultHeartbeatShare       = 0.5
	// DefaultHeartbeat is plan.DefaultHeartbeatInterval.
	DefaultHeartbeat             = 10 * time.Minute
	DefaultMaxProbeInterval      = time.Minute
	DefaultFailingPairsPerSource = 1
	// DefaultMaxFutureSkew is observation.DefaultMaxFutureSkew (see observation.FutureSkew).
	DefaultMaxFutureSkew = observation.DefaultMaxFutureSkew
)

func (c Config) withDefaults() Config {
	if c.TargetQuorum <= 0 {
		c.TargetQuorum = DefaultTargetQuorum
	}
	if c.TargetRecovery <= 0 {
		c.TargetRecovery = DefaultTargetRecovery
	}
	if c.TargetTTL <= 0 {
		c.TargetTTL = DefaultTargetTTL
	}
	if c.FailingPairRetention <= 0 {
		c.FailingPairRetention = DefaultFailingPairRetention
	}
	if c.WritesPerSecond <= 0 {
		c.WritesPerSecond = DefaultWritesPerSecond
	}
	if c.HeartbeatShare <= 0 || c.HeartbeatShare > 1 {
		c.HeartbeatShare = DefaultHeartbeatShare
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.MaxProbeInterval <= 0 {
		c.MaxProbeInterval = DefaultMaxProbeInterval
	}
	if c.MaxFutureSkew <= 0 {
		c.MaxFutureSkew = DefaultMaxFutureSkew
	}
	if c.FailingPairsPerSource <= 0 {
		c.FailingPairsPerSource = DefaultFailingPairsPerSource
	}
	return c
}

// pairInfo says why a pair is summarised.
type pairInfo struct {
	stable     bool      // observed as a stable pair
	lastStable time.Time // newest stable observation
	// lastFailure is the newest failed round; candidate pairs (rotating, failed while
	// others reached the target) are kept FailingPairRetention after it.
	lastFailure time.Time
	target      TargetKey // of the newest observation (its family)
	// seeded: resumed from the API and not observed since; nothing is written for it
	// until an observation brings news.
	seeded bool
	// families: the pair's own rounds per address family (0 ipv4, 1 ipv6), so that one
	// failing family shows while the other keeps the pair Reachable.
	families [2]familyRounds
}

// familyRounds is a pair's run of rounds in one address family.
type familyRounds struct {
	lastRound time.Time
	lastOK    bool
	fails     int       // consecutive failed rounds
	failSince time.Time // the first of them
}

func familyIndex(f string) int {
	if f == observation.FamilyIPv6 {
		return 1
	}
	return 0
}

var familyNames = [2]string{observation.FamilyIPv4, observation.FamilyIPv6}

func (f *familyRounds) add(at time.Time, ok bool) {
	switch {
	case at.After(f.lastRound):
		f.lastRound, f.lastOK = at, ok
		if ok {
			f.fails = 0
		} else {
			if f.fails == 0 {
				f.failSince = at
			}
			f.fails++
		}
	case at.Equal(f.lastRound) && ok && !f.lastOK:
		f.lastOK, f.fails = true, 0 // another probe of the round succeeded
	}
}

// observerState is what is known of a source.
type observerState struct {
	namespace, name, node string
	lastSeen              time.Time // newest round
	lastArrival           time.Time // when its newest observation arrived
	interval              time.Duration
	silent                bool
	// voter: the key of the node it votes for in the per-target judgement ("" when it
	// does not vote).
	voter string
}

// voterOf is the node src votes for, and whether it votes (Config.Voter).
func (e *Engine) voterOf(src observation.Source) (node string, votes bool) {
	if e.cfg.Voter != nil {
		return e.cfg.Voter(src)
	}
	return src.Node, true
}

// voterNodes counts the distinct observer nodes that vote and are not distrusted: the
// cluster's observers, which bound how many observer nodes a target can have (caller
// holds mu). One node's reports add at most one to it and never lower it.
func (e *Engine) voterNodes() int {
	seen := make(map[string]struct{}, len(e.observers))
	for _, ob := range e.observers {
		if ob.voter != "" && !e.distrusted(ob.node) {
			seen[ob.voter] = struct{}{}
		}
	}
	return len(seen)
}

// TakeoverGrace: how long a new writer waits before it reads any agent as newly silent.
// On real nodes (internal/e2ereal) the agents reached a new leader up to ~20 s after the
// takeover: the Service has no endpoint between the old leader's deletion and the new one's
// label, and gRPC's reconnect backoff (1 s, x1.6, not configurable in the OTLP exporter)
// has grown meanwhile. An agent really silent at a takeover reads silent 30 s later.
const TakeoverGrace = 30 * time.Second

// silentAfter is how long an observer may stay quiet before it reads as silent: three of
// its rounds (at most maxInterval each), and never less than 10 s (batching and delivery
// take a few seconds).
func (o *observerState) silentAfter(maxInterval time.Duration) time.Duration {
	return max(3*min(o.interval, maxInterval), 10*time.Second)
}

// ObjectRecord is what was last written for a pair that has an object.
type ObjectRecord struct {
	Written observation.Written
	// BadObserver: written as Unknown / ObserverUnhealthy.
	BadObserver bool
	// Degraded: the DegradedFamilies written, comma-separated.
	Degraded string
	// Silent: written as Unknown / ObserverSilent.
	Silent bool
}

// PairState is the judgement of one pair that may need a write: it changed, or its object
// is a heartbeat old.
type PairState struct {
	Key     observation.PairKey
	Summary observation.Summary
	// Stable: observed as a stable pair (otherwise a rotating pair followed while failing).
	Stable bool
	// Seeded: resumed from the API and not observed since.
	Seeded bool
	// HasObject and Last: whether the pair has an object, and what was written to it.
	HasObject bool
	Last      ObjectRecord
	// SilentObserver names the pair's observer pod ("namespace/name") when it stopped
	// reporting.
	SilentObserver string
	// BadObserverNode: the pair is Unreachable because its observer's node cannot reach
	// the pod network (unset for seeded pairs).
	BadObserverNode string
	// DegradedFamilies: address families that fail while another answers (sorted; empty
	// when every probed family answers); DegradedSince the first failed round of the
	// earliest of them (unset for seeded pairs).
	DegradedFamilies []string
	DegradedSince    time.Time
}

// Judgement is what one Judge found.
type Judgement struct {
	// Pairs that may need a write, ordered by key.
	Pairs []PairState
	// Deletes: pairs dropped (expired, past retention) that had objects.
	Deletes []observation.PairKey
	// TargetChanges: per-target verdict changes, for logs and metrics, ordered by time.
	TargetChanges []TargetStatus
	// ObserverChanges: observers that fell silent or reported again.
	ObserverChanges []ObserverStatus
	// Heartbeat is the heartbeat interval in force.
	Heartbeat time.Duration
}

// ObserverStatus is whether one observer (source pod) reports.
type ObserverStatus struct {
	UID, Namespace, Name, Node string
	Silent                     bool
	LastSeen                   time.Time
}

// Observers returns every known observer, ordered by namespace and name.
func (e *Engine) Observers() []ObserverStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]ObserverStatus, 0, len(e.observers))
	for uid, ob := range e.observers {
		out = append(out, ObserverStatus{UID: uid, Namespace: ob.namespace, Name: ob.name, Node: ob.node, Silent: ob.silent, LastSeen: ob.lastSeen})
	}
	slices.SortFunc(out, func(a, b ObserverStatus) int {
		if a.Namespace != b.Namespace {
			return strings.Compare(a.Namespace, b.Namespace)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// sourcesWithObjects returns the observers that have at least one object (caller holds mu).
func (e *Engine) sourcesWithObjects() map[string]bool {
	out := make(map[string]bool, len(e.observers))
	for k := range e.written {
		out[k.SourceUID] = true
	}
	return out
}

// Stats are gauges of the engine's state.
type Stats struct {
	Targets, Pairs, StablePairs, CandidatePairs, Objects, Observers, SilentObservers int
	Summarizer                                                                       SummaryStats
}

// Engine is the exporter's decision core. Safe for concurrent use.
type Engine struct {
	cfg   Config
	judge judgeConfig

	mu sync.Mutex
	// candidates: pairs tracked but not stable, per source pod UID.
	candidates   map[string]int
	summ         *Summarizer
	targets      map[TargetKey]*targetState
	dirtyTargets map[TargetKey]struct{}
	observers    map[string]*observerState // by source pod UID
	pairs        map[observation.PairKey]*pairInfo
	dirty        map[observation.PairKey]struct{}
	// written: what was last decided for each object (the object set).
	written            map[observation.PairKey]observation.Written
	writtenBadObserver map[observation.PairKey]bool
	writtenDegraded    map[observation.PairKey]string
	writtenSilent      map[observation.PairKey]bool
	fullPass           bool
	// badNodes are the nodes the node judgement found unable to reach the pod network:
	// their observers' failures are not evidence against targets.
	badNodes map[string]bool
	// seededBad: observers' nodes the previous writer blamed; they stay distrusted until
	// the node judgement has evidence about them.
	seededBad map[string]bool
	// termStart: when this leadership term resumed (Resume).
	termStart time.Time
	nodes     nodeStates
}

// New returns an Engine.
func New(cfg Config) *Engine {
	cfg = cfg.withDefaults()
	return &Engine{
		cfg:                cfg,
		judge:              judgeConfig{quorum: cfg.TargetQuorum, recovery: cfg.TargetRecovery},
		summ:               NewSummarizer(cfg.Summary),
		candidates:         map[string]int{},
		targets:            map[TargetKey]*targetState{},
		dirtyTargets:       map[TargetKey]struct{}{},
		observers:          map[string]*observerState{},
		pairs:              map[observation.PairKey]*pairInfo{},
		dirty:              map[observation.PairKey]struct{}{},
		written:            map[observation.PairKey]observation.Written{},
		writtenBadObserver: map[observation.PairKey]bool{},
		writtenDegraded:    map[observation.PairKey]string{},
		writtenSilent:      map[observation.PairKey]bool{},
		badNodes:           map[string]bool{},
		seededBad:          map[string]bool{},
		nodes:              nodeStates{},
	}
}

// Config returns the effective configuration.
func (e *Engine) Config() Config { return e.cfg }

// countCandidate adds d to the candidates of the source of k (caller holds mu).
func (e *Engine) countCandidate(k observation.PairKey, d int) {
	n := e.candidates[k.SourceUID] + d
	if n <= 0 {
		delete(e.candidates, k.SourceUID)
		return
	}
	e.candidates[k.SourceUID] = n
}

// Observe feeds observations (arrival time now). Every observation feeds the per-target
// judgement as its observer node's vote; only stable pairs, and rotating pairs that failed
// while their target is otherwise reachable (up to FailingPairsPerSource per source), are
// summarised per pair. It returns how many observations were unusable: invalid, or dated
// more than MaxFutureSkew after now.
func (e *Engine) Observe(obs []observation.Observation, now time.Time) (ignored int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var tracked []observation.Observation
	future := now.Add(e.cfg.MaxFutureSkew)
	for i := range obs {
		o := &obs[i]
		key := observation.KeyOf(o)
		if !key.Valid() || o.Timestamp.IsZero() || o.Timestamp.After(future) {
			ignored++
			continue
		}
		tk := TargetKeyOf(o)
		ts := e.targets[tk]
		node, votes := e.voterOf(o.Source)
		if votes {
			if ts == nil {
				ts = &targetState{key: tk, verdict: observation.VerdictUnknown, target: o.Target}
				e.targets[tk] = ts
			}
			if !o.Timestamp.Before(ts.lastSeen) {
				mergeTarget(&ts.target, &o.Target)
				ts.leaving = o.TargetLeaving
			}
			ts.add(tobs{at: o.Timestamp, observer: o.Source.UID, node: node, ok: o.Success})
			e.dirtyTargets[tk] = struct{}{}
		}

		ob := e.observers[o.Source.UID]
		if ob == nil {
			ob = &observerState{}
			e.observers[o.Source.UID] = ob
		}
		ob.namespace, ob.name = o.Source.Namespace, o.Source.Name
		if o.Source.Node != "" {
			ob.node = o.Source.Node
		}
		ob.voter = ""
		if votes {
			ob.voter = voterKey(node, o.Source.UID)
		}
		if o.Timestamp.After(ob.lastSeen) {
			// Its round length, as it reports: a longer gap is taken at once, a shorter one
			// slowly, so one late round or points of one round a few ms apart do not make
			// a slow observer read as silent.
			if gap := o.Timestamp.Sub(ob.lastSeen); !ob.lastSeen.IsZero() && gap >= time.Second {
				if gap > ob.interval {
					ob.interval = gap
				} else {
					ob.interval = (3*ob.interval + gap) / 4
				}
			}
			ob.lastSeen = o.Timestamp
		}
		ob.lastArrival = now

		p := e.pairs[key]
		switch {
		case o.Stable:
			if p == nil {
				p = &pairInfo{}
				e.pairs[key] = p
			} else if !p.stable {
				e.countCandidate(key, -1)
			}
			p.stable = true
			if o.Timestamp.After(p.lastStable) {
				p.lastStable = o.Timestamp
			}
		case p != nil && p.stable && o.Timestamp.After(p.lastStable):
			// Its observer probes it as a rotating peer now: the ring moved (membership
			// changed). It is followed on only while it fails; a healthy one's object goes
			// at the next Reconcile instead of lingering for TargetTTL.
			p.stable = false
			e.countCandidate(key, +1)
		case p == nil && !o.Success && (ts == nil || ts.verdict != observation.VerdictUnreachable) && !e.badNodes[o.Source.Node] &&
			e.candidates[key.SourceUID] < e.cfg.FailingPairsPerSource:
			// A rotating pair failed while its target is not judged unreachable: a
			// path-specific failure worth following, within its source's share.
			p = &pairInfo{}
			e.pairs[key] = p
			e.countCandidate(key, +1)
		}
		if p == nil {
			continue
		}
		if !o.Success && o.Timestamp.After(p.lastFailure) {
			p.lastFailure = o.Timestamp
		}
		p.target = tk
		p.seeded = false
		p.families[familyIndex(tk.Family)].add(o.Timestamp, o.Success)
		tracked = append(tracked, *o)
		e.dirty[key] = struct{}{}
	}
	ignored += e.summ.Add(tracked...)
	return ignored
}

func mergeTarget(t, o *observation.Target) {
	for _, f := range []struct{ dst, src *string }{
		{&t.Namespace, &o.Namespace}, {&t.Name, &o.Name}, {&t.UID, &o.UID}, {&t.Node, &o.Node}, {&t.Zone, &o.Zone},
	} {
		if *f.src != "" {
			*f.dst = *f.src
		}
	}
	t.Kind, t.Address, t.Port = o.Kind, o.Address, o.Port
}

// observerDistrusted reports whether the observer uid is on a distrusted node (caller
// holds mu).
func (e *Engine) observerDistrusted(uid string) bool {
	ob := e.observers[uid]
	return ob != nil && e.distrusted(ob.node)
}

// distrusted reports whether observers on node have lost the pod network (caller holds mu).
func (e *Engine) distrusted(node string) bool { return node != "" && e.badNodes[node] }

// Judge judges the targets observed since the last call, escalates, expires and drops
// pairs, and returns the pairs that may need a write at now (changed, or with an object a
// heartbeat old). The write decisions are the plan stage's (plan.PairObjects); what it
// writes comes back through Record, and Events after that.
func (e *Engine) Judge(now time.Time) Judgement {
	e.mu.Lock()
	defer e.mu.Unlock()
	var j Judgement
	j.TargetChanges = e.judgeTargets()
	pairKeys := e.pairKeys()
	e.escalatePairs(pairKeys)
	for k, t := range e.targets {
		if now.Sub(t.lastSeen) > e.cfg.TargetTTL {
			delete(e.targets, k)
		}
	}
	j.ObserverChanges = e.judgeObservers(now)
	if len(j.ObserverChanges) > 0 {
		for k := range e.pairs {
			pairKeys[k] = struct{}{}
		}
	}
	j.Deletes = e.expirePairs(now, pairKeys)
	j.Heartbeat = e.heartbeat(e.cfg.Heartbeat)
	j.Pairs = e.duePairs(now, pairKeys, j.Heartbeat)
	return j
}

// judgeTargets re-judges the targets observed since the last call (all after Resume) and
// returns those whose verdict changed, ordered by time (caller holds mu).
func (e *Engine) judgeTargets() []TargetStatus {
	var changes []TargetStatus
	judgeKeys := e.dirtyTargets
	if e.fullPass {
		judgeKeys = map[TargetKey]struct{}{}
		for k := range e.targets {
			judgeKeys[k] = struct{}{}
		}
	}
	judge := e.judge
	judge.voters = e.voterNodes()
	for k := range judgeKeys {
		if t := e.targets[k]; t != nil && t.judge(judge, e.distrusted) {
			changes = append(changes, t.status())
		}
	}
	clear(e.dirtyTargets)
	slices.SortFunc(changes, func(a, b TargetStatus) int { return a.Since.Compare(b.Since) })
	return changes
}

// pairKeys is the set of pairs to look at: those observed since the last call, or all
// after Resume (caller holds mu).
func (e *Engine) pairKeys() map[observation.PairKey]struct{} {
	if !e.fullPass {
		return e.dirty
	}
	keys := make(map[observation.PairKey]struct{}, len(e.pairs))
	for k := range e.pairs {
		keys[k] = struct{}{}
	}
	return keys
}

// escalatePairs: pairs whose newest round failed turn Unreachable at once when their target
// is judged unreachable by its observers; candidate pairs when they failed on two visits
// (caller holds mu).
func (e *Engine) escalatePairs(pairKeys map[observation.PairKey]struct{}) {
	for k := range pairKeys {
		p := e.pairs[k]
		if p == nil {
			continue
		}
		if t := e.targets[p.target]; t != nil && t.verdict == observation.VerdictUnreachable {
			if _, hasObject := e.written[k]; !p.stable && !hasObject {
				// The target's own outage explains this rotating pair's failure: it is
				// not path-specific after all, and the stable pairs show the outage.
				e.summ.Forget(k)
				delete(e.pairs, k)
				delete(pairKeys, k)
				e.countCandidate(k, -1)
				continue
			}
			e.summ.Escalate(k, fmt.Sprintf("%s is unreachable from %d observer nodes", p.target.Family, t.failing))
			continue
		}
		if !p.stable {
			if v, fails, ok := e.summ.Verdict(k); ok && fails >= 2 && v != observation.VerdictUnreachable {
				e.summ.Escalate(k, "failed on consecutive visits while other observers reach the target")
			}
		}
	}
}

// judgeObservers marks observers silent or reporting again and forgets those long gone
// that have no objects; it returns the changes (caller holds mu).
func (e *Engine) judgeObservers(now time.Time) []ObserverStatus {
	var changes []ObserverStatus
	var withObjects map[string]bool // built once, only when an observer is past TargetTTL
	// A new term's first TakeoverGrace declares no agent silent: the agents follow the
	// writer through a Service that selects it, and they reach it only once it has labelled
	// itself, the endpoint is published and their gRPC reconnect backoff has run.
	inGrace := !e.termStart.IsZero() && now.Sub(e.termStart) < TakeoverGrace
	for k, ob := range e.observers {
		silent := now.Sub(ob.lastArrival) > ob.silentAfter(e.cfg.MaxProbeInterval)
		if silent && !ob.silent && inGrace {
			silent = false
		}
		if silent != ob.silent {
			ob.silent = silent
			changes = append(changes, ObserverStatus{UID: k, Namespace: ob.namespace, Name: ob.name, Node: ob.node, Silent: silent, LastSeen: ob.lastSeen})
		}
		// A silent observer is remembered while it has objects: they read ObserverSilent
		// until its pod is deleted (its objects are garbage-collected with it).
		if now.Sub(ob.lastSeen) > e.cfg.TargetTTL {
			if withObjects == nil {
				withObjects = e.sourcesWithObjects()
			}
			if !withObjects[k] {
				delete(e.observers, k)
			}
		}
	}
	return changes
}

// expirePairs drops the pairs no longer observed and candidates past their retention, and
// returns those of them that had objects (caller holds mu).
func (e *Engine) expirePairs(now time.Time, pairKeys map[observation.PairKey]struct{}) []observation.PairKey {
	var deletes []observation.PairKey
	drop := func(k observation.PairKey) {
		e.summ.Forget(k)
		if p := e.pairs[k]; p != nil && !p.stable {
			e.countCandidate(k, -1)
		}
		delete(e.pairs, k)
		delete(pairKeys, k)
		if _, had := e.written[k]; had {
			e.forgetObject(k)
			deletes = append(deletes, k)
		}
	}
	keepSilent := func(k observation.PairKey) bool {
		ob := e.observers[k.SourceUID]
		_, hasObject := e.written[k]
		return hasObject && ob != nil && ob.silent
	}
	for _, k := range e.summ.ExpireIdle(now, e.cfg.TargetTTL, keepSilent) {
		drop(k)
	}
	for k, w := range e.written {
		if _, ok := e.pairs[k]; !ok && now.Sub(w.At) > e.cfg.TargetTTL && !keepSilent(k) {
			drop(k) // an object found in the API that nobody observes any more
		}
	}
	for k, p := range e.pairs {
		v, _, ok := e.summ.Verdict(k)
		if !ok || keepSilent(k) {
			continue
		}
		failing := v == observation.VerdictUnreachable
		switch {
		case p.stable && now.Sub(p.lastStable) > e.cfg.TargetTTL && !failing:
			p.stable = false // no longer a stable peer: kept only while failing
			e.countCandidate(k, +1)
			if now.Sub(p.lastFailure) > e.cfg.FailingPairRetention {
				drop(k)
			}
		case !p.stable && !failing && now.Sub(p.lastFailure) > e.cfg.FailingPairRetention:
			drop(k)
		case !p.stable && e.observerDistrusted(k.SourceUID):
			// A rotating pair of an observer whose node lost the pod network: its
			// failures are the observer's, not the path's. Not followed, and no object
			// unless it already had one (then it reads ObserverUnhealthy).
			if _, had := e.written[k]; !had {
				drop(k)
			}
		}
	}
	return deletes
}

// duePairs returns, ordered by key, the pairs of pairKeys and the objects not written for
// hb, with what the plan stage needs to decide their writes (caller holds mu).
func (e *Engine) duePairs(now time.Time, pairKeys map[observation.PairKey]struct{}, hb time.Duration) []PairState {
	keys := make([]observation.PairKey, 0, len(pairKeys))
	for k := range pairKeys {
		keys = append(keys, k)
	}
	for k, w := range e.written {
		if _, ok := pairKeys[k]; !ok && now.Sub(w.At) >= hb {
			keys = append(keys, k)
		}
	}
	clear(e.dirty)
	e.fullPass = false
	slices.SortFunc(keys, func(a, b observation.PairKey) int {
		switch {
		case a.Less(b):
			return -1
		case b.Less(a):
			return 1
		}
		return 0
	})
	var out []PairState
	for _, k := range keys {
		if k.SourceUID == "" || k.SourceNamespace == "" || (e.cfg.Namespace != "" && k.SourceNamespace != e.cfg.Namespace) {
			continue
		}
		p := e.pairs[k]
		s, ok := e.summ.Summary(k)
		if p == nil || !ok {
			continue
		}
		_, hasObject := e.written[k]
		st := PairState{Key: k, Summary: s, Stable: p.stable, Seeded: p.seeded, HasObject: hasObject, Last: e.recordOf(k)}
		if ob := e.observers[k.SourceUID]; ob != nil && ob.silent {
			st.SilentObserver = k.SourceNamespace + "/" + k.SourcePod
		}
		if !p.seeded {
			if s.Verdict == observation.VerdictUnreachable && e.badNodes[s.ObservedFromNode] {
				st.BadObserverNode = s.ObservedFromNode
			}
			st.DegradedFamilies, st.DegradedSince = e.degradedFamilies(p, s.Verdict)
		}
		out = append(out, st)
	}
	return out
}

// recordOf is what was written for k (zero without an object; caller holds mu).
func (e *Engine) recordOf(k observation.PairKey) ObjectRecord {
	return ObjectRecord{Written: e.written[k], BadObserver: e.writtenBadObserver[k], Degraded: e.writtenDegraded[k], Silent: e.writtenSilent[k]}
}

// forgetObject forgets what was written for k (caller holds mu).
func (e *Engine) forgetObject(k observation.PairKey) {
	delete(e.written, k)
	delete(e.writtenBadObserver, k)
	delete(e.writtenDegraded, k)
	delete(e.writtenSilent, k)
}

// Record keeps what the plan stage decided to write for k. It reports false, keeping
// nothing, when the pair is gone since Judge (its object left the API meanwhile): then
// nothing is to be written.
func (e *Engine) Record(k observation.PairKey, r ObjectRecord) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.pairs[k]; !ok {
		return false
	}
	e.written[k] = r.Written
	e.writtenBadObserver[k] = r.BadObserver
	e.writtenDegraded[k] = r.Degraded
	e.writtenSilent[k] = r.Silent
	return true
}

// Events returns the verdict changes since the last call of the pairs that have objects:
// an outage detected, or ended.
func (e *Engine) Events() []observation.Transition {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []observation.Transition
	for _, t := range e.summ.Transitions() {
		_, ok := e.written[t.Key]
		if ok && t.Old != t.New && (t.New == observation.VerdictUnreachable || t.Old == observation.VerdictUnreachable) {
			out = append(out, t)
		}
	}
	return out
}

// RejudgeAll makes the next Judge look at every target and pair, as after Resume.
func (e *Engine) RejudgeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fullPass = true
}

// ObjectKeys returns the pairs that have objects, in no order.
func (e *Engine) ObjectKeys() []observation.PairKey {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Keys(e.written))
}

// Summaries returns the summary of every pair followed, ordered by key.
func (e *Engine) Summaries() []observation.Summary { return e.summ.Summaries() }

// degradedFamilies lists the address families of a Reachable pair that fail while another
// answers: the pair's own rounds in that family failed FailuresToUnreachable times in a row,
// or the target's observers judge that family of the target Unreachable (caller holds mu).
func (e *Engine) degradedFamilies(p *pairInfo, v observation.Verdict) (failing []string, since time.Time) {
	if v != observation.VerdictReachable {
		return nil, time.Time{}
	}
	answering := false
	for i, f := range p.families {
		if f.lastRound.IsZero() {
			continue
		}
		tk := p.target
		tk.Family = familyNames[i]
		t := e.targets[tk]
		if f.fails >= e.summ.Config().FailuresToUnreachable || (t != nil && t.verdict == observation.VerdictUnreachable && !f.lastOK) {
			failing = append(failing, familyNames[i])
			if since.IsZero() || f.failSince.Before(since) {
				since = f.failSince
			}
		} else if f.lastOK {
			answering = true
		}
	}
	if !answering {
		return nil, time.Time{}
	}
	return failing, since
}

// heartbeat stretches a configured heartbeat so the heartbeats of all objects and node
// conditions together use at most HeartbeatShare of the budget (caller holds mu).
func (e *Engine) heartbeat(configured time.Duration) time.Duration {
	return writequeue.HeartbeatInterval(configured, len(e.written)+len(e.nodes), e.cfg.WritesPerSecond, e.cfg.HeartbeatShare)
}

// Persisted is what the API holds for one object at the start of a leadership term.
type Persisted struct {
	Key     observation.PairKey
	Written observation.Written
	Source  observation.Source
	Target  observation.Target
	// Verdict is the pair's own verdict: Unreachable also when it was written as
	// Unknown / ObserverUnhealthy (then BadObserverNode names the observer's node).
	Verdict             observation.Verdict
	Since, LastObserved time.Time
	Outages             []observation.Outage
	BadObserverNode     string
	// DegradedFamilies as written ("ipv6", or "" when none).
	DegradedFamilies string
	// SilentObserver: the object was written as Unknown / ObserverSilent.
	SilentObserver bool
}

// Resume starts a leadership term from what the API already holds, level-triggered like a
// Kubernetes controller: every existing object joins the object set as written now (so an
// unchanged one is not rewritten and its heartbeat counts from the takeover), pairs this
// replica does not summarise yet start from the persisted verdict and outage history (so
// an ongoing outage keeps its start, and Events fire only for changes relative to it), and
// the observers the previous writer blamed stay distrusted until the node judgement has
// evidence about their nodes. Objects not observed again are deleted after TargetTTL.
func (e *Engine) Resume(objs []Persisted, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.termStart = now
	for _, o := range objs {
		k := o.Key
		if _, ok := e.written[k]; !ok {
			w := o.Written
			w.At = now
			e.written[k] = w
			e.writtenBadObserver[k] = o.BadObserverNode != ""
			e.writtenDegraded[k] = o.DegradedFamilies
			e.writtenSilent[k] = o.SilentObserver
		}
		// Every object's observer is known from the takeover on: if it does not report
		// within silentAfter, its objects read ObserverSilent (and stay until its pod is
		// deleted) instead of vanishing at TargetTTL as if nobody had looked.
		if _, ok := e.observers[k.SourceUID]; !ok && k.SourceUID != "" {
			ob := &observerState{namespace: k.SourceNamespace, name: k.SourcePod, node: o.Source.Node,
				lastSeen: o.LastObserved, lastArrival: now, silent: o.SilentObserver}
			src := o.Source
			src.Namespace, src.Name, src.UID = k.SourceNamespace, k.SourcePod, k.SourceUID
			if node, votes := e.voterOf(src); votes {
				ob.voter = voterKey(node, k.SourceUID)
			}
			e.observers[k.SourceUID] = ob
		}
		if o.BadObserverNode != "" {
			e.badNodes[o.BadObserverNode] = true
			e.seededBad[o.BadObserverNode] = true
		}
		if _, ok := e.pairs[k]; ok {
			// Summarised as a standby: the record stands where it agrees.
			e.summ.Adopt(k, o.Verdict, o.Since, o.Outages)
			continue
		}
		if o.Verdict == "" {
			continue
		}
		if !e.summ.Seed(k, o.Source, o.Target, o.Verdict, o.Since, o.LastObserved, now, o.Outages) {
			continue
		}
		// Kept as stable until TargetTTL passes without a stable observation; a failing
		// pair is followed like any failing pair.
		p := &pairInfo{stable: true, lastStable: now, seeded: true,
			target: TargetKey{Kind: k.TargetKind, Namespace: k.TargetNamespace, Name: k.TargetName, UID: k.TargetUID,
				Address: k.TargetAddress, Port: k.TargetPort, Endpoint: k.TargetEndpoint, Family: o.Target.Family()}}
		if o.Verdict == observation.VerdictUnreachable {
			p.lastFailure = o.LastObserved
		}
		e.pairs[k] = p
	}
	e.fullPass = true
}

// ObjectGone records that the object of k left the API: garbage-collected with its source
// pod, or deleted by someone. The pair is forgotten with it. Were it kept, the next
// Reconcile would re-create an object that the garbage collector deletes again (its owner
// is gone) until the observer reads silent; an observer that still reports and still
// probes the pair as stable brings it back with its next round.
func (e *Engine) ObjectGone(k observation.PairKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.written[k]; !ok {
		return
	}
	e.forgetObject(k)
	e.summ.Forget(k)
	if p := e.pairs[k]; p != nil && !p.stable {
		e.countCandidate(k, -1)
	}
	delete(e.pairs, k)
	delete(e.dirty, k)
}

// EndTerm forgets what was written: a future leadership term starts from the API's state.
func (e *Engine) EndTerm() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.written)
	clear(e.writtenBadObserver)
	clear(e.writtenDegraded)
	clear(e.writtenSilent)
	clear(e.seededBad)
	e.nodes = nodeStates{}
}

// Objects returns the number of objects in the object set.
func (e *Engine) Objects() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.written)
}

// Targets returns the per-target judgement of every target, ordered by key.
func (e *Engine) Targets() []TargetStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]TargetStatus, 0, len(e.targets))
	for _, t := range e.targets {
		out = append(out, t.status())
	}
	slices.SortFunc(out, func(a, b TargetStatus) int { return compareTargetKeys(a.Key, b.Key) })
	return out
}

// Target returns the per-target judgement of one target and family.
func (e *Engine) Target(k TargetKey) (TargetStatus, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.targets[k]
	if t == nil {
		return TargetStatus{}, false
	}
	return t.status(), true
}

func compareTargetKeys(a, b TargetKey) int {
	for _, c := range [][2]string{
		{string(a.Kind), string(b.Kind)}, {a.Namespace, b.Namespace}, {a.Name, b.Name}, {a.UID, b.UID},
		{a.Address, b.Address}, {a.Family, b.Family},
	} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Summary returns a pair's summary.
func (e *Engine) Summary(k observation.PairKey) (observation.Summary, bool) { return e.summ.Summary(k) }

// Stats returns gauges of the engine's state.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Stats{Targets: len(e.targets), Pairs: len(e.pairs), Objects: len(e.written), Observers: len(e.observers),
		Summarizer: e.summ.Stats()}
	for _, ob := range e.observers {
		if ob.silent {
			st.SilentObservers++
		}
	}
	for _, p := range e.pairs {
		if p.stable {
			st.StablePairs++
		} else {
			st.CandidatePairs++
		}
	}
	return st
}

// BadNodes returns the nodes whose observers are distrusted, sorted.
func (e *Engine) BadNodes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(maps.Keys(e.badNodes))
}
