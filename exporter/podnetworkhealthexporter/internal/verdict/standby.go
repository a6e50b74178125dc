// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// A standby replica summarises what agents send it (they can reach it by pod IP, and the
// Service sends them there after a takeover), so that it leads warm; but Judge, which
// expires state, runs only on the leader. A standby's engine therefore bounds what it
// keeps itself and expires it on the leader's schedule (ExpireStandby, every second on
// every replica): without this, one agent sending a standby points about every pod in the
// gateway's index held a target state (~1.5 KB) for each, never freed (~150 MB at 100,000
// pods).

// StandbyTargetsPerIdentity bounds a standby's target states per pod, node or external
// address. A pod's or node's key is its identity and family (2 at most); an external
// target's also holds its port and endpoint, which a sender chooses within the declared
// targets: 8, the admission's external targets per source.
const StandbyTargetsPerIdentity = 8

// standbyState is what the engine keeps while it is a standby.
type standbyState struct {
	on bool
	// perIdentity counts the target states per identity (standbyIdentity).
	perIdentity map[string]int
}

// standbyIdentity is what a target state is counted under on a standby: the pod's UID,
// the node's name, the external address.
func standbyIdentity(k TargetKey) string {
	switch k.Kind {
	case observation.TargetPod:
		return "pod/" + k.UID
	case observation.TargetNode:
		return "node/" + k.Name
	default:
		return "external/" + k.Address
	}
}

// Standby makes the engine a standby's until the next Resume: it keeps target states only
// for agents' pods (pods that report as observers), nodes and external targets, at most
// StandbyTargetsPerIdentity each, and ExpireStandby forgets what nobody observed for
// TargetTTL. EndTerm calls it: a replica that stops leading is a standby.
func (e *Engine) Standby() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.standbyLocked()
}

func (e *Engine) standbyLocked() {
	e.standby = standbyState{on: true, perIdentity: make(map[string]int, len(e.targets))}
	for k := range e.targets {
		e.standby.perIdentity[standbyIdentity(k)]++
	}
}

// standbyAdmits reports whether a new target state for k may be made (caller holds mu):
// always on the leader; on a standby only for an agent's pod, a node or an external
// target, within StandbyTargetsPerIdentity.
func (e *Engine) standbyAdmits(k TargetKey) bool {
	if !e.standby.on {
		return true
	}
	if k.Kind == observation.TargetPod && e.observers[k.UID] == nil {
		return false // not an agent's pod: agents probe agents (and nodes, and declared targets)
	}
	id := standbyIdentity(k)
	if e.standby.perIdentity[id] >= StandbyTargetsPerIdentity {
		return false
	}
	e.standby.perIdentity[id]++
	return true
}

// ExpireStandby forgets, on a standby, the targets, observers and pairs nobody observed
// for TargetTTL (pairs by the leader's rules: expirePairs), and the marks of what changed
// since the last judgement (the next leader judges everything at Resume). It does nothing
// on the leader, whose Judge expires. The exporter calls it every second on every replica.
func (e *Engine) ExpireStandby(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.standby.on {
		return
	}
	for k, t := range e.targets {
		if now.Sub(t.lastSeen) > e.cfg.TargetTTL {
			delete(e.targets, k)
			id := standbyIdentity(k)
			if e.standby.perIdentity[id]--; e.standby.perIdentity[id] <= 0 {
				delete(e.standby.perIdentity, id)
			}
		}
	}
	clear(e.dirtyTargets)
	e.expirePairs(now, e.dirty)
	clear(e.dirty)
	for k, ob := range e.observers {
		if now.Sub(ob.lastSeen) > e.cfg.TargetTTL && now.Sub(ob.lastArrival) > e.cfg.TargetTTL {
			delete(e.observers, k)
		}
	}
	e.workingElsewhere(now, 0) // forgets what is past TargetTTL
}
