// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpolicy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// gen builds random but valid-looking policies and paths from a byte stream (the fuzzer's
// input) or a seeded generator.
type gen struct{ next func(n int) int }

var (
	genNamespaces = []string{"a", "b", "c"}
	genKeys       = []string{"app", "role", "tier"}
	genValues     = []string{"x", "y", ""}
	genCIDRs      = []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "fd00::/8", "0.0.0.0/0", "10.1.2.3/32"}
	genProtocols  = []Protocol{TCP, UDP, SCTP, None}
)

func (g gen) labels() map[string]string {
	m := map[string]string{}
	for range g.next(3) {
		m[genKeys[g.next(len(genKeys))]] = genValues[g.next(len(genValues))]
	}
	return m
}

func (g gen) selector() *metav1.LabelSelector {
	s := &metav1.LabelSelector{}
	if g.next(2) == 0 {
		s.MatchLabels = g.labels()
	}
	if g.next(3) == 0 {
		ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
		op := ops[g.next(len(ops))]
		r := metav1.LabelSelectorRequirement{Key: genKeys[g.next(len(genKeys))], Operator: op}
		if op == metav1.LabelSelectorOpIn || op == metav1.LabelSelectorOpNotIn {
			r.Values = []string{genValues[g.next(2)]}
		}
		s.MatchExpressions = append(s.MatchExpressions, r)
	}
	return s
}

func (g gen) peers() []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for range g.next(3) {
		var p networkingv1.NetworkPolicyPeer
		switch g.next(4) {
		case 0:
			p.IPBlock = &networkingv1.IPBlock{CIDR: genCIDRs[g.next(len(genCIDRs))]}
			if g.next(2) == 0 {
				p.IPBlock.Except = []string{genCIDRs[g.next(len(genCIDRs))]}
			}
		case 1:
			p.PodSelector = g.selector()
		case 2:
			p.NamespaceSelector = g.selector()
		default:
			p.PodSelector, p.NamespaceSelector = g.selector(), g.selector()
		}
		out = append(out, p)
	}
	return out
}

func (g gen) ports() []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for range g.next(3) {
		proto := []string{"TCP", "UDP", "SCTP"}[g.next(3)]
		p := networkingv1.NetworkPolicyPort{Protocol: (*corev1.Protocol)(&proto)}
		switch g.next(4) {
		case 0:
			v := intstr.FromInt32(int32(79 + g.next(3)))
			p.Port = &v
		case 1:
			v := intstr.FromString([]string{"http", "db"}[g.next(2)])
			p.Port = &v
		case 2:
			v := intstr.FromInt32(80)
			end := int32(80 + g.next(5))
			p.Port, p.EndPort = &v, &end
		}
		out = append(out, p)
	}
	return out
}

func (g gen) policy(i int) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: genNamespaces[g.next(len(genNamespaces))], Name: fmt.Sprintf("p%d", i)}}
	np.Spec.PodSelector = *g.selector()
	for range g.next(3) {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: g.peers(), Ports: g.ports()})
	}
	for range g.next(3) {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: g.peers(), Ports: g.ports()})
	}
	switch g.next(4) {
	case 0:
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	case 1:
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	case 2:
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	}
	return np
}

func (g gen) end() End {
	ips := []string{"10.1.2.3", "10.1.9.9", "fd00::5", "192.0.2.1"}
	e := End{IP: netip.MustParseAddr(ips[g.next(len(ips))])}
	switch g.next(3) {
	case 0:
		e.External = true
	case 1:
		e.Pod = &Pod{Namespace: genNamespaces[g.next(len(genNamespaces))], Labels: g.labels(), IPs: []netip.Addr{e.IP},
			KnownPorts: g.next(2) == 0, HostNetwork: g.next(8) == 0,
			Ports: []ContainerPort{{Name: "http", Number: 80, Protocol: TCP}, {Name: "db", Number: 81, Protocol: UDP}}}
		if g.next(2) == 0 {
			e.IP = netip.Addr{} // the source's address comes from its pod
		}
	}
	return e
}

func (g gen) path() Path {
	return Path{Source: g.end(), Destination: g.end(), Port: int32(79 + g.next(4)), Protocol: genProtocols[g.next(len(genProtocols))]}
}

// checkDecision asserts what must hold of every decision.
func checkDecision(t *testing.T, ix *Index, p Path, d Decision) {
	t.Helper()
	switch d.Verdict {
	case Denied:
		if len(d.Denials) == 0 {
			t.Fatalf("Denied without a policy: %+v", p)
		}
		if d.Message() == "" {
			t.Fatal("Denied without a message")
		}
	case Unknown:
		if d.Why == "" {
			t.Fatalf("Unknown without a why: %+v", p)
		}
		if len(d.Denials) != 0 {
			t.Fatal("Unknown with denials")
		}
	case Allowed:
		if len(d.Denials) != 0 || d.Why != "" {
			t.Fatal("Allowed with denials or a why")
		}
	}
	// Admitting everything in both directions in every namespace denies nothing.
	open := NewIndex()
	ix.mu.RLock()
	for ns, l := range ix.nsLabels {
		open.SetNamespace(ns, l)
	}
	for _, list := range ix.byNS {
		for _, pol := range list {
			open.SetPolicy(pol)
		}
	}
	ix.mu.RUnlock()
	for _, ns := range genNamespaces {
		open.SetPolicy(Compile(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "zz-allow-all"},
			Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}, Egress: []networkingv1.NetworkPolicyEgressRule{{}}}}))
	}
	if od := open.Evaluate(p); od.Verdict == Denied {
		t.Fatalf("allow-all policies everywhere, still denied: %+v by %v", p, od.Denials)
	}
}

func indexOf(g gen, n int) *Index {
	ix := NewIndex()
	for i, ns := range genNamespaces {
		if i < 2 { // namespace c stays unknown
			ix.SetNamespace(ns, g.labels())
		}
	}
	for i := range n {
		ix.SetPolicy(Compile(g.policy(i)))
	}
	return ix
}

func TestEvaluateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	g := gen{next: func(n int) int { return r.IntN(n) }}
	counts := map[Verdict]int{}
	for range 300 {
		ix := indexOf(g, 1+g.next(6))
		for range 20 {
			p := g.path()
			d := ix.Evaluate(p)
			counts[d.Verdict]++
			checkDecision(t, ix, p, d)
		}
	}
	// The generator reaches every verdict (a property test that never denies proves little).
	for _, v := range []Verdict{Allowed, Denied, Unknown} {
		if counts[v] == 0 {
			t.Errorf("no %v among %v", v, counts)
		}
	}
}

func FuzzEvaluate(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("netpulse network policy fuzz seed"))
	f.Fuzz(func(t *testing.T, data []byte) {
		i := 0
		g := gen{next: func(n int) int {
			if i >= len(data) {
				return 0
			}
			i++
			return int(data[i-1]) % n
		}}
		ix := indexOf(g, 1+g.next(4))
		p := g.path()
		checkDecision(t, ix, p, ix.Evaluate(p))
	})
}

// benchIndex is 1,000 policies over 100 namespaces (10 each, selecting by app label,
// admitting from two apps on two ports), and 1,000 namespaces.
func benchIndex(nsCount, perNS int) *Index {
	ix := NewIndex()
	for n := range 1000 {
		ix.SetNamespace(fmt.Sprintf("ns-%d", n), map[string]string{"kubernetes.io/metadata.name": fmt.Sprintf("ns-%d", n), "team": fmt.Sprintf("t%d", n%20)})
	}
	for n := range nsCount {
		for i := range perNS {
			np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", n), Name: fmt.Sprintf("pol-%d", i)}}
			np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", i)}}
			p80, p443 := intstr.FromInt32(80), intstr.FromInt32(443)
			np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", (i+1)%perNS)}}},
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "t1"}}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24", Except: []string{"192.0.2.0/28"}}},
				},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &p80}, {Port: &p443}},
			}}
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &p443}}}}
			ix.SetPolicy(Compile(np))
		}
	}
	return ix
}

func benchPath(perNS int) Path {
	// A path denied on ingress: the last policy's pod, from a pod no rule admits, on a
	// port it does not list; every policy of the namespace is looked at.
	src := &Pod{Namespace: "ns-0", Labels: map[string]string{"app": "other"}, IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
	dst := &Pod{Namespace: "ns-0", Labels: map[string]string{"app": fmt.Sprintf("app-%d", perNS-1)}, IPs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}
	return Path{Source: End{Pod: src}, Destination: End{Pod: dst, IP: dst.IPs[0]}, Port: 8080, Protocol: TCP}
}

// BenchmarkEvaluate: one path's evaluation with 1,000 policies in the index, spread over
// 100 namespaces (10 in the path's namespace) and all in the path's namespace.
func BenchmarkEvaluate(b *testing.B) {
	for _, c := range []struct {
		name          string
		nsCount, perN int
	}{{"1000policies_10per_namespace", 100, 10}, {"1000policies_in_one_namespace", 1, 1000}} {
		b.Run(c.name, func(b *testing.B) {
			ix := benchIndex(c.nsCount, c.perN)
			p := benchPath(c.perN)
			if d := ix.Evaluate(p); d.Verdict != Denied {
				b.Fatalf("want denied, got %v %s", d.Verdict, d.Why)
			}
			b.ReportAllocs()
			for b.Loop() {
				ix.Evaluate(p)
			}
		})
	}
}

// BenchmarkIndexMemory: the heap an index of 1,000 policies (100 namespaces) and 1,000
// namespaces' labels holds, in all.
func BenchmarkIndexMemory(b *testing.B) {
	var keep *Index
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		keep = benchIndex(100, 10)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc), "heap-bytes/index")
	}
	runtime.KeepAlive(keep)
}
