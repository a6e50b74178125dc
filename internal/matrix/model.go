// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// ZoneLabel is the well-known node label the matrix groups nodes by.
const ZoneLabel = corev1.LabelTopologyZone

// DefaultConditionType is the node condition the pod_network_health exporter writes by
// default (node_conditions.type).
const DefaultConditionType = "netpulse.io/PodNetworkProblem"

// Verdict is what a pair, a cell or a zone pair reads as.
type Verdict string

// Verdicts, from best to worst (see Severity). None is a cell without any object: not
// probed as a stable pair and not failing, which says nothing about health.
const (
	None        Verdict = ""
	Reachable   Verdict = "Reachable"
	Unknown     Verdict = "Unknown"
	Degraded    Verdict = "Degraded"
	Unreachable Verdict = "Unreachable"
)

// ReasonStatusStale is the reason of a pair whose status is past its freshUntil.
const ReasonStatusStale = "StatusStale"

// Verdicts lists the verdicts of objects, best first.
var Verdicts = []Verdict{Reachable, Unknown, Degraded, Unreachable}

// Severity orders verdicts for "worst of": None < Reachable < Unknown < Degraded <
// Unreachable.
func (v Verdict) Severity() int {
	switch v {
	case Reachable:
		return 1
	case Unknown:
		return 2
	case Degraded:
		return 3
	case Unreachable:
		return 4
	}
	return 0
}

// Worse returns the worse of v and w.
func (v Verdict) Worse(w Verdict) Verdict {
	if w.Severity() > v.Severity() {
		return w
	}
	return v
}

// Condition is a node's netpulse condition (the exporter's node_conditions.type).
type Condition struct {
	Type    string    `json:"type"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since,omitzero"` // lastTransitionTime
}

// Problem reports whether the condition marks the node (status True).
func (c *Condition) Problem() bool { return c != nil && c.Status == string(corev1.ConditionTrue) }

// Node is one node as the matrix needs it: its name, zone and netpulse condition.
type Node struct {
	Name      string     `json:"name"`
	Zone      string     `json:"zone,omitempty"`
	Condition *Condition `json:"condition,omitempty"`
	// Known is false for a node named only by an object (not in the node list).
	Known bool `json:"-"`
}

// NodeFrom takes the name, the zone label and the condition of type conditionType
// (DefaultConditionType when empty) from a Node. Nothing else of the node is kept.
func NodeFrom(n *corev1.Node, conditionType string) Node {
	if conditionType == "" {
		conditionType = DefaultConditionType
	}
	out := Node{Name: n.Name, Zone: n.Labels[ZoneLabel], Known: true}
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		if string(c.Type) == conditionType {
			out.Condition = &Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
				Message: c.Message, Since: c.LastTransitionTime.Time}
			break
		}
	}
	return out
}

// Pod is a pod's placement: which node a pod target runs on.
type Pod struct {
	Namespace, Name, UID, Node string
}

// PodFrom takes a pod's identity and node.
func PodFrom(p *corev1.Pod) Pod {
	return Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Node: p.Spec.NodeName}
}

// Input is what a model is built from. Objects and nodes are read, never modified.
type Input struct {
	Objects []*v1alpha1.PodNetworkHealth
	Nodes   []Node
	// Pods (optional) place pod targets on nodes. A pod target not among them is placed
	// on the node it observes from as a source (its own objects' observedFromNode):
	// netpulse's targets are its agents, and every agent is the source of its stable pairs.
	Pods []Pod
	// Now is the time "since" and ages are computed against.
	Now time.Time
	// ZonePairs (optional) are the exporter's zone pair verdicts (ZoneNetworkHealth).
	ZonePairs []*v1alpha1.ZoneNetworkHealth
	// Writers (optional), by ShardKey: an object whose writer is known is current while its
	// writer's Lease is (its freshUntil is not read), and reads Unknown / StatusStale when
	// the Lease is not; an object whose writer's Lease could not be read (Writer.Unread) is
	// stale past its freshUntil. An object no summary names the writer of is stale past its
	// freshUntil, and, when it has none (its writer relied on a Lease: freshness: lease),
	// stale as soon as any writer is known: a summary is written at each writer's first
	// judgement, so its objects are of a writer that is gone (a shard of an earlier count).
	Writers map[string]Writer
}

// Pair is one PodNetworkHealth object, flattened: the observed (source pod -> target)
// pair, placed on its observer and target nodes.
type Pair struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// SourcePod is the probing pod (in Namespace).
	SourcePod  string `json:"sourcePod"`
	TargetKind string `json:"targetKind"`
	// Target is "namespace/name" for a pod, the node name for a node, the address for an
	// external target.
	Target string `json:"target"`
	// ObserverNode and TargetNode are empty when unknown (TargetNode always for External).
	ObserverNode string  `json:"observerNode,omitempty"`
	TargetNode   string  `json:"targetNode,omitempty"`
	Verdict      Verdict `json:"verdict"`
	// Reason and Message are the Reachable condition's (e.g. ProbesFailed,
	// ObserverUnhealthy, ObserverSilent).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// DegradedReason and DegradedMessage are the Degraded condition's when it is True
	// (AddressFamilyUnreachable, MTUBlackHole, PacketLoss, HighLatency), DegradedSince its
	// lastTransitionTime.
	DegradedReason  string    `json:"degradedReason,omitempty"`
	DegradedMessage string    `json:"degradedMessage,omitempty"`
	DegradedSince   time.Time `json:"degradedSince,omitzero"`
	// Gray is a PacketLoss or HighLatency verdict read back from the message: the side and
	// node it is blamed on, and the figures (nil for any other).
	Gray *Gray  `json:"gray,omitempty"`
	P50  string `json:"p50,omitempty"`
	P99  string `json:"p99,omitempty"`
	// Loss is the loss ratio (0-1); HasLoss is false when the object has none.
	Loss    float64 `json:"loss"`
	HasLoss bool    `json:"hasLoss"`
	// LastObserved is the status's lastObservedTime: the newest observation as of the
	// last write (on a healthy pair, the last heartbeat, not the last probe).
	LastObserved time.Time `json:"lastObserved,omitzero"`
	// FreshUntil is the status's freshUntil; past it (at the model's Now) the pair reads
	// Unknown with reason StatusStale, whatever the object says, unless its writer is known
	// (Input.Writers): then its writer's Lease decides.
	FreshUntil time.Time `json:"freshUntil,omitzero"`
	// Writer is the Lease ("namespace/name") that keeps the status current, when known.
	Writer string `json:"writer,omitempty"`
	// VerdictSince is when the Reachable condition last changed: how long the verdict held.
	VerdictSince time.Time `json:"verdictSince,omitzero"`
	// OutageSince is the start of the ongoing outage (zero when none).
	OutageSince time.Time `json:"outageSince,omitzero"`
	// Outages is the length of the outage history.
	Outages int `json:"outages"`

	p50 time.Duration
	obj *v1alpha1.PodNetworkHealth
}

// Object is the PodNetworkHealth the pair was made from (shared with the caller's
// cache: read only).
func (p *Pair) Object() *v1alpha1.PodNetworkHealth { return p.obj }

// RTT is the pair's p50 (0 when it has none).
func (p *Pair) RTT() time.Duration { return p.p50 }

// Cell is one (observer node, target node) entry of the matrix: every object observed
// from the row's node towards a target on the column's node.
type Cell struct {
	Row, Col int
	// Verdict is the worst of the pairs'.
	Verdict Verdict
	// P50 is the largest p50 of the pairs (empty when none has one); Loss the largest loss.
	P50     string
	Loss    float64
	HasLoss bool
	// Degraded lists the distinct Degraded reasons of its pairs, hard failures first
	// (AddressFamilyUnreachable, MTUBlackHole, PacketLoss, HighLatency, others).
	Degraded []string
	// ZoneLoss is the zone pair a PacketLoss of its pairs is blamed on (side zone: the link
	// between the zones, no node), nil when none is.
	ZoneLoss *ZoneLink
	// Pairs indexes Model.Pairs.
	Pairs []int

	p50 time.Duration
}

// add puts pair p (Model.Pairs[i]) into the cell: the worst verdict, the largest p50 and
// loss, the Degraded reasons, the zone pair a PacketLoss is blamed on.
func (c *Cell) add(i int, p *Pair) {
	c.Pairs = append(c.Pairs, i)
	c.Verdict = c.Verdict.Worse(p.Verdict)
	if p.P50 != "" && (c.P50 == "" || p.p50 > c.p50) {
		c.P50, c.p50 = p.P50, p.p50
	}
	if p.HasLoss && (!c.HasLoss || p.Loss > c.Loss) {
		c.Loss, c.HasLoss = p.Loss, true
	}
	if r := p.DegradedReason; r != "" && !slices.Contains(c.Degraded, r) {
		c.Degraded = append(c.Degraded, r)
		sortDegraded(c.Degraded)
	}
	if g := p.Gray; g != nil && g.Side == SideZone && c.ZoneLoss == nil {
		c.ZoneLoss = &ZoneLink{From: g.FromZone, To: g.ToZone}
	}
}

// Zone is a contiguous range of Model.Nodes.
type Zone struct {
	Name         string `json:"name"`
	First        int    `json:"first"`
	Count        int    `json:"count"`
	ProblemNodes int    `json:"problemNodes"`
}

// Model is the built matrix. Nodes are ordered by zone (nodes without one last), then by
// name (numbers in names in numeric order); rows and columns both index Nodes.
type Model struct {
	Now   time.Time
	Nodes []Node
	Zones []Zone
	Pairs []Pair
	// Cells, ordered by row then column; only those with at least one pair.
	Cells []Cell
	// Counts of pairs by verdict.
	Counts map[Verdict]int
	// Unplaced pairs miss their observer or target node (External targets excluded);
	// External pairs target addresses outside the cluster. Neither is in any cell.
	Unplaced, External int
	// ZonePairs are the zone pair verdicts, ordered by (from, to).
	ZonePairs []ZonePair

	nodeIndex map[string]int
	cellIndex map[int]int // row*len(Nodes)+col -> index in Cells
}

// Build makes the model. It is O(objects + nodes) apart from sorting.
func Build(in Input) *Model {
	m := &Model{Now: in.Now, Counts: make(map[Verdict]int, len(Verdicts)), ZonePairs: zonePairsOf(in.ZonePairs)}

	podNode := make(map[string]Pod, len(in.Pods))
	for _, p := range in.Pods {
		if p.Node != "" {
			podNode[p.Namespace+"/"+p.Name] = p
		}
	}
	// Where each source pod observes from (its newest object's observedFromNode).
	type seen struct {
		node string
		at   time.Time
	}
	sourceNode := make(map[string]seen, len(in.Objects)/2+1)
	for _, o := range in.Objects {
		if o.Status.ObservedFromNode == "" {
			continue
		}
		k := o.Namespace + "/" + o.Spec.SourcePodRef.Name
		var at time.Time
		if o.Status.LastObservedTime != nil {
			at = o.Status.LastObservedTime.Time
		}
		if s, ok := sourceNode[k]; !ok || at.After(s.at) {
			sourceNode[k] = seen{o.Status.ObservedFromNode, at}
		}
	}
	placePod := func(ns, name, uid string) string {
		k := ns + "/" + name
		if p, ok := podNode[k]; ok && (uid == "" || p.UID == "" || p.UID == uid) {
			return p.Node
		}
		return sourceNode[k].node
	}

	m.Pairs = make([]Pair, 0, len(in.Objects))
	for _, o := range in.Objects {
		p := pairOf(o, in.Now, in.Writers)
		if p.ObserverNode == "" {
			p.ObserverNode = placePod(o.Namespace, o.Spec.SourcePodRef.Name, string(o.Spec.SourcePodRef.UID))
		}
		if r := o.Spec.TargetPodRef; o.Spec.TargetKind == v1alpha1.TargetKindPod && r != nil {
			p.TargetNode = placePod(r.Namespace, r.Name, string(r.UID))
		}
		m.Pairs = append(m.Pairs, p)
	}
	slices.SortFunc(m.Pairs, func(a, b Pair) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})

	// Nodes: the node list, plus nodes named only by objects.
	m.Nodes = make([]Node, 0, len(in.Nodes))
	m.nodeIndex = make(map[string]int, len(in.Nodes))
	for _, n := range in.Nodes {
		if _, dup := m.nodeIndex[n.Name]; dup || n.Name == "" {
			continue
		}
		n.Known = true
		m.nodeIndex[n.Name] = len(m.Nodes)
		m.Nodes = append(m.Nodes, n)
	}
	for i := range m.Pairs {
		for _, name := range []string{m.Pairs[i].ObserverNode, m.Pairs[i].TargetNode} {
			if _, ok := m.nodeIndex[name]; !ok && name != "" {
				m.nodeIndex[name] = len(m.Nodes)
				m.Nodes = append(m.Nodes, Node{Name: name})
			}
		}
	}
	slices.SortFunc(m.Nodes, func(a, b Node) int {
		if (a.Zone == "") != (b.Zone == "") {
			if a.Zone == "" {
				return 1
			}
			return -1
		}
		return cmp.Or(naturalCompare(a.Zone, b.Zone), naturalCompare(a.Name, b.Name))
	})
	for i, n := range m.Nodes {
		m.nodeIndex[n.Name] = i
		if len(m.Zones) == 0 || m.Zones[len(m.Zones)-1].Name != n.Zone {
			m.Zones = append(m.Zones, Zone{Name: n.Zone, First: i})
		}
		z := &m.Zones[len(m.Zones)-1]
		z.Count++
		if n.Condition.Problem() {
			z.ProblemNodes++
		}
	}

	// Cells.
	nn := len(m.Nodes)
	m.cellIndex = make(map[int]int, len(m.Pairs))
	for i := range m.Pairs {
		p := &m.Pairs[i]
		m.Counts[p.Verdict]++
		if p.TargetKind == string(v1alpha1.TargetKindExternal) {
			m.External++
			continue
		}
		if p.ObserverNode == "" || p.TargetNode == "" {
			m.Unplaced++
			continue
		}
		r, c := m.nodeIndex[p.ObserverNode], m.nodeIndex[p.TargetNode]
		k := r*nn + c
		ci, ok := m.cellIndex[k]
		if !ok {
			ci = len(m.Cells)
			m.cellIndex[k] = ci
			m.Cells = append(m.Cells, Cell{Row: r, Col: c})
		}
		m.Cells[ci].add(i, p)
	}
	slices.SortFunc(m.Cells, func(a, b Cell) int { return cmp.Or(cmp.Compare(a.Row, b.Row), cmp.Compare(a.Col, b.Col)) })
	for i, c := range m.Cells {
		m.cellIndex[c.Row*nn+c.Col] = i
	}
	return m
}

// pairOf flattens one object (observer and pod-target nodes are placed by Build).
func pairOf(o *v1alpha1.PodNetworkHealth, now time.Time, writers map[string]Writer) Pair {
	st := &o.Status
	p := Pair{
		Namespace:    o.Namespace,
		Name:         o.Name,
		SourcePod:    o.Spec.SourcePodRef.Name,
		TargetKind:   string(o.Spec.TargetKind),
		ObserverNode: st.ObservedFromNode,
		Outages:      len(st.Outages),
		obj:          o,
	}
	switch {
	case o.Spec.TargetPodRef != nil:
		p.Target = o.Spec.TargetPodRef.Namespace + "/" + o.Spec.TargetPodRef.Name
	case o.Spec.TargetNodeRef != nil:
		p.Target = o.Spec.TargetNodeRef.Name
		p.TargetNode = o.Spec.TargetNodeRef.Name
	case o.Spec.TargetEndpoint != nil:
		p.Target = o.Spec.TargetEndpoint.Address
	}
	switch st.Reachability {
	case v1alpha1.Reachable:
		p.Verdict = Reachable
	case v1alpha1.Unreachable:
		p.Verdict = Unreachable
	default:
		p.Verdict = Unknown
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReachable); c != nil {
		p.Reason, p.Message = c.Reason, c.Message
		p.VerdictSince = c.LastTransitionTime.Time
	} else if st.Reachability == "" {
		p.Reason = "NotObservedYet"
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded); c != nil && c.Status == "True" {
		p.DegradedReason, p.DegradedMessage, p.DegradedSince = c.Reason, c.Message, c.LastTransitionTime.Time
		p.Gray = ParseGray(c.Reason, c.Message)
		if p.Verdict == Reachable {
			p.Verdict = Degraded
		}
	}
	if l := st.Latency; l != nil {
		p.P50, p.P99 = string(l.P50), string(l.P99)
		p.p50, _ = l.P50.Duration()
	}
	if st.LossRatio != "" {
		if f, err := st.LossRatio.Float64(); err == nil {
			p.Loss, p.HasLoss = f, true
		}
	}
	if st.LastObservedTime != nil {
		p.LastObserved = st.LastObservedTime.Time
	}
	if st.FreshUntil != nil {
		p.FreshUntil = st.FreshUntil.Time
	}
	shard := o.Labels[v1alpha1.LabelShard]
	w, known := writers[shard]
	switch {
	case known && !w.Unread:
		// Its writer's Lease says whether it is current, not its age.
		p.Writer = w.Lease
		if !w.Current && !now.IsZero() {
			p.Verdict = Unknown
			p.Reason = ReasonStatusStale
			p.Message = "its writer's " + w.Why + " (" + w.Lease + "): nothing keeps this status current"
		}
	case st.FreshUntil != nil && !now.IsZero() && now.After(p.FreshUntil):
		// A status its writer did not rewrite in time says nothing current: its writer
		// stopped, lost the pair, or had no write budget for it.
		p.Verdict = Unknown
		p.Reason = ReasonStatusStale
		p.Message = "status not rewritten since " + p.LastObserved.UTC().Format(time.RFC3339) +
			"; its writer rewrites a current status before " + p.FreshUntil.UTC().Format(time.RFC3339)
	case st.FreshUntil == nil && !known && len(writers) > 0 && !now.IsZero():
		// Written without a heartbeat, for a writer's Lease to keep current, and no
		// summary names that writer now.
		p.Verdict = Unknown
		p.Reason = ReasonStatusStale
		p.Message = "no writer's NetworkHealthSummary names its shard (" + cmp.Or(shard, "unsharded") +
			") and it carries no freshUntil: nothing keeps this status current"
	}
	if len(st.Outages) > 0 && st.Outages[0].End == nil {
		p.OutageSince = st.Outages[0].Start.Time
	}
	return p
}

// NodeIndex is the row and column of a node (false when the model has no such node).
func (m *Model) NodeIndex(name string) (int, bool) {
	i, ok := m.nodeIndex[name]
	return i, ok
}

// Cell is the cell of (observer node, target node), nil when no object is in it.
func (m *Model) Cell(observer, target string) *Cell {
	r, ok1 := m.nodeIndex[observer]
	c, ok2 := m.nodeIndex[target]
	if !ok1 || !ok2 {
		return nil
	}
	if i, ok := m.cellIndex[r*len(m.Nodes)+c]; ok {
		return &m.Cells[i]
	}
	return nil
}

// naturalCompare orders strings with digit runs compared as numbers: node-2 < node-10.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
