// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"math"
	"math/bits"
	"time"

	"github.com/netpulse/netpulse/internal/contract"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// Observe: what every observation does to the targets' votes, the observers and the
// pairs followed.

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
	// path: the pair's own answered echoes (gray.go, pairGray's path side), nil until its
	// first one after the transients.
	path    *pathGray
	counted time.Time // newest round counted (pace.go)
}

// familyRounds is a pair's run of rounds in one address family.
type familyRounds struct {
	lastRound time.Time
	lastOK    bool
	fails     int       // consecutive failed rounds
	failSince time.Time // the first of them
	// recent: the outcomes of the newest 16 rounds (bit set: failed), recentN of them.
	recent  uint16
	recentN uint8
	// failAt: the newest two failed rounds (Unix nanoseconds, 0 none; 16 bytes rather than
	// 48 per family: ~8 MB at a 65,000-node shard's 250 k pairs). A round the gray
	// judgement holds is an outage's boundary when one of them is next to it (gray.go).
	failAt [2]int64
}

// failedNear reports whether one of the newest two failed rounds lies within d of at.
func (f *familyRounds) failedNear(at time.Time, d time.Duration) bool {
	t := at.UnixNano()
	for _, x := range f.failAt {
		if x != 0 && max(x-t, t-x) <= int64(d) {
			return true
		}
	}
	return false
}

// explains reports whether this family's own recent failure rate makes a run of fails
// failed rounds in the other family likely by chance (above 1e-4): random loss, which hits
// both families alike, and not one family failing. A family that answers every round
// explains nothing.
func (f *familyRounds) explains(fails int) bool {
	if f.recentN == 0 {
		return false
	}
	failed := bits.OnesCount16(f.recent)
	if failed == 0 {
		return false
	}
	rate := (float64(failed) + 1) / (float64(f.recentN) + 2) // Laplace: never 0 or 1
	return math.Pow(rate, float64(fails)) > 1e-4
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
		f.recent <<= 1
		if !ok {
			f.recent |= 1
		}
		f.recentN = min(f.recentN+1, 16)
		if ok {
			f.fails = 0
		} else {
			if f.fails == 0 {
				f.failSince = at
			}
			f.fails++
			f.failAt[1], f.failAt[0] = f.failAt[0], at.UnixNano()
		}
	case at.Equal(f.lastRound) && ok && !f.lastOK:
		f.lastOK, f.fails = true, 0 // another probe of the round succeeded
		f.recent &^= 1
		if f.failAt[0] == at.UnixNano() {
			f.failAt[0], f.failAt[1] = f.failAt[1], 0
		}
	}
}

// observerState is what is known of a source.
type observerState struct {
	// uid, namespace, name, node: its identity, the strings every state of the engine
	// keeps of it (canonical).
	uid, namespace, name, node string
	// zone: its node's zone (Source.Zone): the zone judgement's zone of an observer node
	// that no target of this engine is on (a sharded gateway's other shards' nodes).
	zone        string
	lastSeen    time.Time // newest round
	firstSeen   time.Time // oldest round (the gray warm-up)
	lastArrival time.Time // when its newest observation arrived
	// lastStable: its newest stable observation of any pair. A stable pair it has not
	// observed for RingMovedRounds of its rounds before that is no longer its stable peer.
	lastStable time.Time
	interval   time.Duration
	silent     bool
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
// On real nodes (testbed/e2ereal) the agents reached a new leader up to ~20 s after the
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

// countCandidate adds d to the candidates of the source of k (caller holds mu).
func (e *Engine) countCandidate(k observation.PairKey, d int) {
	n := e.candidates[k.SourceUID] + d
	if n <= 0 {
		delete(e.candidates, k.SourceUID)
		return
	}
	e.candidates[k.SourceUID] = n
}

// observerOf returns src's state, created when new, with its identity refreshed (caller
// holds mu).
func (e *Engine) observerOf(src observation.Source) *observerState {
	ob := e.observers[src.UID]
	if ob == nil {
		ob = &observerState{uid: src.UID}
		e.observers[src.UID] = ob
	}
	// Assigned only when changed: the strings kept stay the first ones (canonical).
	if ob.namespace != src.Namespace {
		ob.namespace = src.Namespace
	}
	if ob.name != src.Name {
		ob.name = src.Name
	}
	if src.Node != "" && ob.node != src.Node {
		ob.node = src.Node
	}
	if src.Zone != "" && ob.zone != src.Zone {
		ob.zone = src.Zone
	}
	return ob
}

// canonical makes src's strings the known observer's where they are equal (caller holds
// mu). Each request decodes new copies of them, and the window slots, the votes and the
// pair state of one observer would otherwise each keep another request's copies: a few
// KB per agent.
func (e *Engine) canonical(src *observation.Source) {
	ob := e.observers[src.UID]
	if ob == nil {
		return
	}
	src.UID = ob.uid
	if src.Namespace == ob.namespace {
		src.Namespace = ob.namespace
	}
	if src.Name == ob.name {
		src.Name = ob.name
	}
	if src.Node == ob.node {
		src.Node = ob.node
	}
	if src.Zone == ob.zone {
		src.Zone = ob.zone
	}
}

// seen notes a round of the observer dated at that arrived now.
func (ob *observerState) seen(at, now time.Time) {
	if at.After(ob.lastSeen) {
		// Its round length, as it reports: a longer gap is taken at once, a shorter one
		// slowly, so one late round or points of one round a few ms apart do not make
		// a slow observer read as silent.
		if gap := at.Sub(ob.lastSeen); !ob.lastSeen.IsZero() && gap >= time.Second {
			if gap > ob.interval {
				ob.interval = gap
			} else {
				ob.interval = (3*ob.interval + gap) / 4
			}
		}
		ob.lastSeen = at
	}
	ob.lastArrival = now
}

// Heard feeds the agents' heartbeats (arrival time now): each keeps its observer reporting
// on a sharded gateway that received none of its observations in that round. A heartbeat
// judges nothing and votes for nothing. It returns how many were unusable (no source UID,
// or dated more than MaxFutureSkew after now).
func (e *Engine) Heard(hbs []observation.Heartbeat, now time.Time) (ignored int) {
	if len(hbs) == 0 {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	future := now.Add(e.cfg.MaxFutureSkew)
	for _, hb := range hbs {
		if hb.Source.UID == "" || hb.At.IsZero() || hb.At.After(future) {
			ignored++
			continue
		}
		e.observerOf(hb.Source).seen(hb.At, now)
	}
	return ignored
}

// Observe feeds observations (arrival time now). Every observation feeds the per-target
// judgement as its observer node's vote; only stable pairs, and rotating pairs that failed
// while their target is otherwise reachable (up to FailingPairsPerSource per source), are
// summarised per pair. It returns how many observations were unusable: invalid, or dated
// more than MaxFutureSkew after now. It may replace strings of obs' sources by equal ones
// (canonical).
func (e *Engine) Observe(obs []observation.Observation, now time.Time) (ignored int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var tracked []observation.Observation
	future := now.Add(e.cfg.MaxFutureSkew)
	for i := range obs {
		o := &obs[i]
		e.canonical(&o.Source)
		key := observation.KeyOf(o)
		if !usable(o, future) {
			ignored++
			continue
		}
		tk := TargetKeyOf(o)
		ts := e.targets[tk]
		node, votes := e.voterOf(o.Source)
		if votes && (ts != nil || e.standbyAdmits(tk)) {
			if ts == nil {
				ts = &targetState{key: tk, verdict: observation.VerdictUnknown, target: o.Target}
				e.targets[tk] = ts
			}
			if !o.Timestamp.Before(ts.lastSeen) {
				mergeTarget(&ts.target, &o.Target)
				if o.TargetLeaving && !ts.leaving {
					ts.leavingSince = o.Timestamp
				}
				ts.leaving = o.TargetLeaving
				ts.disrupted(o.TargetDisruption, o.Timestamp)
			}
			rtt, sent, lost := roundRTT(o), uint64(0), uint64(0)
			if o.ProbeType == contract.ProbeTypeICMP {
				sent, lost = o.Sent, o.Lost
			}
			ts.add(tobs{at: o.Timestamp, observer: o.Source.UID, node: node, ok: o.Success, rtt: rtt, sent: sent, lost: lost})
			if ts.firstSeen.IsZero() || o.Timestamp.Before(ts.firstSeen) {
				ts.firstSeen = o.Timestamp
			}
		}

		ob := e.observerOf(o.Source)
		if ob.firstSeen.IsZero() || o.Timestamp.Before(ob.firstSeen) {
			ob.firstSeen = o.Timestamp
		}
		if votes && ts != nil {
			e.observeGray(ts, ob, voterKey(node, o.Source.UID), o, now)
			e.dirtyTargets[tk] = struct{}{}
		}
		ob.voter = ""
		if votes {
			ob.voter = voterKey(node, o.Source.UID)
		}
		ob.seen(o.Timestamp, now)

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
			if o.Timestamp.After(ob.lastStable) {
				ob.lastStable = o.Timestamp
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
		if p == nil || !e.roundCounts(p, o.Timestamp) {
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
