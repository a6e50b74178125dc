// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpolicy

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Protocol is a path's transport protocol: TCP, UDP, SCTP, or None (ICMP: no port).
type Protocol string

// Protocols.
const (
	TCP  Protocol = Protocol(corev1.ProtocolTCP)
	UDP  Protocol = Protocol(corev1.ProtocolUDP)
	SCTP Protocol = Protocol(corev1.ProtocolSCTP)
	// None is a path without a port (ICMP): a rule that lists ports never admits it.
	None Protocol = ""
)

// Ref names a policy.
type Ref struct{ Namespace, Name string }

func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// Policy is a NetworkPolicy compiled for evaluation (Compile): only what the semantics
// need, selectors parsed once.
type Policy struct {
	Ref
	// Selector selects the pods of Namespace the policy applies to.
	Selector labels.Selector
	// Ingress, Egress: the policy isolates its pods in that direction (policyTypes, or
	// their defaults).
	Ingress, Egress bool
	IngressRules    []Rule
	EgressRules     []Rule
	// Invalid: the object could not be compiled (an API server validates policies, so
	// only a hand-fed object gets here); an evaluation it takes part in reads Unknown.
	Invalid string
}

// Rule is one ingress or egress rule: traffic is admitted when it matches one of Peers
// (none: every peer) on one of Ports (none: every port).
type Rule struct {
	Peers []Peer
	Ports []Port
}

// Peer is one from/to entry.
type Peer struct {
	// Pods selects pods (nil: the entry has no podSelector).
	Pods labels.Selector
	// Namespaces selects namespaces (nil: no namespaceSelector, i.e. the policy's own).
	Namespaces labels.Selector
	// Block is set for an ipBlock entry.
	Block *Block
}

// Block is an ipBlock: CIDR minus Except.
type Block struct {
	CIDR   netip.Prefix
	Except []netip.Prefix
}

// Contains says whether a is in the block.
func (b *Block) Contains(a netip.Addr) bool {
	a = a.Unmap()
	if !b.CIDR.Contains(a) {
		return false
	}
	for _, e := range b.Except {
		if e.Contains(a) {
			return false
		}
	}
	return true
}

// Port is one ports entry.
type Port struct {
	Protocol Protocol // TCP when the entry does not say
	// Number (and EndPort for a range), or Name (a named port of the destination pod);
	// neither: every port of Protocol.
	Number, EndPort int32
	Name            string
}

// Compile turns a NetworkPolicy into a Policy. It never fails: a part it cannot read makes
// the Policy Invalid (evaluations it takes part in read Unknown).
func Compile(np *networkingv1.NetworkPolicy) *Policy {
	p := &Policy{Ref: Ref{np.Namespace, np.Name}}
	fail := func(format string, a ...any) *Policy {
		p.Invalid = fmt.Sprintf(format, a...)
		p.Selector = labels.Nothing()
		return p
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return fail("podSelector: %v", err)
	}
	p.Selector = sel
	// policyTypes: as given; when empty, Ingress always and Egress when there are egress
	// rules (the API server's defaulting, repeated for objects that did not go through it).
	if len(np.Spec.PolicyTypes) == 0 {
		p.Ingress, p.Egress = true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			p.Ingress = true
		case networkingv1.PolicyTypeEgress:
			p.Egress = true
		default:
			return fail("policyTypes: %q", t)
		}
	}
	for i, r := range np.Spec.Ingress {
		cr, err := compileRule(r.From, r.Ports)
		if err != nil {
			return fail("ingress[%d]: %v", i, err)
		}
		p.IngressRules = append(p.IngressRules, cr)
	}
	for i, r := range np.Spec.Egress {
		cr, err := compileRule(r.To, r.Ports)
		if err != nil {
			return fail("egress[%d]: %v", i, err)
		}
		p.EgressRules = append(p.EgressRules, cr)
	}
	return p
}

func compileRule(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) (Rule, error) {
	var r Rule
	for _, pe := range peers {
		var cp Peer
		if pe.IPBlock != nil {
			if pe.PodSelector != nil || pe.NamespaceSelector != nil {
				return r, fmt.Errorf("a peer with ipBlock and a selector")
			}
			cidr, err := netip.ParsePrefix(pe.IPBlock.CIDR)
			if err != nil {
				return r, fmt.Errorf("ipBlock.cidr: %w", err)
			}
			b := &Block{CIDR: cidr.Masked()}
			for _, e := range pe.IPBlock.Except {
				ep, err := netip.ParsePrefix(e)
				if err != nil {
					return r, fmt.Errorf("ipBlock.except: %w", err)
				}
				b.Except = append(b.Except, ep.Masked())
			}
			cp.Block = b
			r.Peers = append(r.Peers, cp)
			continue
		}
		if pe.PodSelector == nil && pe.NamespaceSelector == nil {
			return r, fmt.Errorf("an empty peer")
		}
		if pe.PodSelector != nil {
			s, err := metav1.LabelSelectorAsSelector(pe.PodSelector)
			if err != nil {
				return r, fmt.Errorf("podSelector: %w", err)
			}
			cp.Pods = s
		}
		if pe.NamespaceSelector != nil {
			s, err := metav1.LabelSelectorAsSelector(pe.NamespaceSelector)
			if err != nil {
				return r, fmt.Errorf("namespaceSelector: %w", err)
			}
			cp.Namespaces = s
		}
		r.Peers = append(r.Peers, cp)
	}
	for _, po := range ports {
		cp := Port{Protocol: TCP}
		if po.Protocol != nil {
			cp.Protocol = Protocol(*po.Protocol)
		}
		if po.Port != nil {
			if po.Port.IntVal != 0 || po.Port.StrVal == "" {
				cp.Number = po.Port.IntVal
			} else {
				cp.Name = po.Port.StrVal
			}
		}
		if po.EndPort != nil {
			if cp.Number == 0 {
				return r, fmt.Errorf("endPort without a numeric port")
			}
			cp.EndPort = *po.EndPort
		}
		r.Ports = append(r.Ports, cp)
	}
	return r, nil
}
