// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// Explanation says why a target (a node, or a pod) reads as it does: who observes it,
// which probes fail and since when, and — for a node — the quorum decision the
// exporter wrote into the node condition.
type Explanation struct {
	// Kind is "Node" or "Pod"; Name the node name or "namespace/name".
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Node and Zone place the target (a pod's node when known).
	Node      string     `json:"node,omitempty"`
	Zone      string     `json:"zone,omitempty"`
	Condition *Condition `json:"condition,omitempty"`
	// Verdict over the pairs towards the target: Unreachable when every observer that
	// judged it fails, Degraded when some fail and others reach it (or an address family
	// fails), Reachable, Unknown when no observer judged it, None without any pair.
	Verdict Verdict `json:"verdict"`
	// Since: the start of the oldest ongoing outage among the failing pairs (zero when
	// none).
	Since time.Time `json:"since,omitzero"`
	// Counts of the pairs towards the target by verdict.
	Counts Counts `json:"counts"`
	// Observer nodes by what their pairs towards the target read (distinct nodes: what
	// the exporter's quorum counts).
	Failing  []string `json:"failingObservers"`
	Reaching []string `json:"reachingObservers"`
	Unjudged []string `json:"unknownObservers"`
	// FailingProbes aggregates the probe results of the failing pairs, per probe type.
	FailingProbes []ProbeFailures `json:"failingProbes"`
	// Pairs towards the target, worst first.
	Pairs []Pair `json:"pairs"`
	// AsObserver counts, for a node, the pairs observed from it by verdict (a node whose
	// own probes fail everywhere is an unhealthy observer, not a bad target).
	AsObserver Counts `json:"asObserver,omitempty"`
	// Gray: the gray verdicts (PacketLoss, HighLatency) on the pairs towards it and on
	// those it observes, by reason, side and direction, with the worst figures; Blamed
	// says whether the exporter blames it (a pod: its node).
	Gray []GrayFinding `json:"gray,omitempty"`
	// ObservedGray: the pairs it observes (a pod: as their source) with a gray verdict.
	ObservedGray []Pair `json:"observedGray,omitempty"`
	// GrayNodes, for a zone: its nodes the exporter blames for a gray verdict, with the
	// reasons and sides.
	GrayNodes []GrayNode `json:"grayNodes,omitempty"`
	// ZonePairs, for a zone, are the exporter's verdicts on the zone pairs in and out of it.
	ZonePairs []ZonePair `json:"zonePairs,omitempty"`
	// GrayZonePairs, for a zone: the zone pairs in and out of it its pairs' objects blame a
	// gray verdict on (a lossy link between the zones), with the worst figures.
	GrayZonePairs []GrayZonePair `json:"grayZonePairs,omitempty"`
	// Lines is the explanation in a few lines of text.
	Lines []string `json:"lines"`
}

// ProbeFailures is one probe type over the failing pairs.
type ProbeFailures struct {
	Type string `json:"type"`
	Sent int64  `json:"sent"`
	Lost int64  `json:"lost"`
	// The newest failure of this type among them.
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time,omitzero"`
}

// WhyNode explains node name as a target (every pod target on it and the node itself)
// and its condition. False when the model has no such node.
func (m *Model) WhyNode(name string) (Explanation, bool) {
	i, ok := m.nodeIndex[name]
	if !ok {
		return Explanation{}, false
	}
	n := m.Nodes[i]
	e := Explanation{Kind: "Node", Name: name, Node: name, Zone: n.Zone, Condition: n.Condition, AsObserver: Counts{}}
	var towards, observes []int
	for pi := range m.Pairs {
		p := &m.Pairs[pi]
		if p.TargetNode == name && p.TargetKind != string(v1alpha1.TargetKindExternal) {
			towards = append(towards, pi)
		}
		if p.ObserverNode == name {
			e.AsObserver[p.Verdict]++
			observes = append(observes, pi)
		}
	}
	m.explainGray(&e, towards, observes)
	m.explain(&e, towards)
	return e, true
}

// explainGray fills the gray findings and the gray pairs observed.
func (m *Model) explainGray(e *Explanation, towards, observes []int) {
	e.Gray = m.grayFindings(e.Node, towards, observes)
	for _, pi := range observes {
		if m.Pairs[pi].Gray != nil {
			e.ObservedGray = append(e.ObservedGray, m.Pairs[pi])
		}
	}
}

// WhyPod explains the pod target namespace/name. False when no pair targets it.
func (m *Model) WhyPod(namespace, name string) (Explanation, bool) {
	key := namespace + "/" + name
	var towards []int
	for pi := range m.Pairs {
		if p := &m.Pairs[pi]; p.TargetKind == string(v1alpha1.TargetKindPod) && p.Target == key {
			towards = append(towards, pi)
		}
	}
	if len(towards) == 0 {
		return Explanation{}, false
	}
	e := Explanation{Kind: "Pod", Name: key}
	for _, pi := range towards {
		if n := m.Pairs[pi].TargetNode; n != "" {
			e.Node = n
			if i, ok := m.nodeIndex[n]; ok {
				e.Zone, e.Condition = m.Nodes[i].Zone, m.Nodes[i].Condition
			}
			break
		}
	}
	var observes []int
	for pi := range m.Pairs {
		if p := &m.Pairs[pi]; p.Namespace == namespace && p.SourcePod == name {
			observes = append(observes, pi)
		}
	}
	m.explainGray(&e, towards, observes)
	m.explain(&e, towards)
	return e, true
}

// PodTargets lists the "namespace/name" of the pod targets called name (any namespace
// when namespace is empty), sorted.
func (m *Model) PodTargets(namespace, name string) []string {
	seen := map[string]bool{}
	for pi := range m.Pairs {
		p := &m.Pairs[pi]
		if p.TargetKind != string(v1alpha1.TargetKindPod) {
			continue
		}
		ns, n, _ := strings.Cut(p.Target, "/")
		if n == name && (namespace == "" || ns == namespace) {
			seen[p.Target] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (m *Model) explain(e *Explanation, towards []int) {
	e.Counts = Counts{}
	failing, reaching, unjudged := map[string]bool{}, map[string]bool{}, map[string]bool{}
	probes := map[string]*ProbeFailures{}
	degraded := 0
	for _, pi := range towards {
		p := &m.Pairs[pi]
		e.Pairs = append(e.Pairs, *p)
		e.Counts[p.Verdict]++
		obs := p.ObserverNode
		if obs == "" {
			obs = "(unknown node)"
		}
		switch p.Verdict {
		case Unreachable:
			failing[obs] = true
			if !p.OutageSince.IsZero() && (e.Since.IsZero() || p.OutageSince.Before(e.Since)) {
				e.Since = p.OutageSince
			}
			if o := p.obj; o != nil {
				for _, pr := range o.Status.Probes {
					f := probes[string(pr.Type)]
					if f == nil {
						f = &ProbeFailures{Type: string(pr.Type)}
						probes[f.Type] = f
					}
					f.Sent += int64(pr.Sent)
					f.Lost += int64(pr.Lost)
					if lf := pr.LastFailure; lf != nil && lf.Time.After(f.Time) {
						f.Reason, f.Message, f.Time = lf.Reason, lf.Message, lf.Time.Time
					}
				}
			}
		case Reachable, Degraded:
			reaching[obs] = true
			if p.Verdict == Degraded {
				degraded++
			}
		default:
			unjudged[obs] = true
		}
	}
	e.Failing, e.Reaching, e.Unjudged = sortedKeys(failing), sortedKeys(reaching), sortedKeys(unjudged)
	for _, f := range probes {
		e.FailingProbes = append(e.FailingProbes, *f)
	}
	slices.SortFunc(e.FailingProbes, func(a, b ProbeFailures) int { return strings.Compare(a.Type, b.Type) })
	slices.SortStableFunc(e.Pairs, func(a, b Pair) int {
		return cmp.Or(-cmp.Compare(a.Verdict.Severity(), b.Verdict.Severity()), strings.Compare(a.ObserverNode, b.ObserverNode))
	})
	nf, nr := e.Counts[Unreachable], e.Counts[Reachable]+e.Counts[Degraded]
	switch {
	case len(towards) == 0:
		e.Verdict = None
	case nf > 0 && nr == 0:
		e.Verdict = Unreachable
	case nf > 0 || degraded > 0:
		e.Verdict = Degraded
	case nr > 0:
		e.Verdict = Reachable
	default:
		e.Verdict = Unknown
	}
	if e.Failing == nil {
		e.Failing = []string{}
	}
	if e.Reaching == nil {
		e.Reaching = []string{}
	}
	if e.Unjudged == nil {
		e.Unjudged = []string{}
	}
	if e.Pairs == nil {
		e.Pairs = []Pair{}
	}
	if e.FailingProbes == nil {
		e.FailingProbes = []ProbeFailures{}
	}
	e.Lines = m.lines(e)
}

func (m *Model) lines(e *Explanation) []string {
	var l []string
	subject := strings.ToLower(e.Kind) + " " + e.Name
	if e.Kind == "Pod" && e.Node != "" {
		subject += " on node " + e.Node
	}
	if e.Zone != "" {
		subject += " (zone " + e.Zone + ")"
	}
	head := fmt.Sprintf("%s: %s", subject, verdictText(e.Verdict))
	if !e.Since.IsZero() {
		head += " since " + m.when(e.Since)
	}
	l = append(l, head)
	if c := e.Condition; c != nil {
		s := fmt.Sprintf("node condition %s=%s (%s)", c.Type, c.Status, c.Reason)
		if !c.Since.IsZero() {
			s += " since " + m.when(c.Since)
		}
		if c.Message != "" {
			s += ": " + c.Message
		}
		l = append(l, s)
	} else if e.Node != "" {
		l = append(l, "node condition: none (no problem found on it: a node is written one only when marked; or the exporter's node_conditions are off)")
	}
	if len(e.Pairs) == 0 {
		l = append(l, "no PodNetworkHealth object targets it: it is probed only in rotation (its verdict is in the exporter's pod_network_health_target_reachable metric) or not at all")
		return append(l, m.grayLines(e)...)
	}
	l = append(l, fmt.Sprintf("observer nodes: %d fail to reach it%s, %d reach it%s, %d unknown%s (distinct nodes: what the quorum counts)",
		len(e.Failing), list(e.Failing), len(e.Reaching), list(e.Reaching), len(e.Unjudged), list(e.Unjudged)))
	l = append(l, "pairs towards it: "+countsText(e.Counts))
	if len(e.FailingProbes) > 0 {
		var parts []string
		for _, f := range e.FailingProbes {
			s := fmt.Sprintf("%s %d/%d lost", f.Type, f.Lost, f.Sent)
			if f.Reason != "" {
				s += fmt.Sprintf(", last %s at %s", f.Reason, m.when(f.Time))
				if f.Message != "" {
					s += fmt.Sprintf(" (%s)", f.Message)
				}
			}
			parts = append(parts, s)
		}
		l = append(l, "failing probes: "+strings.Join(parts, "; "))
	}
	reasons := map[string]int{}
	for _, p := range e.Pairs {
		if p.Verdict == Unknown && p.Reason != "" {
			reasons[p.Reason]++
		}
	}
	if len(reasons) > 0 {
		l = append(l, "unknown pairs by reason: "+mapText(reasons))
	}
	degraded := map[string]int{}
	for _, p := range e.Pairs {
		if p.DegradedReason != "" {
			degraded[p.DegradedReason]++
		}
	}
	if len(degraded) > 0 {
		l = append(l, "degraded pairs by reason: "+mapText(degraded))
	}
	if n := degraded[v1alpha1.ReasonMTUBlackHole]; n > 0 {
		l = append(l, fmt.Sprintf("path-MTU black hole on %d pairs: full-size don't-fragment packets vanish while small ones pass (a hop with a smaller MTU whose ICMP errors are dropped); the pairs' Degraded message gives the size that passes", n))
	}
	l = append(l, m.grayLines(e)...)
	if e.Verdict == Reachable || e.Verdict == Degraded {
		var last time.Time
		for _, p := range e.Pairs {
			if o := p.obj; o != nil && len(o.Status.Outages) > 0 && o.Status.Outages[0].End != nil && o.Status.Outages[0].End.After(last) {
				last = o.Status.Outages[0].End.Time
			}
		}
		if !last.IsZero() {
			l = append(l, "last outage ended "+m.when(last))
		}
	}
	if n := e.AsObserver; len(n) > 0 {
		total := 0
		for _, c := range n {
			total += c
		}
		s := fmt.Sprintf("as an observer (%d pairs observed from it): %s", total, countsText(n))
		if total > 0 && n[Unknown] == total {
			s += " (its own failures are attributed to it, not to its targets)"
		}
		l = append(l, s)
	}
	return l
}

// when formats t as a UTC clock time and its age against the model's now.
// When is t as the explanations write it: the time and how long ago, against the model's
// Now.
func (m *Model) When(t time.Time) string { return m.when(t) }

func (m *Model) when(t time.Time) string {
	s := t.UTC().Format("2006-01-02T15:04:05Z")
	if !m.Now.IsZero() && !m.Now.Before(t) {
		s += " (" + Age(m.Now.Sub(t)) + " ago)"
	}
	return s
}

// Age formats a duration like kubectl's AGE column: 45s, 3m10s, 2h5m, 3d4h.
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}

func verdictText(v Verdict) string {
	switch v {
	case None:
		return "no object (not probed as a stable pair, not failing)"
	case Degraded:
		return "Degraded (reachable, but some observers, an address family or full-size packets fail, or packet loss or high latency is judged)"
	case Unreachable:
		return "Unreachable (every observer that judged it fails)"
	case Unknown:
		return "Unknown (no observer could judge it)"
	}
	return string(v)
}

// CountsText formats counts as "2 Unreachable, 1 Reachable" (worst first).
func countsText(c Counts) string {
	var parts []string
	for i := len(Verdicts) - 1; i >= 0; i-- {
		if n := c[Verdicts[i]]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, Verdicts[i]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func mapText(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// list formats up to five names as " (a, b, c)"; more as " (a, b, c, d, e, +3)".
func list(names []string) string {
	if len(names) == 0 {
		return ""
	}
	if len(names) > 5 {
		return fmt.Sprintf(" (%s, +%d)", strings.Join(names[:5], ", "), len(names)-5)
	}
	return " (" + strings.Join(names, ", ") + ")"
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, naturalCompare)
	return out
}
