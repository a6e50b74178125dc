// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// Leadership terms: resuming from what the API holds, objects that leave it, and the end
// of a term.

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
	// MTUPasses: the object was written Degraded / MTUBlackHole with this size passing.
	MTUPasses int
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
	e.standby = standbyState{} // the leader's Judge expires from now on
	for _, o := range objs {
		k := o.Key
		if _, ok := e.written[k]; !ok {
			w := o.Written
			w.At = now
			e.written[k] = w
			e.writtenBadObserver[k] = o.BadObserverNode != ""
			e.writtenDegraded[k] = o.DegradedFamilies
			e.writtenSilent[k] = o.SilentObserver
			if e.cfg.ProblemsOnly {
				e.problemAt[k] = now // the retention counts from the takeover
			}
		}
		// Every object's observer is known from the takeover on: if it does not report
		// within silentAfter, its objects read ObserverSilent (and stay until its pod is
		// deleted) instead of vanishing at TargetTTL as if nobody had looked.
		if _, ok := e.observers[k.SourceUID]; !ok && k.SourceUID != "" {
			ob := &observerState{uid: k.SourceUID, namespace: k.SourceNamespace, name: k.SourcePod, node: o.Source.Node,
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
		if o.MTUPasses > 0 {
			e.summ.SeedMTU(k, o.MTUPasses, o.Since)
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
	clear(e.writtenDisruption)
	clear(e.writtenGrayEnded)
	clear(e.problemAt)
	clear(e.seededBad)
	e.nodes = nodeStates{}
	e.grayNodes = nodeStates{}
	e.standbyLocked()
}
