// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// Sides of a gray verdict, as the pod_network_health exporter's Degraded messages name
// them: the target's node (most of its observers see it), the observer's own node (it sees
// it towards most of its targets), this path alone, or the link between the observer's
// zone and the target's (echoes between the zones lost while each zone is clean inside:
// no node blamed).
const (
	SideTarget   = "target"
	SideObserver = "observer"
	SidePath     = "path"
	SideZone     = "zone"
)

// IsGray reports whether a Degraded reason is a gray verdict (PacketLoss, HighLatency)
// rather than a hard one (MTUBlackHole, AddressFamilyUnreachable).
func IsGray(reason string) bool {
	return reason == v1alpha1.ReasonPacketLoss || reason == v1alpha1.ReasonHighLatency
}

// degradedOrder orders Degraded reasons for a cell: the hard failures (an address family,
// full-size packets) first, then loss, then latency, then any other writer's reasons.
func degradedOrder(reason string) int {
	switch reason {
	case v1alpha1.ReasonAddressFamilyUnreachable:
		return 0
	case v1alpha1.ReasonMTUBlackHole:
		return 1
	case v1alpha1.ReasonPacketLoss:
		return 2
	case v1alpha1.ReasonHighLatency:
		return 3
	}
	return 4
}

// sortDegraded orders Degraded reasons: hard failures first, then loss, then latency.
func sortDegraded(rs []string) {
	slices.SortFunc(rs, func(a, b string) int {
		return cmp.Or(cmp.Compare(degradedOrder(a), degradedOrder(b)), strings.Compare(a, b))
	})
}

// Gray is a pair's gray verdict read back from its Degraded condition: the reason, the
// side and node the exporter blamed, and the figures of the message.
type Gray struct {
	Reason string `json:"reason"`
	// Side is SideTarget, SideObserver, SidePath, SideZone, or "" when the message does
	// not say (another writer's words).
	Side string `json:"side,omitempty"`
	// Node is the node the message blames (empty for a path, a zone pair, or when unknown).
	Node string `json:"node,omitempty"`
	// FromZone and ToZone are SideZone's zones: the observers' and the targets'.
	FromZone string `json:"fromZone,omitempty"`
	ToZone   string `json:"toZone,omitempty"`
	// Figures is the message after its side: the loss with its interval, echoes and window,
	// or the RTT against the baseline (the whole message when the side is unknown).
	Figures string `json:"figures"`

	// score orders the figures of one reason and side: the loss in %, the RTT p50 in
	// seconds, or the share of slow rounds in %.
	score float64
}

// grayPrefixes are the beginnings of the exporter's gray messages
// (exporter/podnetworkhealthexporter/internal/plan GrayMessage), but for the zone pair's
// (grayZonePrefixes).
var grayPrefixes = []struct {
	reason, prefix, side string
	node                 bool
}{
	{v1alpha1.ReasonPacketLoss, "packet loss at the target's node ", SideTarget, true},
	{v1alpha1.ReasonPacketLoss, "packet loss at the observer's own node ", SideObserver, true},
	{v1alpha1.ReasonPacketLoss, "packet loss on this path alone", SidePath, false},
	{v1alpha1.ReasonHighLatency, "high latency at the target's node ", SideTarget, true},
	{v1alpha1.ReasonHighLatency, "high latency at the observer's own node ", SideObserver, true},
	{v1alpha1.ReasonHighLatency, "high latency on this path alone", SidePath, false},
}

// grayZonePrefixes begin the exporter's messages for a zone pair's loss and latency:
// "packet loss between zones A and B: 5.2 % (95 % CI ...) of 1440 echoes over 2m0s, from 4
// observer nodes in A towards 4 target nodes in B", "high latency between zones A and B:
// 85 % of the recent rounds slow ..." (A the observers' zone, B the targets').
var grayZonePrefixes = map[string]string{
	v1alpha1.ReasonPacketLoss:  "packet loss between zones ",
	v1alpha1.ReasonHighLatency: "high latency between zones ",
}

// ParseGray reads a gray Degraded condition (reason PacketLoss or HighLatency) back into
// its side, blamed node (or zone pair) and figures. Nil for any other reason.
func ParseGray(reason, message string) *Gray {
	if !IsGray(reason) {
		return nil
	}
	g := &Gray{Reason: reason, Figures: message}
	if parseGrayZone(g, message) {
		g.score = grayScore(g)
		return g
	}
	for _, p := range grayPrefixes {
		if p.reason != reason || !strings.HasPrefix(message, p.prefix) {
			continue
		}
		rest := message[len(p.prefix):]
		if p.node {
			node, figures, ok := strings.Cut(rest, ": ")
			if !ok || node == "" || strings.ContainsAny(node, " ,") {
				break
			}
			g.Node, rest = node, figures
		} else {
			figures, ok := strings.CutPrefix(rest, ": ")
			if !ok {
				break
			}
			rest = figures
		}
		g.Side, g.Figures = p.side, rest
		break
	}
	g.score = grayScore(g)
	return g
}

// parseGrayZone reads a zone pair's loss message into g: false when message is not one.
// Zone names are label values (no spaces), so "A and B" splits at its only " and ".
func parseGrayZone(g *Gray, message string) bool {
	rest, ok := strings.CutPrefix(message, grayZonePrefixes[g.Reason])
	if !ok || grayZonePrefixes[g.Reason] == "" {
		return false
	}
	zones, figures, ok := strings.Cut(rest, ": ")
	if !ok {
		return false
	}
	from, to, ok := strings.Cut(zones, " and ")
	if !ok || from == "" || to == "" || strings.ContainsAny(from+to, " ,") {
		return false
	}
	g.Side, g.FromZone, g.ToZone, g.Figures = SideZone, from, to, figures
	return true
}

// grayScore is the leading figure: "5.2 % (95 % CI ...", "RTT p50 20.2ms against ...",
// "85 % of its recent rounds ...".
func grayScore(g *Gray) float64 {
	f := g.Figures
	if rest, ok := strings.CutPrefix(f, "RTT p50 "); ok {
		tok, _, _ := strings.Cut(rest, " ")
		if d, err := time.ParseDuration(tok); err == nil {
			return d.Seconds()
		}
		return 0
	}
	tok, _, _ := strings.Cut(f, " ")
	v, err := strconv.ParseFloat(strings.TrimSuffix(tok, "%"), 64)
	if err != nil {
		return 0
	}
	return v
}

// Directions of a GrayFinding: the pairs towards the explained node or pod, or those it
// observes.
const (
	Towards  = "towards"
	Observes = "observes"
)

// MaxFindingPairs bounds GrayFinding.PairNames.
const MaxFindingPairs = 10

// GrayFinding is one gray verdict (a reason and a side) on the pairs towards the explained
// node or pod, or on those it observes, with the figures of the worst of them.
type GrayFinding struct {
	Reason string `json:"reason"`
	// Side is the messages' side (SideTarget, SideObserver, SidePath, SideZone, "").
	Side string `json:"side"`
	// FromZone and ToZone: SideZone's zone pair (a finding per zone pair).
	FromZone string `json:"fromZone,omitempty"`
	ToZone   string `json:"toZone,omitempty"`
	// Direction is Towards (pairs towards it) or Observes (pairs it observes).
	Direction string `json:"direction"`
	// Blamed: the exporter blames the explained node (a pod: its node) — as a target for
	// pairs towards it, as an observer for pairs it observes.
	Blamed bool `json:"blamed"`
	// Nodes are the nodes the messages blame (distinct; none for a path or a zone pair).
	Nodes []string `json:"nodes"`
	// Peers are the nodes at the other end of the pairs (their observers, or their
	// targets), distinct.
	Peers []string `json:"peers"`
	// Pairs counts the pairs; PairNames names up to MaxFindingPairs of them
	// ("namespace/name").
	Pairs     int      `json:"pairs"`
	PairNames []string `json:"pairNames"`
	// Quoted is the pair whose Degraded message is quoted: the worst figures (highest loss,
	// RTT or share of slow rounds), the most recently written on a tie.
	Quoted  string `json:"quoted"`
	Message string `json:"message"`
	Figures string `json:"figures"`
	// Since is the earliest Degraded transition among the pairs.
	Since time.Time `json:"since,omitzero"`

	score  float64
	quoted time.Time
}

// grayFindings groups the gray pairs among towards and observes (indexes of m.Pairs) by
// reason, side and direction. node is the explained node (a pod's node; may be empty).
func (m *Model) grayFindings(node string, towards, observes []int) []GrayFinding {
	type key struct{ reason, side, dir, fromZone, toZone string }
	byKey := map[key]*GrayFinding{}
	add := func(dir string, pis []int) {
		for _, pi := range pis {
			p := &m.Pairs[pi]
			g := p.Gray
			if g == nil {
				continue
			}
			k := key{g.Reason, g.Side, dir, g.FromZone, g.ToZone}
			f := byKey[k]
			if f == nil {
				f = &GrayFinding{Reason: g.Reason, Side: g.Side, FromZone: g.FromZone, ToZone: g.ToZone, Direction: dir, score: -1}
				byKey[k] = f
			}
			f.Pairs++
			if len(f.PairNames) < MaxFindingPairs {
				f.PairNames = append(f.PairNames, p.Namespace+"/"+p.Name)
			}
			if g.Node != "" && !slices.Contains(f.Nodes, g.Node) {
				f.Nodes = append(f.Nodes, g.Node)
			}
			peer := p.ObserverNode
			if dir == Observes {
				peer = p.TargetNode
				if peer == "" {
					peer = p.Target
				}
			}
			if peer != "" && !slices.Contains(f.Peers, peer) {
				f.Peers = append(f.Peers, peer)
			}
			if !p.DegradedSince.IsZero() && (f.Since.IsZero() || p.DegradedSince.Before(f.Since)) {
				f.Since = p.DegradedSince
			}
			if g.score > f.score || g.score == f.score && p.LastObserved.After(f.quoted) {
				f.score, f.quoted = g.score, p.LastObserved
				f.Quoted, f.Message, f.Figures = p.Namespace+"/"+p.Name, p.DegradedMessage, g.Figures
			}
		}
	}
	add(Towards, towards)
	add(Observes, observes)
	out := make([]GrayFinding, 0, len(byKey))
	for _, f := range byKey {
		switch {
		case f.Direction == Towards && f.Side == SideTarget,
			f.Direction == Observes && f.Side == SideObserver:
			// The blamed node is the one the messages name; a message without a node (another
			// writer's) is read as blaming the side's node.
			f.Blamed = len(f.Nodes) == 0 || node != "" && slices.Contains(f.Nodes, node)
		}
		slices.SortFunc(f.Nodes, naturalCompare)
		slices.SortFunc(f.Peers, naturalCompare)
		if f.Nodes == nil {
			f.Nodes = []string{}
		}
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b GrayFinding) int {
		return cmp.Or(boolOrder(a.Blamed, b.Blamed), cmp.Compare(degradedOrder(a.Reason), degradedOrder(b.Reason)),
			sideOrder(a.Side)-sideOrder(b.Side), strings.Compare(a.Direction, b.Direction),
			strings.Compare(a.FromZone, b.FromZone), strings.Compare(a.ToZone, b.ToZone))
	})
	return out
}

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

func sideOrder(s string) int {
	switch s {
	case SideTarget:
		return 0
	case SideObserver:
		return 1
	case SideZone:
		return 2
	case SidePath:
		return 3
	}
	return 4
}

// zonePairWords names a zone pair's loss as the exporter's message does: "packet loss
// between zones A and B".
func zonePairWords(reason, from, to string) string {
	return grayWords(reason) + " between zones " + from + " and " + to
}

// linkWords is what a zone pair's gray reason says of the link: lossy or slow.
func linkWords(reason string) string {
	if reason == v1alpha1.ReasonHighLatency {
		return "slow"
	}
	return "lossy"
}

// mergeLinkKind joins the links' kinds: "lossy", "slow", or "lossy or slow".
func mergeLinkKind(a, b string) string {
	switch {
	case a == "" || a == b:
		return b
	case strings.Contains(a, b):
		return a
	}
	return "lossy or slow"
}

func grayWords(reason string) string {
	switch reason {
	case v1alpha1.ReasonPacketLoss:
		return "packet loss"
	case v1alpha1.ReasonHighLatency:
		return "high latency"
	}
	return reason
}

// grayLines says, per reason, on which side the explained node is blamed, then each
// finding with its figures and pairs.
func (m *Model) grayLines(e *Explanation) []string {
	if len(e.Gray) == 0 {
		return nil
	}
	var l []string
	it := "it"
	if e.Kind == "Pod" && e.Node != "" {
		it = "its node " + e.Node
	}
	// The verdict per reason: which sides blame it.
	var blames []string
	for _, reason := range []string{v1alpha1.ReasonPacketLoss, v1alpha1.ReasonHighLatency} {
		asTarget, asObserver := false, false
		for _, f := range e.Gray {
			if f.Reason == reason && f.Blamed {
				asTarget = asTarget || f.Direction == Towards
				asObserver = asObserver || f.Direction == Observes
			}
		}
		switch {
		case asTarget && asObserver:
			blames = append(blames, fmt.Sprintf("%s (%s) on both sides: as a target (most of its observers see it) and as an observer (it sees it towards most of its targets)", reason, grayWords(reason)))
		case asTarget:
			blames = append(blames, fmt.Sprintf("%s (%s) on its targets' side: most of its observers see it", reason, grayWords(reason)))
		case asObserver:
			blames = append(blames, fmt.Sprintf("%s (%s) on its own observer side: it sees it towards most of its targets", reason, grayWords(reason)))
		}
	}
	// The links between zones that explain some of its gray pairs: no node is blamed for
	// them, it included.
	var links []string
	onlyLinks, linkKind := true, ""
	for _, f := range e.Gray {
		if f.Side != SideZone {
			onlyLinks = onlyLinks && f.Blamed
			continue
		}
		if w := zonePairWords(f.Reason, f.FromZone, f.ToZone); !slices.Contains(links, w) {
			links = append(links, w)
			linkKind = mergeLinkKind(linkKind, linkWords(f.Reason))
		}
	}
	switch {
	case len(blames) > 0:
		l = append(l, "gray verdict: "+it+" is blamed for "+strings.Join(blames, "; "))
	case len(links) > 0 && onlyLinks:
		l = append(l, "gray verdict: "+it+" is not blamed: "+strings.Join(links, "; ")+" (a "+linkKind+" link between the zones: no node is blamed for it)")
	default:
		l = append(l, "gray verdict: "+it+" is not blamed (the gray pairs below are blamed on other nodes, on single paths or on links between zones)")
	}
	if len(blames) > 0 && len(links) > 0 {
		l = append(l, "also "+strings.Join(links, "; ")+" (a "+linkKind+" link between the zones: no node is blamed for it)")
	}
	for _, f := range e.Gray {
		var s string
		n := fmt.Sprintf("%d pair%s", f.Pairs, plural(f.Pairs))
		peers := "from " + names(f.Peers)
		if f.Direction == Observes {
			peers = "towards " + names(f.Peers)
		}
		switch {
		case f.Side == "":
			s = fmt.Sprintf("%s on %s %s (the message names no side)", grayWords(f.Reason), n, peers)
		case f.Side == SideZone && f.Direction == Towards:
			s = fmt.Sprintf("%s on %s towards %s %s (the link between the zones, neither node blamed)", zonePairWords(f.Reason, f.FromZone, f.ToZone), n, it, peers)
		case f.Side == SideZone:
			s = fmt.Sprintf("%s on %s %s observes, %s (the link between the zones, neither node blamed)", zonePairWords(f.Reason, f.FromZone, f.ToZone), n, it, peers)
		case f.Blamed && f.Direction == Towards:
			s = fmt.Sprintf("%s blamed on %s as a target: %s %s", grayWords(f.Reason), it, n, peers)
		case f.Blamed:
			s = fmt.Sprintf("%s blamed on %s as an observer: %s it observes, %s", grayWords(f.Reason), it, n, peers)
		case f.Side == SidePath && f.Direction == Towards:
			s = fmt.Sprintf("%s on single paths towards %s (neither node blamed): %s %s", grayWords(f.Reason), it, n, peers)
		case f.Side == SidePath:
			s = fmt.Sprintf("%s on single paths %s observes (neither node blamed): %s %s", grayWords(f.Reason), it, n, peers)
		case f.Direction == Towards:
			s = fmt.Sprintf("%s on %s towards %s, blamed on their observers' own nodes%s, not on %s", grayWords(f.Reason), n, it, list(f.Nodes), it)
		default:
			s = fmt.Sprintf("%s on %s %s observes, blamed on their targets' nodes%s, not on %s", grayWords(f.Reason), n, it, list(f.Nodes), it)
		}
		if !f.Since.IsZero() {
			s += ", since " + m.when(f.Since)
		}
		if f.Message != "" {
			s += fmt.Sprintf("; worst (%s): %s", f.Quoted, f.Message)
		}
		l = append(l, s)
	}
	return l
}

// names formats up to five names as "a, b, c"; more as "a, b, c, d, e, +3".
func names(ns []string) string {
	if len(ns) > 5 {
		return fmt.Sprintf("%s, +%d", strings.Join(ns[:5], ", "), len(ns)-5)
	}
	return strings.Join(ns, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// GrayNode is a node the exporter blames for a gray verdict, with the reasons and the
// sides ("PacketLoss target", "HighLatency observer") and how many pairs carry them.
type GrayNode struct {
	Name    string   `json:"name"`
	Reasons []string `json:"reasons"`
	Pairs   int      `json:"pairs"`
}

// grayBlamed lists the nodes among members (nil: any) blamed on the target or the observer
// side by a gray pair, ordered by name.
func (m *Model) grayBlamed(members map[string]bool) []GrayNode {
	by := map[string]*GrayNode{}
	for pi := range m.Pairs {
		p := &m.Pairs[pi]
		g := p.Gray
		if g == nil {
			continue
		}
		node := g.Node
		switch g.Side {
		case SideTarget:
			node = cmp.Or(node, p.TargetNode)
		case SideObserver:
			node = cmp.Or(node, p.ObserverNode)
		default:
			continue
		}
		if node == "" || members != nil && !members[node] {
			continue
		}
		n := by[node]
		if n == nil {
			n = &GrayNode{Name: node}
			by[node] = n
		}
		n.Pairs++
		if r := g.Reason + " " + g.Side; !slices.Contains(n.Reasons, r) {
			n.Reasons = append(n.Reasons, r)
			slices.Sort(n.Reasons)
		}
	}
	out := make([]GrayNode, 0, len(by))
	for _, n := range by {
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b GrayNode) int { return naturalCompare(a.Name, b.Name) })
	return out
}

// GrayNodes lists every node the exporter blames for a gray verdict (on the target or the
// observer side), with the reasons and sides, ordered by name.
func (m *Model) GrayNodes() []GrayNode { return m.grayBlamed(nil) }

// GrayText is a pair's Degraded reason with the side a gray verdict blames: "PacketLoss at
// the target's node node-5", "HighLatency at the observer's own node node-7",
// "PacketLoss on this path alone", "PacketLoss between zones zone-a and zone-b",
// "MTUBlackHole"; empty when not Degraded.
func (p *Pair) GrayText() string {
	g := p.Gray
	if g == nil {
		return p.DegradedReason
	}
	switch g.Side {
	case SideTarget:
		return g.Reason + " at the target's node " + g.Node
	case SideObserver:
		return g.Reason + " at the observer's own node " + g.Node
	case SidePath:
		return g.Reason + " on this path alone"
	case SideZone:
		return g.Reason + " between zones " + g.FromZone + " and " + g.ToZone
	}
	return g.Reason
}

// ZoneLink is an ordered zone pair a gray verdict is blamed on: the observers' zone and
// the targets'.
type ZoneLink struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// DegradedText joins a cell's Degraded reasons, naming the zone pair a PacketLoss is
// blamed on: "MTUBlackHole, PacketLoss between zones zone-a and zone-b".
func DegradedText(reasons []string, zoneLoss *ZoneLink) string {
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = r
		if r == v1alpha1.ReasonPacketLoss && zoneLoss != nil {
			parts[i] = r + " between zones " + zoneLoss.From + " and " + zoneLoss.To
		}
	}
	return strings.Join(parts, ", ")
}

// GrayZonePair is a zone pair the exporter blames a gray verdict on (side zone), read
// from the pairs' objects between the zones: how many carry it and the worst figures.
type GrayZonePair struct {
	ZoneLink
	Reason string `json:"reason"`
	// Pairs counts the objects; Observers and Targets their distinct nodes.
	Pairs     int      `json:"pairs"`
	Observers []string `json:"observers"`
	Targets   []string `json:"targets"`
	// Quoted is the pair whose message is quoted: the worst loss, the most recently written
	// on a tie.
	Quoted  string `json:"quoted"`
	Message string `json:"message"`
	Figures string `json:"figures"`
	// Since is the earliest Degraded transition among the pairs.
	Since time.Time `json:"since,omitzero"`

	score  float64
	quoted time.Time
}

// GrayZonePairs lists the zone pairs the exporter blames a gray verdict on, among the
// pairs' objects, ordered by zones (zone: only those in or out of it; "" any).
func (m *Model) GrayZonePairs(zone string) []GrayZonePair {
	type key struct{ reason, from, to string }
	by := map[key]*GrayZonePair{}
	for pi := range m.Pairs {
		p := &m.Pairs[pi]
		g := p.Gray
		if g == nil || g.Side != SideZone || zone != "" && g.FromZone != zone && g.ToZone != zone {
			continue
		}
		k := key{g.Reason, g.FromZone, g.ToZone}
		z := by[k]
		if z == nil {
			z = &GrayZonePair{ZoneLink: ZoneLink{From: g.FromZone, To: g.ToZone}, Reason: g.Reason, score: -1}
			by[k] = z
		}
		z.Pairs++
		if p.ObserverNode != "" && !slices.Contains(z.Observers, p.ObserverNode) {
			z.Observers = append(z.Observers, p.ObserverNode)
		}
		if p.TargetNode != "" && !slices.Contains(z.Targets, p.TargetNode) {
			z.Targets = append(z.Targets, p.TargetNode)
		}
		if !p.DegradedSince.IsZero() && (z.Since.IsZero() || p.DegradedSince.Before(z.Since)) {
			z.Since = p.DegradedSince
		}
		if g.score > z.score || g.score == z.score && p.LastObserved.After(z.quoted) {
			z.score, z.quoted = g.score, p.LastObserved
			z.Quoted, z.Message, z.Figures = p.Namespace+"/"+p.Name, p.DegradedMessage, g.Figures
		}
	}
	out := make([]GrayZonePair, 0, len(by))
	for _, z := range by {
		slices.SortFunc(z.Observers, naturalCompare)
		slices.SortFunc(z.Targets, naturalCompare)
		out = append(out, *z)
	}
	slices.SortFunc(out, func(a, b GrayZonePair) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To), cmp.Compare(degradedOrder(a.Reason), degradedOrder(b.Reason)))
	})
	return out
}
