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
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// Config configures an Engine. Zero fields take the defaults.
type Config struct {
	// Summary configures the pair summaries (window, hysteresis, outages).
	Summary SummaryConfig
	// Heartbeat is the configured heartbeat of objects (plan.Policy.HeartbeatInterval,
	// default 10m), stretched to fit the budget (HeartbeatInterval): an object not written
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
	// ProblemsOnly: stable pairs get objects only as rotating ones do, for a problem: when
	// Unreachable, or Degraded (a family failing, an MTU black hole, a gray verdict); the
	// object is deleted once it has read Reachable and clean for FailingPairRetention
	// since its last problem was written (or since a takeover). The writer's
	// NetworkHealthSummary stands for the healthy pairs (pair_objects: problems).
	ProblemsOnly bool
	// FailingPairsPerSource bounds the rotating pairs of one source tracked because they
	// failed while others reached their target (default 1), so that objects stay
	// <= (M+1)·N plus declared pairs under any fault. The bound is per source, not shared:
	// what one source reports never takes another's place.
	FailingPairsPerSource int
	// Namespace: when set, only sources in it are written (all-in-one mode).
	Namespace string
	// WritesPerSecond is the API write budget (default 5); HeartbeatShare of it (default
	// 0.5) is what heartbeats of all objects may use. The verdict stage does not apply
	// them: the plan stage turns them into HeartbeatInterval (plan.New).
	WritesPerSecond float64
	HeartbeatShare  float64
	// HeartbeatInterval stretches a configured heartbeat (of objects, of node conditions)
	// for this many objects and node conditions so their heartbeats fit the write budget.
	// How writes share the budget is the plan stage's rule, so plan.New sets it; nil
	// leaves heartbeats as configured.
	HeartbeatInterval func(configured time.Duration, objects int) time.Duration
	// MaxProbeInterval caps the round length an observer is believed to have (default 1m):
	// an observer is silent after three of its rounds without a report.
	MaxProbeInterval time.Duration
	// MaxFutureSkew: observations dated more than this after their arrival are refused
	// (default DefaultMaxFutureSkew; the decoder refuses them first, counted as
	// future_timestamp).
	MaxFutureSkew time.Duration
	// MinRoundSpacing: a pair's round dated less than this after its previous counted
	// round does not count (pace.go; default DefaultMinRoundSpacing).
	MinRoundSpacing time.Duration
	// Voter says which observer node an observation's source votes for in the per-target
	// judgement (and so in the node quorum built on its evidence), and whether it votes at
	// all. nil: every source votes for its own node (Source.Node, else its pod).
	//
	// Hook for roles (#28 item 3): only agents' nodes count toward a quorum; the identity
	// package decides who is an agent. A source that does not vote still has its own
	// pairs summarised.
	Voter func(src observation.Source) (node string, votes bool)
	// Gray configures the gray judgement (loss and latency; gray.go).
	Gray GrayConfig
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
	if c.MinRoundSpacing <= 0 {
		c.MinRoundSpacing = DefaultMinRoundSpacing
	}
	if c.FailingPairsPerSource <= 0 {
		c.FailingPairsPerSource = DefaultFailingPairsPerSource
	}
	c.Gray = c.Gray.withDefaults()
	return c
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
	// RoundsTooSoon: observations of a pair's round dated within its minimum spacing of
	// the previous counted round (pace.go), not counted.
	RoundsTooSoon uint64
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
	// writtenDisruption: the disruption an object was written with ("" none).
	writtenDisruption map[observation.PairKey]string
	// writtenGrayEnded: when an object's gray verdict was last written cleared, for the
	// objects whose next one would still be the same episode (sparse: ObjectRecord.GrayEnded).
	writtenGrayEnded map[observation.PairKey]time.Time
	// problemAt: the newest write of a pair's object that recorded a problem (or the
	// takeover, for an object resumed from the API); Config.ProblemsOnly deletes a clean
	// object FailingPairRetention after it. Kept only with ProblemsOnly.
	problemAt map[observation.PairKey]time.Time
	fullPass  bool
	// badNodes are the nodes the node judgement found unable to reach the pod network:
	// their observers' failures are not evidence against targets.
	badNodes map[string]bool
	// cutZones: the zone pairs the newest node judgement found cut, and cutZoneOf the
	// zones of the nodes it knew (both nil without a cut): a vote across a cut pair is no
	// evidence against its target (its observer's zone cannot reach the target's), as it is
	// none against the target's node in the node quorum.
	cutZones  map[zonePairKey]bool
	cutZoneOf map[string]string
	// zoneCutSeen: when each zone pair was last judged cut, kept ZoneCutExplains, and
	// zoneOfSeen the zones of the nodes then: a pair across such a zone pair is an outage
	// its ZoneNetworkHealth carries (PairState.ZoneCut). O(Z²) and O(N) while a cut is
	// recent; nil otherwise.
	zoneCutSeen map[zonePairKey]time.Time
	zoneOfSeen  map[string]string
	// seededBad: observers' nodes the previous writer blamed; they stay distrusted until
	// the node judgement has evidence about them.
	seededBad map[string]bool
	// termStart: when this leadership term resumed (Resume).
	termStart time.Time
	nodes     nodeStates
	// grayNodes: the gray node condition's state, of the nodes blamed or carrying it.
	grayNodes nodeStates
	// gray: the effective gray configuration; grayObservers the observer nodes' gray
	// state, by voter key (O(N), forgotten TargetTTL after their last report).
	gray          GrayConfig
	grayObservers map[string]*observerGray
	// baselines: the learnt RTT per target node and family (O(N)).
	baselines map[string]*nodeBaseline
	// peerBaselinesAt: when the baselines' peer references were last refreshed.
	peerBaselinesAt time.Time
	// lossyTargets (by target node key) and lossyObservers (by voter key): when each was
	// last judged lossy, kept for the gray window (O(N)): the other side leaves their
	// losses out.
	lossyTargets, lossyObservers map[string]time.Time
	// grayPooled: the nodes' pooled loss verdicts (graypooled.go; O(N)), by node name;
	// pooledScratch the window they are summed in.
	grayPooled    map[string]*pooledGray
	pooledScratch *gray.Window
	// grayZones: the zone pairs' loss judgement (grayzones.go; O(zones²)).
	grayZones grayZoneState
	// standby: what a replica that does not lead bounds and expires itself (standby.go).
	standby standbyState
	// reachedElsewhere: per voter node, its newest success towards a node this engine
	// does not judge (ReachedElsewhere; O(N), forgotten TargetTTL after it).
	reachedElsewhere map[string]time.Time

	// roundsTooSoon counts the observations pace.go did not count.
	roundsTooSoon uint64
}

// New returns an Engine.
func New(cfg Config) *Engine {
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg:                cfg,
		judge:              judgeConfig{quorum: cfg.TargetQuorum, recovery: cfg.TargetRecovery, graySlot: cfg.Gray.SlotWidth},
		gray:               cfg.Gray,
		grayObservers:      map[string]*observerGray{},
		grayPooled:         map[string]*pooledGray{},
		baselines:          map[string]*nodeBaseline{},
		lossyTargets:       map[string]time.Time{},
		lossyObservers:     map[string]time.Time{},
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
		writtenDisruption:  map[observation.PairKey]string{},
		writtenGrayEnded:   map[observation.PairKey]time.Time{},
		problemAt:          map[observation.PairKey]time.Time{},
		badNodes:           map[string]bool{},
		seededBad:          map[string]bool{},
		nodes:              nodeStates{},
		grayNodes:          nodeStates{},
		reachedElsewhere:   map[string]time.Time{},
	}
	// Summarizer.Add runs under e.mu (Observe), so the floor reads the targets directly.
	e.summ.runFloor = e.pairRunFloor
	return e
}

// Config returns the effective configuration.
func (e *Engine) Config() Config { return e.cfg }

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
		Summarizer: e.summ.Stats(), RoundsTooSoon: e.roundsTooSoon}
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
