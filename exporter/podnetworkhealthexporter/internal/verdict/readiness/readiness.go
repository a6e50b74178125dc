// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package readiness decides the pod network-readiness gate (KEP-5709 style): pods that
// list the condition type (default netpulse.io/network-ready) in spec.readinessGates get
// the condition set True once the pod network demonstrably reaches them from another node.
// It is pure and deterministic: the caller feeds observations and the pod list and applies
// the returned flips; the clock is injected.
//
// Rules:
//   - True with reason PodNetworkReached once a successful observation targets the pod
//     (by UID, else namespace/name) from an observer on another node than the pod's, made
//     no earlier than the pod's creation;
//   - True with reason Exempt at once for a pod in kube-system or of a system-critical
//     priority class (Exempt): DNS, the CNI and the cluster's own controllers must never
//     wait for netpulse, whose probes need them;
//   - True with reason FailOpen when FailOpenTimeout > 0 and the pod is older than that
//     without having been reached (so a broken prober cannot hold pods back forever);
//   - at most MaxFlipsPerMinute flips per minute (token bucket, burst of the same size),
//     oldest pods first; the rest are returned by later Decide calls;
//   - never True -> False: once set, the condition is left alone in this version (a
//     network problem after start-up is reported by PodNetworkHealth objects and node
//     conditions, not by withdrawing readiness, which could cascade into outages);
//   - no False/absent writes: a gated pod without the condition is not Ready, which is the
//     intended state, so no write is spent on it.
package readiness // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/readiness"

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// DefaultConditionType is the readiness-gate condition type.
const DefaultConditionType = "netpulse.io/network-ready"

// Reasons of the condition.
const (
	ReasonReached  = "PodNetworkReached"
	ReasonFailOpen = "FailOpen"
	ReasonExempt   = "Exempt"
)

// Exempt reports whether a pod is never held back by the gate: kube-system's pods and
// pods of the system-critical priority classes (the cluster's DNS, CNI, kube-proxy,
// controllers), which the pod network and netpulse's own probes depend on. The injection
// policy never adds the gate to them; one that declares it anyway is set True at once.
func Exempt(namespace, priorityClassName string) bool {
	return namespace == "kube-system" || priorityClassName == "system-cluster-critical" || priorityClassName == "system-node-critical"
}

// StatusTrue is the only status Decide sets.
const StatusTrue = "True"

// Config configures a Gate. Zero fields take the defaults.
type Config struct {
	// ConditionType pods declare in spec.readinessGates (default netpulse.io/network-ready).
	ConditionType string
	// MaxFlipsPerMinute bounds how many pods may be flipped per minute; the burst is the
	// same number (default 60).
	MaxFlipsPerMinute int
	// FailOpenTimeout: a pod not reached this long after creation is set True anyway
	// (reason FailOpen); 0 disables fail-open.
	FailOpenTimeout time.Duration
	// RetryAfter: a flip Decide returned is not returned again for this long, unless the
	// pod shows the condition True by then (default 30s; it covers the time the writer's
	// update takes to reach the pod informer, and retries a lost write after it).
	RetryAfter time.Duration
	// RememberFor: reaches of pods that Decide has not flipped are kept this long after
	// the newest one (default 15m).
	RememberFor time.Duration
	// MinReachingNodes distinct observer nodes (other than the pod's) must have reached
	// the pod (default 1, at most maxReachNodes). With authenticated observers, 2 means no
	// single agent decides another pod's readiness.
	MinReachingNodes int
}

// Defaults of Config.
const (
	DefaultMaxFlipsPerMinute = 60
	DefaultRetryAfter        = 30 * time.Second
	DefaultRememberFor       = 15 * time.Minute
	// maxReachNodes bounds the observer nodes remembered per target.
	maxReachNodes = 4
)

func (c Config) withDefaults() Config {
	if c.ConditionType == "" {
		c.ConditionType = DefaultConditionType
	}
	if c.MaxFlipsPerMinute <= 0 {
		c.MaxFlipsPerMinute = DefaultMaxFlipsPerMinute
	}
	if c.FailOpenTimeout < 0 {
		c.FailOpenTimeout = 0
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.RememberFor <= 0 {
		c.RememberFor = DefaultRememberFor
	}
	c.MinReachingNodes = min(max(c.MinReachingNodes, 1), maxReachNodes)
	return c
}

// PodInfo is what Decide needs of a pod (from the pod informer).
type PodInfo struct {
	Namespace, Name, UID string
	// Node the pod is scheduled on (spec.nodeName).
	Node    string
	Created time.Time
	// HasGate: spec.readinessGates lists the condition type.
	HasGate bool
	// Exempt: never held back (Exempt): set True at once.
	Exempt bool
	// Condition is the current status of the condition: "" when absent, "True", "False"
	// or "Unknown".
	Condition string
}

func (p *PodInfo) key() string {
	if p.UID != "" {
		return "u/" + p.UID
	}
	return "n/" + p.Namespace + "/" + p.Name
}

// Flip is one condition write for the caller to make.
type Flip struct {
	Namespace, Name, UID string
	ConditionType        string
	Status               string // always StatusTrue in this version
	Reason, Message      string
}

type reach struct {
	at                     time.Time
	observerPod, probeType string
	observerNode           string
	targetNode             string
}

type target struct {
	reaches []reach // at most maxReachNodes, one per observer node: the newest
	newest  time.Time
}

// Gate holds what the readiness decisions need. Safe for concurrent use.
type Gate struct {
	cfg     Config
	mu      sync.Mutex
	targets map[string]*target   // "u/<uid>" and "n/<ns>/<name>" -> the same target
	issued  map[string]time.Time // pod key -> when Decide returned its flip
	tokens  float64
	last    time.Time
	backlog int
}

// NewGate returns a Gate.
func NewGate(cfg Config) *Gate {
	cfg = cfg.withDefaults()
	return &Gate{cfg: cfg, targets: map[string]*target{}, issued: map[string]time.Time{}, tokens: float64(cfg.MaxFlipsPerMinute)}
}

// Config returns the effective configuration.
func (g *Gate) Config() Config { return g.cfg }

// Observe records successful observations of Pod targets made from a known node.
func (g *Gate) Observe(obs ...observation.Observation) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range obs {
		o := &obs[i]
		if !o.Success || o.Target.Kind != observation.TargetPod || o.Source.Node == "" || o.Timestamp.IsZero() {
			continue
		}
		var keys []string
		if o.Target.UID != "" {
			keys = append(keys, "u/"+o.Target.UID)
		}
		if o.Target.Namespace != "" && o.Target.Name != "" {
			keys = append(keys, "n/"+o.Target.Namespace+"/"+o.Target.Name)
		}
		if len(keys) == 0 {
			continue
		}
		var t *target
		for _, k := range keys {
			if t = g.targets[k]; t != nil {
				break
			}
		}
		if t == nil {
			t = &target{}
		}
		for _, k := range keys {
			g.targets[k] = t
		}
		r := reach{at: o.Timestamp, observerPod: o.Source.Namespace + "/" + o.Source.Name, probeType: o.ProbeType,
			observerNode: o.Source.Node, targetNode: o.Target.Node}
		t.add(r)
	}
}

func (t *target) add(r reach) {
	if r.at.After(t.newest) {
		t.newest = r.at
	}
	for i := range t.reaches {
		if t.reaches[i].observerNode == r.observerNode {
			if r.at.After(t.reaches[i].at) {
				t.reaches[i] = r
			}
			return
		}
	}
	if len(t.reaches) < maxReachNodes {
		t.reaches = append(t.reaches, r)
		return
	}
	oldest := 0
	for i := range t.reaches {
		if t.reaches[i].at.Before(t.reaches[oldest].at) {
			oldest = i
		}
	}
	if r.at.After(t.reaches[oldest].at) {
		t.reaches[oldest] = r
	}
}

// reachFor returns the reach of p that completed MinReachingNodes qualifying reaches
// (from distinct other nodes, not before p was created): the earliest with the default of
// one. The second result is how many qualifying reaches there are.
func (g *Gate) reachFor(p *PodInfo) (*reach, int) {
	var t *target
	if p.UID != "" {
		t = g.targets["u/"+p.UID]
	}
	if t == nil && p.Namespace != "" && p.Name != "" {
		t = g.targets["n/"+p.Namespace+"/"+p.Name]
	}
	if t == nil {
		return nil, 0
	}
	var ok []*reach // one per observer node (target.add keeps one)
	for i := range t.reaches {
		r := &t.reaches[i]
		node := p.Node
		if node == "" {
			node = r.targetNode
		}
		if node == "" || r.observerNode == node || r.at.Before(p.Created) {
			continue
		}
		ok = append(ok, r)
	}
	if len(ok) < g.cfg.MinReachingNodes {
		return nil, len(ok)
	}
	slices.SortFunc(ok, func(a, b *reach) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.observerNode, b.observerNode)
	})
	return ok[g.cfg.MinReachingNodes-1], len(ok)
}

// Decide returns the flips to make now, oldest pods first, within the rate limit. Pods
// without the gate or with the condition already True are skipped.
func (g *Gate) Decide(pods []PodInfo, now time.Time) []Flip {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.last.IsZero() && now.After(g.last) {
		g.tokens = min(float64(g.cfg.MaxFlipsPerMinute), g.tokens+now.Sub(g.last).Minutes()*float64(g.cfg.MaxFlipsPerMinute))
	}
	if now.After(g.last) {
		g.last = now
	}

	type cand struct {
		p    *PodInfo
		flip Flip
	}
	var cands []cand
	pending := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if !p.HasGate || p.Condition == StatusTrue {
			continue
		}
		k := p.key()
		pending[k] = true
		if at, ok := g.issued[k]; ok && now.Sub(at) < g.cfg.RetryAfter {
			continue
		}
		f := Flip{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ConditionType: g.cfg.ConditionType, Status: StatusTrue}
		switch r, n := g.reachFor(p); {
		case p.Exempt:
			f.Reason = ReasonExempt
			f.Message = "a kube-system or system-critical pod: never held back by the pod network-readiness gate"
		case r != nil:
			f.Reason = ReasonReached
			f.Message = fmt.Sprintf("reached over the pod network from %s on node %s (%s) at %s",
				r.observerPod, r.observerNode, r.probeType, r.at.UTC().Format(time.RFC3339))
			if g.cfg.MinReachingNodes > 1 {
				f.Message += fmt.Sprintf(", and from %d other nodes", n-1)
			}
		case g.cfg.FailOpenTimeout > 0 && !p.Created.IsZero() && now.Sub(p.Created) >= g.cfg.FailOpenTimeout:
			f.Reason = ReasonFailOpen
			f.Message = fmt.Sprintf("not reached over the pod network from another node within %s of creation; failing open", g.cfg.FailOpenTimeout)
		default:
			continue
		}
		cands = append(cands, cand{p, f})
	}
	for k := range g.issued {
		if !pending[k] {
			delete(g.issued, k) // flipped (True now) or gone
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if c := a.p.Created.Compare(b.p.Created); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p.Namespace, b.p.Namespace); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p.Name, b.p.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.p.UID, b.p.UID)
	})
	var out []Flip
	for _, c := range cands {
		if g.tokens < 1 {
			break
		}
		g.tokens--
		g.issued[c.p.key()] = now
		out = append(out, c.flip)
	}
	g.backlog = len(cands) - len(out)
	return out
}

// Backlog is the number of pods the last Decide could have flipped but the rate limit
// deferred.
func (g *Gate) Backlog() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.backlog
}

// Expire forgets targets whose newest reach is more than RememberFor before now; it returns
// how many targets it forgot.
func (g *Gate) Expire(now time.Time) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	gone := map[*target]bool{}
	for k, t := range g.targets {
		if now.Sub(t.newest) > g.cfg.RememberFor {
			delete(g.targets, k)
			gone[t] = true
		}
	}
	return len(gone)
}
