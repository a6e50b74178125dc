// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpolicy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// The policies of the Kubernetes documentation's "Network Policies" page
// (kubernetes.io/docs/concepts/services-networking/network-policies/), verbatim but for
// their names where two would clash.
const (
	docTestNetworkPolicy = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: test-network-policy
  namespace: default
spec:
  podSelector:
    matchLabels:
      role: db
  policyTypes:
  - Ingress
  - Egress
  ingress:
  - from:
    - ipBlock:
        cidr: 172.17.0.0/16
        except:
        - 172.17.1.0/24
    - namespaceSelector:
        matchLabels:
          project: myproject
    - podSelector:
        matchLabels:
          role: frontend
    ports:
    - protocol: TCP
      port: 6379
  egress:
  - to:
    - ipBlock:
        cidr: 10.0.0.0/24
    ports:
    - protocol: TCP
      port: 5978
`
	docDefaultDenyIngress = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: default-deny-ingress
spec:
  podSelector: {}
  policyTypes:
  - Ingress
`
	docAllowAllIngress = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: allow-all-ingress
spec:
  podSelector: {}
  ingress:
  - {}
  policyTypes:
  - Ingress
`
	docDefaultDenyEgress = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: default-deny-egress
spec:
  podSelector: {}
  policyTypes:
  - Egress
`
	docAllowAllEgress = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: allow-all-egress
spec:
  podSelector: {}
  egress:
  - {}
  policyTypes:
  - Egress
`
	docDefaultDenyAll = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: default-deny-all
spec:
  podSelector: {}
  policyTypes:
  - Ingress
  - Egress
`
	docMultiPortEgress = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: multi-port-egress
  namespace: default
spec:
  podSelector:
    matchLabels:
      role: db
  policyTypes:
    - Egress
  egress:
    - to:
        - ipBlock:
            cidr: 10.0.0.0/24
      ports:
        - protocol: TCP
          port: 32000
          endPort: 32768
`
	// The documentation's "and" (one peer with both selectors) and "or" (two peers).
	docAnd = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: and, namespace: default}
spec:
  podSelector: {matchLabels: {role: db}}
  ingress:
  - from:
    - namespaceSelector:
        matchLabels:
          user: alice
      podSelector:
        matchLabels:
          role: client
`
	docOr = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: or, namespace: default}
spec:
  podSelector: {matchLabels: {role: db}}
  ingress:
  - from:
    - namespaceSelector:
        matchLabels:
          user: alice
    - podSelector:
        matchLabels:
          role: client
`
)

func policy(t testing.TB, doc string, ns ...string) *Policy {
	t.Helper()
	var np networkingv1.NetworkPolicy
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &np))
	if np.Namespace == "" {
		np.Namespace = "default"
	}
	if len(ns) > 0 {
		np.Namespace = ns[0]
	}
	p := Compile(&np)
	require.Empty(t, p.Invalid)
	return p
}

func index(t testing.TB, pols ...*Policy) *Index {
	ix := NewIndex()
	ix.SetNamespace("default", map[string]string{"kubernetes.io/metadata.name": "default"})
	ix.SetNamespace("myproject", map[string]string{"project": "myproject"})
	ix.SetNamespace("alice", map[string]string{"user": "alice"})
	ix.SetNamespace("bob", map[string]string{"user": "bob"})
	for _, p := range pols {
		ix.SetPolicy(p)
	}
	return ix
}

func pod(ns, ip string, kv ...string) *Pod {
	p := &Pod{Namespace: ns, Labels: map[string]string{}, IPs: []netip.Addr{netip.MustParseAddr(ip)}}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

func pathOf(src *Pod, dst *Pod, port int32, proto Protocol) Path {
	return Path{Source: End{Pod: src}, Destination: End{Pod: dst, IP: dst.IPs[0]}, Port: port, Protocol: proto}
}

var (
	db       = pod("default", "10.1.0.10", "role", "db")
	frontend = pod("default", "10.1.0.11", "role", "frontend")
	web      = pod("default", "10.1.0.12", "role", "web")
	inProj   = pod("myproject", "10.1.1.5", "app", "x")
	aliceCl  = pod("alice", "10.1.2.5", "role", "client")
	aliceX   = pod("alice", "10.1.2.6", "role", "other")
	bobCl    = pod("bob", "10.1.3.5", "role", "client")
	defCl    = pod("default", "10.1.0.13", "role", "client")
)

func TestDocumentationExamples(t *testing.T) {
	tnp := policy(t, docTestNetworkPolicy)
	ext := func(ip string) End { return End{IP: netip.MustParseAddr(ip), External: true} }
	for _, tc := range []struct {
		name    string
		pols    []*Policy
		path    Path
		want    Verdict
		denials []Denial
	}{
		// test-network-policy: ingress to role=db on TCP 6379 from the ipBlock (less
		// except), namespace project=myproject, or role=frontend of default.
		{"frontend to db 6379", []*Policy{tnp}, pathOf(frontend, db, 6379, TCP), Allowed, nil},
		{"frontend to db 80: port not listed", []*Policy{tnp}, pathOf(frontend, db, 80, TCP), Denied,
			[]Denial{{Ref{"default", "test-network-policy"}, Ingress}}},
		{"frontend to db 6379 over UDP", []*Policy{tnp}, pathOf(frontend, db, 6379, UDP), Denied,
			[]Denial{{Ref{"default", "test-network-policy"}, Ingress}}},
		{"icmp to db: a rule with ports admits no ICMP", []*Policy{tnp}, pathOf(frontend, db, 0, None), Denied,
			[]Denial{{Ref{"default", "test-network-policy"}, Ingress}}},
		{"web to db: not frontend", []*Policy{tnp}, pathOf(web, db, 6379, TCP), Denied,
			[]Denial{{Ref{"default", "test-network-policy"}, Ingress}}},
		{"myproject's pod to db", []*Policy{tnp}, pathOf(inProj, db, 6379, TCP), Allowed, nil},
		{"alice's pod to db: namespace not selected", []*Policy{tnp}, pathOf(aliceCl, db, 6379, TCP), Denied,
			[]Denial{{Ref{"default", "test-network-policy"}, Ingress}}},
		{"from the ipBlock", []*Policy{tnp}, Path{Source: ext("172.17.2.3"), Destination: End{Pod: db, IP: db.IPs[0]}, Port: 6379, Protocol: TCP}, Allowed, nil},
		{"from the ipBlock's except", []*Policy{tnp}, Path{Source: ext("172.17.1.3"), Destination: End{Pod: db, IP: db.IPs[0]}, Port: 6379, Protocol: TCP}, Denied,
			[]Denial{{Ref{"default", "test-network-policy"}, Ingress}}},
		{"db egress to 10.0.0.5:5978", []*Policy{tnp}, Path{Source: End{Pod: db}, Destination: ext("10.0.0.5"), Port: 5978, Protocol: TCP}, Allowed, nil},
		{"db egress to 10.0.1.5:5978: outside the block", []*Policy{tnp}, Path{Source: End{Pod: db}, Destination: ext("10.0.1.5"), Port: 5978, Protocol: TCP}, Denied,
			[]Denial{{Ref{"default", "test-network-policy"}, Egress}}},
		{"db egress to a pod: no ipBlock holds it", []*Policy{tnp}, pathOf(db, web, 80, TCP), Denied,
			[]Denial{{Ref{"default", "test-network-policy"}, Egress}}},
		{"web to frontend: no policy selects either", []*Policy{tnp}, pathOf(web, frontend, 80, TCP), Allowed, nil},

		// default-deny-ingress and allow-all-ingress.
		{"default deny ingress", []*Policy{policy(t, docDefaultDenyIngress)}, pathOf(web, frontend, 80, TCP), Denied,
			[]Denial{{Ref{"default", "default-deny-ingress"}, Ingress}}},
		{"default deny ingress: other namespace's pods are not isolated", []*Policy{policy(t, docDefaultDenyIngress)}, pathOf(web, aliceCl, 80, TCP), Allowed, nil},
		{"default deny ingress, egress free", []*Policy{policy(t, docDefaultDenyIngress)}, pathOf(web, aliceCl, 80, TCP), Allowed, nil},
		{"allow all ingress beside deny", []*Policy{policy(t, docDefaultDenyIngress), policy(t, docAllowAllIngress)}, pathOf(web, frontend, 80, TCP), Allowed, nil},

		// default-deny-egress and allow-all-egress.
		{"default deny egress", []*Policy{policy(t, docDefaultDenyEgress)}, pathOf(web, aliceCl, 80, TCP), Denied,
			[]Denial{{Ref{"default", "default-deny-egress"}, Egress}}},
		{"default deny egress: ingress free", []*Policy{policy(t, docDefaultDenyEgress)}, pathOf(aliceCl, web, 80, TCP), Allowed, nil},
		{"allow all egress beside deny", []*Policy{policy(t, docDefaultDenyEgress), policy(t, docAllowAllEgress)}, pathOf(web, aliceCl, 80, TCP), Allowed, nil},

		// default-deny-all: both sides within one namespace.
		{"default deny all, both sides", []*Policy{policy(t, docDefaultDenyAll)}, pathOf(web, frontend, 80, TCP), Denied,
			[]Denial{{Ref{"default", "default-deny-all"}, Egress}, {Ref{"default", "default-deny-all"}, Ingress}}},

		// multi-port-egress: a port range.
		{"port range low end", []*Policy{policy(t, docMultiPortEgress)}, Path{Source: End{Pod: db}, Destination: ext("10.0.0.9"), Port: 32000, Protocol: TCP}, Allowed, nil},
		{"port range high end", []*Policy{policy(t, docMultiPortEgress)}, Path{Source: End{Pod: db}, Destination: ext("10.0.0.9"), Port: 32768, Protocol: TCP}, Allowed, nil},
		{"port range above", []*Policy{policy(t, docMultiPortEgress)}, Path{Source: End{Pod: db}, Destination: ext("10.0.0.9"), Port: 32769, Protocol: TCP}, Denied,
			[]Denial{{Ref{"default", "multi-port-egress"}, Egress}}},

		// "and" versus "or".
		{"and: alice's client", []*Policy{policy(t, docAnd)}, pathOf(aliceCl, db, 5432, TCP), Allowed, nil},
		{"and: alice's other pod", []*Policy{policy(t, docAnd)}, pathOf(aliceX, db, 5432, TCP), Denied, []Denial{{Ref{"default", "and"}, Ingress}}},
		{"and: bob's client", []*Policy{policy(t, docAnd)}, pathOf(bobCl, db, 5432, TCP), Denied, []Denial{{Ref{"default", "and"}, Ingress}}},
		{"and: the policy's namespace's client", []*Policy{policy(t, docAnd)}, pathOf(defCl, db, 5432, TCP), Denied, []Denial{{Ref{"default", "and"}, Ingress}}},
		{"or: alice's other pod", []*Policy{policy(t, docOr)}, pathOf(aliceX, db, 5432, TCP), Allowed, nil},
		{"or: the policy's namespace's client", []*Policy{policy(t, docOr)}, pathOf(defCl, db, 5432, TCP), Allowed, nil},
		{"or: bob's client (podSelector alone is the policy's namespace)", []*Policy{policy(t, docOr)}, pathOf(bobCl, db, 5432, TCP), Denied, []Denial{{Ref{"default", "or"}, Ingress}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := index(t, tc.pols...).Evaluate(tc.path)
			assert.Equal(t, tc.want, d.Verdict, "why: %s", d.Why)
			assert.Equal(t, tc.denials, d.Denials)
		})
	}
}

func TestPolicyTypesDefaults(t *testing.T) {
	// No policyTypes: Ingress always, Egress only with egress rules.
	ingressOnly := policy(t, `
metadata: {name: no-types}
spec:
  podSelector: {}
  ingress: [{from: [{podSelector: {matchLabels: {role: web}}}]}]
`)
	assert.True(t, ingressOnly.Ingress)
	assert.False(t, ingressOnly.Egress, "no egress rules: egress not isolated")
	withEgress := policy(t, `
metadata: {name: with-egress}
spec:
  podSelector: {}
  egress: [{to: [{podSelector: {matchLabels: {role: db}}}]}]
`)
	assert.True(t, withEgress.Ingress, "no policyTypes: ingress isolated even without ingress rules")
	assert.True(t, withEgress.Egress)
	ix := index(t, withEgress)
	d := ix.Evaluate(pathOf(web, aliceCl, 80, TCP))
	assert.Equal(t, []Denial{{Ref{"default", "with-egress"}, Egress}}, d.Denials, "egress only to role=db of default")
	d = ix.Evaluate(pathOf(aliceCl, web, 80, TCP))
	assert.Equal(t, []Denial{{Ref{"default", "with-egress"}, Ingress}}, d.Denials, "ingress isolated, no ingress rule")
	d = ix.Evaluate(pathOf(web, db, 80, TCP))
	assert.Equal(t, []Denial{{Ref{"default", "with-egress"}, Ingress}}, d.Denials, "egress to db admitted; db's ingress isolated")
}

func TestNamedPorts(t *testing.T) {
	p := policy(t, `
metadata: {name: named}
spec:
  podSelector: {matchLabels: {role: db}}
  ingress: [{ports: [{port: postgres}]}]
`)
	ix := index(t, p)
	dst := pod("default", "10.1.0.20", "role", "db")
	dst.Ports, dst.KnownPorts = []ContainerPort{{Name: "postgres", Number: 5432, Protocol: TCP}}, true
	assert.Equal(t, Allowed, ix.Evaluate(pathOf(web, dst, 5432, TCP)).Verdict)
	assert.Equal(t, Denied, ix.Evaluate(pathOf(web, dst, 5433, TCP)).Verdict, "another port than the named one")
	assert.Equal(t, Denied, ix.Evaluate(pathOf(web, dst, 5432, UDP)).Verdict, "the named port is TCP")

	unknownPorts := pod("default", "10.1.0.21", "role", "db")
	d := ix.Evaluate(pathOf(web, unknownPorts, 5432, TCP))
	assert.Equal(t, Unknown, d.Verdict, "container ports not known: no claim")
	assert.Contains(t, d.Why, "named port postgres")
}

func TestUnknownsAreNotDenials(t *testing.T) {
	deny := policy(t, docDefaultDenyEgress)
	allowToAlice := policy(t, `
metadata: {name: to-alice}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress: [{to: [{namespaceSelector: {matchLabels: {user: alice}}}]}]
`)
	ix := index(t, deny, allowToAlice)
	unknownDst := Path{Source: End{Pod: web}, Destination: End{IP: netip.MustParseAddr("10.9.9.9")}, Port: 80, Protocol: TCP}
	d := ix.Evaluate(unknownDst)
	assert.Equal(t, Unknown, d.Verdict, "the address may be one of alice's pods")

	// Only default-deny-egress: no rule could admit any destination, known or not.
	d = index(t, deny).Evaluate(unknownDst)
	assert.Equal(t, Denied, d.Verdict)
	assert.Equal(t, "denied by NetworkPolicy default/default-deny-egress (egress of the source)", d.Message())

	// A namespace the index does not know.
	stranger := pod("nowhere", "10.1.9.9")
	d = ix.Evaluate(pathOf(web, stranger, 80, TCP))
	assert.Equal(t, Unknown, d.Verdict)
	assert.Contains(t, d.Why, "namespace nowhere")

	// namespaceSelector {} selects every namespace: no labels needed.
	anyNS := policy(t, `
metadata: {name: from-anywhere}
spec:
  podSelector: {}
  ingress: [{from: [{namespaceSelector: {}, podSelector: {matchLabels: {role: client}}}]}]
`)
	d = index(t, anyNS).Evaluate(pathOf(pod("nowhere", "10.1.9.8", "role", "client"), web, 80, TCP))
	assert.Equal(t, Allowed, d.Verdict, "why: %s", d.Why)
	d = index(t, anyNS).Evaluate(pathOf(pod("nowhere", "10.1.9.8", "role", "other"), web, 80, TCP))
	assert.Equal(t, Denied, d.Verdict)

	// A host-network pod selected by a policy.
	hn := pod("default", "10.1.0.99", "role", "web")
	hn.HostNetwork = true
	d = index(t, policy(t, docDefaultDenyIngress)).Evaluate(pathOf(frontend, hn, 80, TCP))
	assert.Equal(t, Unknown, d.Verdict)

	// An invalid policy makes its namespace's evaluations Unknown.
	bad := &Policy{Ref: Ref{"default", "bad"}, Ingress: true, Invalid: "test"}
	d = index(t, bad, policy(t, docDefaultDenyIngress)).Evaluate(pathOf(web, frontend, 80, TCP))
	assert.Equal(t, Unknown, d.Verdict)
}

func TestIPv6AndDualStack(t *testing.T) {
	p := policy(t, `
metadata: {name: v6}
spec:
  podSelector: {matchLabels: {role: db}}
  ingress: [{from: [{ipBlock: {cidr: "fd00:1::/64", except: ["fd00:1::/120"]}}]}]
`)
	ix := index(t, p)
	dst := &Pod{Namespace: "default", Labels: map[string]string{"role": "db"}, IPs: []netip.Addr{netip.MustParseAddr("10.1.0.30"), netip.MustParseAddr("fd00:2::30")}}
	src := &Pod{Namespace: "default", Labels: map[string]string{}, IPs: []netip.Addr{netip.MustParseAddr("10.1.0.31"), netip.MustParseAddr("fd00:1::1:31")}}
	// Over IPv6 the source's IPv6 address is in the block; over IPv4 its IPv4 one is not.
	v6 := Path{Source: End{Pod: src}, Destination: End{Pod: dst, IP: netip.MustParseAddr("fd00:2::30")}, Port: 80, Protocol: TCP}
	v4 := Path{Source: End{Pod: src}, Destination: End{Pod: dst, IP: netip.MustParseAddr("10.1.0.30")}, Port: 80, Protocol: TCP}
	assert.Equal(t, Allowed, ix.Evaluate(v6).Verdict)
	assert.Equal(t, Denied, ix.Evaluate(v4).Verdict)
	src.IPs[1] = netip.MustParseAddr("fd00:1::31") // in the except
	assert.Equal(t, Denied, ix.Evaluate(v6).Verdict)
}

func TestMessage(t *testing.T) {
	d := Decision{Verdict: Denied, Denials: []Denial{
		{Ref{"a", "x"}, Egress}, {Ref{"a", "y"}, Egress}, {Ref{"b", "z"}, Ingress},
	}}
	assert.Equal(t, "denied by NetworkPolicies a/x, a/y (egress of the source), b/z (ingress of the destination)", d.Message())
	assert.Empty(t, Decision{Verdict: Unknown}.Message())
}

func TestIndexUpdates(t *testing.T) {
	ix := index(t)
	g := ix.Generation()
	ix.SetPolicy(policy(t, docDefaultDenyIngress))
	assert.Greater(t, ix.Generation(), g)
	assert.Equal(t, Denied, ix.Evaluate(pathOf(web, frontend, 80, TCP)).Verdict)
	ix.SetPolicy(policy(t, docAllowAllIngress))
	ix.SetPolicy(policy(t, docAllowAllIngress)) // replace
	n, _ := ix.Len()
	assert.Equal(t, 2, n)
	assert.Equal(t, Allowed, ix.Evaluate(pathOf(web, frontend, 80, TCP)).Verdict)
	ix.DeletePolicy(Ref{"default", "allow-all-ingress"})
	ix.DeletePolicy(Ref{"default", "nope"})
	assert.Equal(t, Denied, ix.Evaluate(pathOf(web, frontend, 80, TCP)).Verdict)
	ix.DeletePolicy(Ref{"default", "default-deny-ingress"})
	assert.Equal(t, Allowed, ix.Evaluate(pathOf(web, frontend, 80, TCP)).Verdict)

	g = ix.Generation()
	ix.SetNamespace("alice", map[string]string{"user": "alice"})
	assert.Equal(t, g, ix.Generation(), "unchanged labels: no new generation")
	ix.DeleteNamespace("alice")
	assert.Greater(t, ix.Generation(), g)
}

func TestCompileInvalid(t *testing.T) {
	for name, doc := range map[string]string{
		"bad cidr":     `{metadata: {name: x}, spec: {podSelector: {}, ingress: [{from: [{ipBlock: {cidr: nope}}]}]}}`,
		"bad selector": `{metadata: {name: x}, spec: {podSelector: {matchExpressions: [{key: a, operator: Bogus}]}}}`,
		"bad type":     `{metadata: {name: x}, spec: {podSelector: {}, policyTypes: [Sideways]}}`,
		"empty peer":   `{metadata: {name: x}, spec: {podSelector: {}, ingress: [{from: [{}]}]}}`,
		"endPort":      `{metadata: {name: x}, spec: {podSelector: {}, ingress: [{ports: [{endPort: 5}]}]}}`,
	} {
		var np networkingv1.NetworkPolicy
		require.NoError(t, yaml.Unmarshal([]byte(doc), &np), name)
		p := Compile(&np)
		assert.NotEmpty(t, p.Invalid, name)
		assert.False(t, strings.Contains(p.Invalid, "%!"), name)
	}
}

func TestAll(t *testing.T) {
	a := Decision{Verdict: Denied, Denials: []Denial{{Ref{"s", "b"}, Ingress}, {Ref{"s", "a"}, Egress}}}
	b := Decision{Verdict: Denied, Denials: []Denial{{Ref{"s", "a"}, Egress}, {Ref{"s", "c"}, Ingress}}}
	d := All(a, b)
	assert.Equal(t, Denied, d.Verdict)
	assert.Equal(t, []Denial{{Ref{"s", "a"}, Egress}, {Ref{"s", "b"}, Ingress}, {Ref{"s", "c"}, Ingress}}, d.Denials)
	assert.Equal(t, Allowed, All(a, Decision{Verdict: Allowed}, Decision{Verdict: Unknown, Why: "x"}).Verdict, "one endpoint admitted: the traffic may take it")
	assert.Equal(t, Unknown, All(a, Decision{Verdict: Unknown, Why: "x"}).Verdict)
	assert.Equal(t, Unknown, All().Verdict)
	assert.Equal(t, []Denial{{Ref{"s", "b"}, Ingress}, {Ref{"s", "a"}, Egress}}, a.Denials, "the inputs are not reordered")
}
