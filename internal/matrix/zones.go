// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// ZonePair is one ZoneNetworkHealth: the exporter's verdict on the pod network from one
// zone to another (written only for a pair it found cut or lossy, until a retention after
// it recovered).
type ZonePair struct {
	Name         string  `json:"name"`
	From         string  `json:"from"`
	To           string  `json:"to"`
	Verdict      Verdict `json:"verdict"`
	Reason       string  `json:"reason,omitempty"`
	Message      string  `json:"message,omitempty"`
	NodePairs    int32   `json:"nodePairs"`
	FailingPairs int32   `json:"failingNodePairs"`
	// FailingObservers and FailingTargets: distinct nodes of each side (at most 10 named;
	// the counts are complete).
	FailingObservers     []string  `json:"failingObservers,omitempty"`
	FailingObserverCount int32     `json:"failingObserverCount"`
	FailingTargets       []string  `json:"failingTargets,omitempty"`
	FailingTargetCount   int32     `json:"failingTargetCount"`
	Since                time.Time `json:"since,omitzero"`
	LastFailure          time.Time `json:"lastFailure,omitzero"`
	// DegradedReason and DegradedMessage: the Degraded condition's while True (PacketLoss:
	// the link between the zones loses echoes; the message has the figures).
	DegradedReason  string    `json:"degradedReason,omitempty"`
	DegradedMessage string    `json:"degradedMessage,omitempty"`
	DegradedSince   time.Time `json:"degradedSince,omitzero"`
}

// ZonePairFrom flattens a ZoneNetworkHealth.
func ZonePairFrom(o *v1alpha1.ZoneNetworkHealth) ZonePair {
	z := ZonePair{Name: o.Name, From: o.Spec.SourceZone, To: o.Spec.TargetZone, Verdict: Verdict(o.Status.Reachability),
		NodePairs: o.Status.NodePairs, FailingPairs: o.Status.FailingNodePairs,
		FailingObservers: o.Status.FailingObserverNodes, FailingObserverCount: o.Status.FailingObserverNodeCount,
		FailingTargets: o.Status.FailingTargetNodes, FailingTargetCount: o.Status.FailingTargetNodeCount}
	if z.Verdict == None {
		z.Verdict = Unknown
	}
	if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReachable); c != nil {
		z.Reason, z.Message, z.Since = c.Reason, c.Message, c.LastTransitionTime.Time
	}
	if o.Status.LastFailureTime != nil {
		z.LastFailure = o.Status.LastFailureTime.Time
	}
	if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		z.DegradedReason, z.DegradedMessage, z.DegradedSince = c.Reason, c.Message, c.LastTransitionTime.Time
		z.Verdict = z.Verdict.Worse(Degraded)
	}
	return z
}

func zonePairsOf(objs []*v1alpha1.ZoneNetworkHealth) []ZonePair {
	out := make([]ZonePair, 0, len(objs))
	for _, o := range objs {
		out = append(out, ZonePairFrom(o))
	}
	slices.SortFunc(out, func(a, b ZonePair) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	return out
}

// WhyZone explains a zone: the zone pairs in and out of it the exporter judged, its nodes
// and those of them with a problem, and the pairs' objects between it and the other zones.
// False when neither a node nor a zone pair names the zone.
func (m *Model) WhyZone(name string) (Explanation, bool) {
	e := Explanation{Kind: "Zone", Name: name, Zone: name, Counts: Counts{}, AsObserver: Counts{}}
	known := false
	for _, z := range m.ZonePairs {
		if z.From == name || z.To == name {
			e.ZonePairs = append(e.ZonePairs, z)
			known = true
		}
	}
	var nodes []string
	var problems []string
	var members []int
	for i, n := range m.Nodes {
		if n.Zone != name {
			continue
		}
		known = true
		nodes = append(nodes, n.Name)
		members = append(members, i)
		if n.Condition.Problem() {
			problems = append(problems, n.Name)
		}
	}
	if !known {
		return Explanation{}, false
	}
	in := make(map[int]bool, len(members))
	for _, i := range members {
		in[i] = true
	}
	// The objects between the zone and the others, each way.
	for _, c := range m.Cells {
		switch {
		case in[c.Col] && !in[c.Row]:
			for _, pi := range c.Pairs {
				e.Counts[m.Pairs[pi].Verdict]++
			}
		case in[c.Row] && !in[c.Col]:
			for _, pi := range c.Pairs {
				e.AsObserver[m.Pairs[pi].Verdict]++
			}
		}
	}
	e.Verdict = Reachable
	for _, z := range e.ZonePairs {
		e.Verdict = e.Verdict.Worse(z.Verdict)
	}
	if e.GrayZonePairs = m.GrayZonePairs(name); len(e.GrayZonePairs) > 0 {
		e.Verdict = e.Verdict.Worse(Degraded)
	}
	e.Lines = append(e.Lines, fmt.Sprintf("zone %s: %d nodes, %d with a netpulse node condition True%s", name, len(nodes), len(problems), suffixList(problems)))
	if len(e.ZonePairs) == 0 {
		e.Lines = append(e.Lines, "no zone pair in or out of it was found cut or lossy (the exporter writes a ZoneNetworkHealth only for a cut or lossy pair, and keeps it a while after it recovers)")
	}
	for _, z := range e.ZonePairs {
		line := fmt.Sprintf("%s → %s: %s", z.From, z.To, z.Verdict)
		if !z.Since.IsZero() {
			line += " since " + m.when(z.Since)
		}
		line += fmt.Sprintf(" (%s): %d of %d node pairs fail, from %d observer nodes%s towards %d target nodes%s",
			z.Reason, z.FailingPairs, z.NodePairs, z.FailingObserverCount, suffixList(z.FailingObservers), z.FailingTargetCount, suffixList(z.FailingTargets))
		if z.DegradedReason != "" {
			line += fmt.Sprintf("; Degraded %s since %s: %s", z.DegradedReason, m.when(z.DegradedSince), z.DegradedMessage)
		}
		e.Lines = append(e.Lines, line)
	}
	for _, z := range e.GrayZonePairs {
		line := fmt.Sprintf("%s → %s: %s (a %s link between the zones, no node blamed) on %d pair%s, from %d observer nodes%s towards %d target nodes%s",
			z.From, z.To, zonePairWords(z.Reason, z.From, z.To), linkWords(z.Reason), z.Pairs, plural(z.Pairs), len(z.Observers), suffixList(z.Observers), len(z.Targets), suffixList(z.Targets))
		if !z.Since.IsZero() {
			line += ", since " + m.when(z.Since)
		}
		e.Lines = append(e.Lines, line+fmt.Sprintf("; worst (%s): %s", z.Quoted, z.Message))
	}
	e.Lines = append(e.Lines, "objects from other zones towards it: "+countsText(e.Counts), "objects from it towards other zones: "+countsText(e.AsObserver))
	inZone := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		inZone[n] = true
	}
	if e.GrayNodes = m.grayBlamed(inZone); len(e.GrayNodes) > 0 {
		parts := make([]string, 0, min(len(e.GrayNodes), 11))
		for i, n := range e.GrayNodes {
			if i == 10 {
				parts = append(parts, fmt.Sprintf("+%d more", len(e.GrayNodes)-i))
				break
			}
			parts = append(parts, fmt.Sprintf("%s (%s; %d pair%s)", n.Name, strings.Join(n.Reasons, ", "), n.Pairs, plural(n.Pairs)))
		}
		e.Lines = append(e.Lines, fmt.Sprintf("gray verdicts: %d of its nodes blamed (reason and side; kubectl netpulse why <node> gives the figures): %s",
			len(e.GrayNodes), strings.Join(parts, "; ")))
	}
	return e, true
}

func suffixList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return list(names)
}
