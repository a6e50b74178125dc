// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpolicy

import (
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Pod is what an evaluation needs of a pod.
type Pod struct {
	Namespace string
	Labels    map[string]string
	// IPs are status.podIPs.
	IPs []netip.Addr
	// Ports are the containers' ports (to resolve named ports); KnownPorts says they were
	// read (false: a named port reads Unknown).
	Ports      []ContainerPort
	KnownPorts bool
	// HostNetwork: the pod uses its node's network; whether policies apply to it is
	// implementation-defined, so a side it is on reads Unknown when a policy selects it.
	HostNetwork bool
}

// ContainerPort is one named container port.
type ContainerPort struct {
	Name     string
	Number   int32
	Protocol Protocol
}

// End is one end of a path: a known pod, an address known to be no pod (External), or an
// address whose owner is not known.
type End struct {
	Pod      *Pod
	IP       netip.Addr
	External bool
}

// Path is what is evaluated: traffic from Source to Destination, to Port over Protocol
// (Port 0 with None for ICMP).
type Path struct {
	Source, Destination End
	Port                int32
	Protocol            Protocol
}

// Verdict is an evaluation's answer.
type Verdict int

// Verdicts.
const (
	Unknown Verdict = iota
	Allowed
	Denied
)

func (v Verdict) String() string {
	switch v {
	case Allowed:
		return "Allowed"
	case Denied:
		return "Denied"
	}
	return "Unknown"
}

// Direction is the side a policy isolates.
type Direction string

// Directions.
const (
	Ingress Direction = "ingress" // of the destination
	Egress  Direction = "egress"  // of the source
)

// Denial is one policy that isolates a pod of the path in Direction and admits nothing
// for it.
type Denial struct {
	Policy    Ref
	Direction Direction
}

// Decision is an evaluation's result.
type Decision struct {
	Verdict Verdict
	// Denials: with Denied, the policies isolating the denying side(s), egress first, each
	// side's sorted by name.
	Denials []Denial
	// Why: with Unknown, what was not known.
	Why string
}

// Message describes a denial for humans: "denied by NetworkPolicy ns/a (ingress of the
// destination)". Empty unless Denied.
func (d Decision) Message() string {
	if d.Verdict != Denied {
		return ""
	}
	var b strings.Builder
	b.WriteString("denied by NetworkPolic")
	if len(d.Denials) == 1 {
		b.WriteString("y ")
	} else {
		b.WriteString("ies ")
	}
	for i, dn := range d.Denials {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(dn.Policy.String())
		if i == len(d.Denials)-1 || d.Denials[i+1].Direction != dn.Direction {
			if dn.Direction == Ingress {
				b.WriteString(" (ingress of the destination)")
			} else {
				b.WriteString(" (egress of the source)")
			}
		}
	}
	return b.String()
}

// All combines the decisions of paths of which the traffic takes one, unknown which (a
// Service's endpoints): Denied when every one is denied, with every policy named once
// (egress first, then by name); Allowed when one is allowed; Unknown otherwise, and for no
// decision at all.
func All(ds ...Decision) Decision {
	if len(ds) == 0 {
		return Decision{Verdict: Unknown, Why: "no path"}
	}
	var out Decision
	out.Verdict = Denied
	seen := map[Denial]bool{}
	for _, d := range ds {
		switch d.Verdict {
		case Allowed:
			return Decision{Verdict: Allowed}
		case Unknown:
			if out.Verdict != Unknown {
				out = Decision{Verdict: Unknown, Why: d.Why}
			}
		case Denied:
			if out.Verdict == Denied {
				for _, dn := range d.Denials {
					if !seen[dn] {
						seen[dn] = true
						out.Denials = append(out.Denials, dn)
					}
				}
			}
		}
	}
	if out.Verdict == Denied {
		slices.SortStableFunc(out.Denials, func(a, b Denial) int {
			if a.Direction != b.Direction {
				if a.Direction == Egress {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Policy.String(), b.Policy.String())
		})
	}
	return out
}

// side is one direction's answer.
type side struct {
	v       Verdict
	denials []Denial
	why     string
}

// evaluate is Index.Evaluate under the index's read lock.
func (ix *Index) evaluate(p Path) Decision {
	eg := ix.egress(p)
	in := ix.ingress(p)
	switch {
	case eg.v == Denied || in.v == Denied:
		var d Decision
		d.Verdict = Denied
		if eg.v == Denied {
			d.Denials = append(d.Denials, eg.denials...)
		}
		if in.v == Denied {
			d.Denials = append(d.Denials, in.denials...)
		}
		return d
	case eg.v == Allowed && in.v == Allowed:
		return Decision{Verdict: Allowed}
	case eg.v == Unknown:
		return Decision{Verdict: Unknown, Why: eg.why}
	}
	return Decision{Verdict: Unknown, Why: in.why}
}

// egress: the source's egress isolation.
func (ix *Index) egress(p Path) side {
	src := p.Source.Pod
	if src == nil {
		if p.Source.External {
			return side{v: Allowed} // no pod: no egress policy applies
		}
		return side{why: "the source is no known pod"}
	}
	return ix.direction(Egress, src, p, p.Destination)
}

// ingress: the destination's ingress isolation.
func (ix *Index) ingress(p Path) side {
	dst := p.Destination.Pod
	if dst == nil {
		if p.Destination.External {
			return side{v: Allowed}
		}
		return side{why: "the destination " + addrString(p.Destination.IP) + " is no known pod"}
	}
	return ix.direction(Ingress, dst, p, p.Source)
}

// direction evaluates the isolation of pod (the source for Egress, the destination for
// Ingress) against the other end of the path.
func (ix *Index) direction(dir Direction, pod *Pod, p Path, other End) side {
	var isolating []*Policy
	for _, pol := range ix.byNS[pod.Namespace] {
		if (dir == Ingress && !pol.Ingress) || (dir == Egress && !pol.Egress) {
			continue
		}
		if pol.Invalid != "" {
			return side{why: "NetworkPolicy " + pol.Ref.String() + " could not be read: " + pol.Invalid}
		}
		if pol.Selector.Matches(labels.Set(pod.Labels)) {
			isolating = append(isolating, pol)
		}
	}
	if len(isolating) == 0 {
		return side{v: Allowed}
	}
	if pod.HostNetwork {
		return side{why: "a host-network pod (whether policies apply is implementation-defined)"}
	}
	unknown := ""
	for _, pol := range isolating {
		rules := pol.IngressRules
		if dir == Egress {
			rules = pol.EgressRules
		}
		for i := range rules {
			switch v, why := ix.ruleAdmits(&rules[i], pol.Namespace, p, other); v {
			case Allowed:
				return side{v: Allowed}
			case Unknown:
				if unknown == "" {
					unknown = why
				}
			}
		}
	}
	if unknown != "" {
		return side{why: unknown}
	}
	s := side{v: Denied}
	for _, pol := range isolating {
		s.denials = append(s.denials, Denial{Policy: pol.Ref, Direction: dir})
	}
	slices.SortFunc(s.denials, func(a, b Denial) int { return strings.Compare(a.Policy.String(), b.Policy.String()) })
	return s
}

// and3 is three-valued AND (Allowed as true, Denied as false).
func and3(a, b Verdict) Verdict {
	switch {
	case a == Denied || b == Denied:
		return Denied
	case a == Allowed && b == Allowed:
		return Allowed
	}
	return Unknown
}

// ruleAdmits says whether rule (of a policy in namespace ns) admits the path, whose other
// end (the source for an ingress rule, the destination for an egress one) is other.
func (ix *Index) ruleAdmits(r *Rule, ns string, p Path, other End) (Verdict, string) {
	ports, whyPorts := portsAdmit(r.Ports, p)
	if ports == Denied {
		return Denied, ""
	}
	peers, whyPeers := ix.peersAdmit(r.Peers, ns, p, other)
	v := and3(ports, peers)
	if v == Unknown {
		if whyPorts != "" {
			return v, whyPorts
		}
		return v, whyPeers
	}
	return v, ""
}

// portsAdmit: does one of ports admit the path's port and protocol? Named ports resolve
// against the destination pod's container ports.
func portsAdmit(ports []Port, p Path) (Verdict, string) {
	if len(ports) == 0 {
		return Allowed, ""
	}
	if p.Protocol == None {
		return Denied, "" // a rule that lists ports admits no ICMP
	}
	out, why := Denied, ""
	for _, po := range ports {
		if po.Protocol != p.Protocol {
			continue
		}
		switch {
		case po.Name != "":
			dst := p.Destination.Pod
			if dst == nil || !dst.KnownPorts {
				out, why = Unknown, "the named port "+po.Name+" (the destination's container ports are not known)"
				continue
			}
			for _, cp := range dst.Ports {
				if cp.Name == po.Name && cp.Protocol == po.Protocol && cp.Number == p.Port {
					return Allowed, ""
				}
			}
		case po.Number == 0:
			return Allowed, "" // every port of the protocol
		case po.EndPort != 0:
			if p.Port >= po.Number && p.Port <= po.EndPort {
				return Allowed, ""
			}
		case po.Number == p.Port:
			return Allowed, ""
		}
	}
	return out, why
}

// peersAdmit: does one of peers (of a policy in namespace ns) match other?
func (ix *Index) peersAdmit(peers []Peer, ns string, p Path, other End) (Verdict, string) {
	if len(peers) == 0 {
		return Allowed, ""
	}
	out, why := Denied, ""
	for i := range peers {
		v, w := ix.peerMatches(&peers[i], ns, p, other)
		switch v {
		case Allowed:
			return Allowed, ""
		case Unknown:
			if out != Unknown {
				out, why = Unknown, w
			}
		}
	}
	return out, why
}

func (ix *Index) peerMatches(pe *Peer, ns string, p Path, other End) (Verdict, string) {
	if pe.Block != nil {
		ip := endIP(other, p)
		if !ip.IsValid() {
			return Unknown, "the address of the other end is not known"
		}
		// ipBlock matched against a pod's address is implementation-defined; a match is
		// read as admitted (in favour of Allowed), a miss as not.
		if pe.Block.Contains(ip) {
			return Allowed, ""
		}
		return Denied, ""
	}
	if other.Pod == nil {
		if other.External {
			return Denied, "" // selectors select pods only
		}
		return Unknown, "the other end " + addrString(other.IP) + " is no known pod"
	}
	if pe.Namespaces == nil {
		if other.Pod.Namespace != ns {
			return Denied, ""
		}
	} else if !pe.Namespaces.Empty() { // namespaceSelector {}: every namespace, labels or not
		nsLabels, ok := ix.nsLabels[other.Pod.Namespace]
		if !ok {
			return Unknown, "namespace " + other.Pod.Namespace + " is not known"
		}
		if !pe.Namespaces.Matches(labels.Set(nsLabels)) {
			return Denied, ""
		}
	}
	if pe.Pods != nil && !pe.Pods.Matches(labels.Set(other.Pod.Labels)) {
		return Denied, ""
	}
	return Allowed, ""
}

// endIP is the address of e that the path uses: its IP, or the pod's address of the
// family of the path's other address.
func endIP(e End, p Path) netip.Addr {
	if e.IP.IsValid() {
		return e.IP.Unmap()
	}
	if e.Pod == nil || len(e.Pod.IPs) == 0 {
		return netip.Addr{}
	}
	want := p.Destination.IP
	if !want.IsValid() {
		want = p.Source.IP
	}
	for _, a := range e.Pod.IPs {
		if !want.IsValid() || a.Unmap().Is4() == want.Unmap().Is4() {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return "(no address)"
	}
	return a.String()
}
