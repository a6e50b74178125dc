// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// Judge: the per-target verdicts, pair escalation, expiry, and the pairs due a write
// (whose write decisions are plan.PairObjects').

// ObjectRecord is what was last written for a pair that has an object.
type ObjectRecord struct {
	Written observation.Written
	// BadObserver: written as Unknown / ObserverUnhealthy.
	BadObserver bool
	// Degraded: the DegradedFamilies written, comma-separated.
	Degraded string
	// Silent: written as Unknown / ObserverSilent.
	Silent bool
	// Disruption: written as Unknown with this disruption as the reason.
	Disruption string
	// GrayEnded: when a write ended the object's last gray verdict, kept while a new one
	// would still be the same episode (plan.Policy.FlapWindow); zero otherwise.
	GrayEnded time.Time
}

// PairState is the judgement of one pair that may need a write: it changed, or its object
// is a heartbeat old.
type PairState struct {
	Key     observation.PairKey
	Summary observation.Summary
	// Stable: observed as a stable pair (otherwise a rotating pair followed while failing).
	Stable bool
	// ProblemsOnly: a stable pair that gets an object only for a problem (Config.ProblemsOnly).
	ProblemsOnly bool
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
	// Disruption: the pair is Unreachable towards a target the cluster reported going away
	// or down before it failed (TargetStatus.Disruption); the object says Unknown with it
	// as the reason, and no Event is emitted.
	Disruption string
	// Gray: the pair's gray verdict (packet loss or high latency) and where it is blamed
	// (unset for seeded pairs and pairs that are not Reachable).
	Gray PairGray
	// ZoneCut: the pair crosses a zone pair judged cut within ZoneCutExplains, so its
	// ZoneNetworkHealth carries the outage (unset for seeded pairs).
	ZoneCut bool
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
	// GrayChanges: targets whose gray verdict (loss, latency) changed, for logs.
	GrayChanges []GrayTarget
	// Heartbeat is the heartbeat interval in force.
	Heartbeat time.Duration
}

// Judge judges the targets observed since the last call, escalates, expires and drops
// pairs, and returns the pairs that may need a write at now (changed, or with an object a
// heartbeat old). The write decisions are the plan stage's (plan.PairObjects); what it
// writes comes back through Record, and Events after that.
func (e *Engine) Judge(now time.Time) Judgement {
	e.mu.Lock()
	defer e.mu.Unlock()
	var j Judgement
	e.judgeGrayObservers(now)
	j.TargetChanges, j.GrayChanges = e.judgeTargets(now)
	e.judgeGrayPooled(now)
	pairKeys := e.pairKeys()
	e.addPairsOfNewlyUnreachable(pairKeys, j.TargetChanges)
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
func (e *Engine) judgeTargets(now time.Time) ([]TargetStatus, []GrayTarget) {
	var changes []TargetStatus
	var grayChanges []GrayTarget
	judgeKeys := e.dirtyTargets
	if e.fullPass {
		judgeKeys = map[TargetKey]struct{}{}
		for k := range e.targets {
			judgeKeys[k] = struct{}{}
		}
	}
	judge := e.judge
	judge.voters = e.voterNodes()
	e.refreshPeerBaselines(now)
	for k := range judgeKeys {
		t := e.targets[k]
		if t == nil {
			continue
		}
		jc := judge
		jc.sibling = e.siblingFamily(k)
		if t.judge(jc, e.acrossCut(t.target.Zone)) {
			changes = append(changes, t.status())
		}
		if e.judgeGray(t, now) {
			grayChanges = append(grayChanges, GrayTarget{Key: t.key, Node: t.target.Node, Status: e.targetGrayStatus(t)})
		}
	}
	clear(e.dirtyTargets)
	slices.SortFunc(changes, func(a, b TargetStatus) int { return a.Since.Compare(b.Since) })
	slices.SortFunc(grayChanges, func(a, b GrayTarget) int { return compareTargetKeys(a.Key, b.Key) })
	return changes, grayChanges
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

// addPairsOfNewlyUnreachable adds to pairKeys the pairs towards each target that turned
// Unreachable in this judgement (in either address family: unreachableFor), observed since
// the last call or not: a stable pair whose failed round came in before the target's
// quorum did is escalated now, not at its next round (at 65,000 nodes the rotating
// observers' votes came first and the stable pair's status reached the API 2 intervals
// after the verdict). O(pairs) per judgement with such a change (caller holds mu).
func (e *Engine) addPairsOfNewlyUnreachable(pairKeys map[observation.PairKey]struct{}, changes []TargetStatus) {
	var dead map[TargetKey]bool
	for _, c := range changes {
		if c.Verdict == observation.VerdictUnreachable {
			if dead == nil {
				dead = map[TargetKey]bool{}
			}
			dead[c.Key] = true
		}
	}
	if dead == nil {
		return
	}
	for k, p := range e.pairs {
		if dead[p.target] || dead[siblingKey(p.target)] {
			pairKeys[k] = struct{}{}
		}
	}
}

// siblingKey is k in the other address family (k itself for a key without one).
func siblingKey(k TargetKey) TargetKey {
	switch k.Family {
	case observation.FamilyIPv4:
		k.Family = observation.FamilyIPv6
	case observation.FamilyIPv6:
		k.Family = observation.FamilyIPv4
	}
	return k
}

// unreachableFor is the target that makes pair p's failed round an outage of its pod: its
// target, or the same pod in the other address family, judged Unreachable by its observers
// (nil when neither is). A dual-stack pod's stable pair probes one family while the
// rotating observers' quorum may come in the other first: at 65,000 nodes a dead pod's
// IPv4 target was Unreachable 9 s after the fault and its stable pair, probing IPv6, waited
// for its own 3 failed rounds (31 s) before its status said so (caller holds mu).
//
// Not when the pair's own family answered an observer since the other's outage began: then
// the other family fails alone (AddressFamilyUnreachable), and this pair's failed round is
// its own, judged by its own rounds.
func (e *Engine) unreachableFor(p *pairInfo) *targetState {
	own := e.targets[p.target]
	if own != nil && own.verdict == observation.VerdictUnreachable {
		return own
	}
	if t := e.siblingFamily(p.target); t != nil && t.verdict == observation.VerdictUnreachable &&
		(own == nil || !own.answeredSince(t.outageStart)) {
		return t
	}
	return nil
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
		if t := e.unreachableFor(p); t != nil {
			if _, hasObject := e.written[k]; !p.stable && !hasObject {
				// The target's own outage explains this rotating pair's failure: it is
				// not path-specific after all, and the stable pairs show the outage.
				e.summ.Forget(k)
				delete(e.pairs, k)
				delete(pairKeys, k)
				e.countCandidate(k, -1)
				continue
			}
			e.summ.Escalate(k, fmt.Sprintf("%s is unreachable from %d observer nodes", t.key.Family, t.failing))
			continue
		}
		if !p.stable {
			// Two failed visits, or more when the target loses part of its echoes to
			// every observer: such failures are its loss, not this path's.
			if v, fails, ok := e.summ.Verdict(k); ok && fails >= 2 && v != observation.VerdictUnreachable && fails >= e.pairRunFloor(k) {
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
	e.workingElsewhere(now, 0) // forgets what is past TargetTTL
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
		// Failures that began once the target pod was leaving are its deletion's, not the
		// path's: they neither keep the pair followed nor hold its object for the failing
		// pairs' retention (a roll's pairs towards replaced pods held 2·N objects for it).
		leavingOnly := e.failedOnlyLeaving(p)
		failing := v == observation.VerdictUnreachable && !leavingOnly
		retained := !leavingOnly && now.Sub(p.lastFailure) <= e.cfg.FailingPairRetention
		switch {
		case p.stable && !failing && (now.Sub(p.lastStable) > e.cfg.TargetTTL || e.ringMovedOff(k, p)):
			p.stable = false // no longer a stable peer: kept only while failing
			e.countCandidate(k, +1)
			if !retained {
				drop(k)
			}
		case !p.stable && !failing && !retained:
			drop(k)
		case p.stable && e.cfg.ProblemsOnly && !failing && !retained && e.problemObjectSpent(k, now):
			// Reachable and clean for the retention: the object goes, the pair stays.
			e.forgetObject(k)
			deletes = append(deletes, k)
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

// problemObjectSpent reports whether k has an object that records no problem and whose
// last problem was written FailingPairRetention ago or more (caller holds mu).
func (e *Engine) problemObjectSpent(k observation.PairKey, now time.Time) bool {
	_, had := e.written[k]
	return had && !e.recordOf(k).problem() && now.Sub(e.problemAt[k]) >= e.cfg.FailingPairRetention
}

// problem reports whether an object record says something is wrong: not Reachable,
// Degraded, its observer silent or blamed, or an expected disruption.
func (r ObjectRecord) problem() bool {
	return r.Written.Verdict != observation.VerdictReachable || r.Degraded != "" || r.Silent || r.BadObserver || r.Disruption != ""
}

// failedOnlyLeaving reports whether p's failing rounds all began after its target pod was
// found leaving (terminating or deleted, as the gateway's own index says: a sender cannot
// set it), in every address family that fails (caller holds mu). A failure that began
// before, an outage the pod then left, is the path's and keeps its retention.
func (e *Engine) failedOnlyLeaving(p *pairInfo) bool {
	ts := e.targets[p.target]
	if ts == nil || !ts.leaving || ts.leavingSince.IsZero() {
		return false
	}
	failed := false
	for _, f := range p.families {
		if f.fails == 0 {
			continue
		}
		if f.failSince.Before(ts.leavingSince) {
			return false
		}
		failed = true
	}
	return failed
}

// RingMovedRounds: a stable pair its observer has not observed for this many of its rounds,
// while it observed other stable pairs, is no longer its stable peer. Its ring moved: the
// peer's pod was replaced (a DaemonSet roll) or deleted, or a node joined. Without this the
// pair's object stayed TargetTTL, and through a roll the objects exceeded (M+1)·N (2.8·N
// at N = 5,000 in the scale simulation). Three rounds, not one, so that a round's points
// split over requests or one lost request do not drop an object only to re-create it.
const RingMovedRounds = 3

// ringMovedOff reports whether k's observer has gone on observing stable pairs for
// RingMovedRounds of its rounds without k (caller holds mu). A silent observer, or one
// whose round length is not known yet, moves nothing; nor does a pair resumed from the API
// and not observed since (its lastStable is this replica's clock, not the observer's).
func (e *Engine) ringMovedOff(k observation.PairKey, p *pairInfo) bool {
	ob := e.observers[k.SourceUID]
	if p.seeded || ob == nil || ob.silent || ob.interval <= 0 {
		return false
	}
	return ob.lastStable.Sub(p.lastStable) > RingMovedRounds*ob.interval
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
		st := PairState{Key: k, Summary: s, Stable: p.stable, ProblemsOnly: p.stable && e.cfg.ProblemsOnly, Seeded: p.seeded, HasObject: hasObject, Last: e.recordOf(k)}
		if ob := e.observers[k.SourceUID]; ob != nil && ob.silent {
			st.SilentObserver = k.SourceNamespace + "/" + k.SourcePod
		}
		if !p.seeded {
			if s.Verdict == observation.VerdictUnreachable && e.badNodes[s.ObservedFromNode] {
				st.BadObserverNode = s.ObservedFromNode
			}
			st.DegradedFamilies, st.DegradedSince = e.degradedFamilies(k, p, s.Verdict)
			if s.Verdict == observation.VerdictUnreachable {
				st.Disruption = e.pairDisruption(k)
			}
			st.ZoneCut = e.acrossZoneCut(s.ObservedFromNode, s.Target.Zone)
			if s.Verdict == observation.VerdictReachable && st.BadObserverNode == "" && st.SilentObserver == "" {
				st.Gray = e.pairGray(k, p, s)
			}
		}
		out = append(out, st)
	}
	return out
}

// pairDisruption is the disruption that excuses the failures of k's target in any address
// family ("" when none; caller holds mu).
func (e *Engine) pairDisruption(k observation.PairKey) string {
	for _, f := range [...]string{observation.FamilyIPv4, observation.FamilyIPv6} {
		tk := TargetKey{Kind: k.TargetKind, Namespace: k.TargetNamespace, Name: k.TargetName, UID: k.TargetUID,
			Address: k.TargetAddress, Port: k.TargetPort, Endpoint: k.TargetEndpoint, Family: f}
		if t := e.targets[tk]; t != nil && t.excuse != "" {
			return t.excuse
		}
	}
	return ""
}

// recordOf is what was written for k (zero without an object; caller holds mu).
func (e *Engine) recordOf(k observation.PairKey) ObjectRecord {
	return ObjectRecord{Written: e.written[k], BadObserver: e.writtenBadObserver[k], Degraded: e.writtenDegraded[k], Silent: e.writtenSilent[k],
		Disruption: e.writtenDisruption[k], GrayEnded: e.writtenGrayEnded[k]}
}

// forgetObject forgets what was written for k (caller holds mu).
func (e *Engine) forgetObject(k observation.PairKey) {
	delete(e.written, k)
	delete(e.writtenBadObserver, k)
	delete(e.writtenDegraded, k)
	delete(e.writtenSilent, k)
	delete(e.writtenDisruption, k)
	delete(e.writtenGrayEnded, k)
	delete(e.problemAt, k)
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
	if r.Disruption != "" {
		e.writtenDisruption[k] = r.Disruption
	} else {
		delete(e.writtenDisruption, k)
	}
	if !r.GrayEnded.IsZero() {
		e.writtenGrayEnded[k] = r.GrayEnded
	} else {
		delete(e.writtenGrayEnded, k)
	}
	if e.cfg.ProblemsOnly && r.problem() {
		e.problemAt[k] = r.Written.At
	}
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
		if ok && t.New == observation.VerdictUnreachable && e.pairDisruption(t.Key) != "" {
			continue // an expected failure (a drain, a pod going away): no outage Event
		}
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
// answers: the pair's own rounds in that family failed in a row as often as
// FamilyRunNeeded asks (FailuresToUnreachable on a clean path, more on a lossy one), or the
// target's observers judge that family of the target Unreachable (caller holds mu).
func (e *Engine) degradedFamilies(k observation.PairKey, p *pairInfo, v observation.Verdict) (failing []string, since time.Time) {
	if v != observation.VerdictReachable {
		return nil, time.Time{}
	}
	answering := false
	need := 0 // the run a family's failure needs on this path (FamilyRunNeeded), when asked
	for i, f := range p.families {
		if f.lastRound.IsZero() {
			continue
		}
		tk := p.target
		tk.Family = familyNames[i]
		t := e.targets[tk]
		other := &p.families[1-i]
		if f.fails >= e.summ.Config().FailuresToUnreachable && need == 0 {
			need = e.summ.FamilyRunNeeded(k)
		}
		if (f.fails >= e.summ.Config().FailuresToUnreachable && f.fails >= need && !other.explains(f.fails)) || (t != nil && t.verdict == observation.VerdictUnreachable && !f.lastOK) {
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

// heartbeat stretches a configured heartbeat by Config.HeartbeatInterval over all objects
// and node conditions (caller holds mu).
func (e *Engine) heartbeat(configured time.Duration) time.Duration {
	if e.cfg.HeartbeatInterval == nil {
		return configured
	}
	return e.cfg.HeartbeatInterval(configured, len(e.written)+len(e.nodes))
}
