// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"

	ncfake "github.com/netpulse/netpulse/api/client/clientset/versioned/fake"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/netpolicy"
)

func labelled(p *corev1.Pod, kv ...string) *corev1.Pod {
	p.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

func denyIngress(ns, name string, sel map[string]string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
}

// A failing check whose path a NetworkPolicy denies reads NetworkPolicyDenied naming it;
// deleting the policy turns the reason back to the failure's own; a success never reads
// as denied; a PodNetworkConnectivityCheck keeps OpenShift's reasons and names the policy
// in its message. The policies come through the informers from the (fake) API, the pods
// through the controller's reads.
func TestFailingCheckNamesTheDenyingPolicy(t *testing.T) {
	cfg := defaultConfig()
	cfg.ExplainNetworkPolicy = true
	h := newHarness(t, cfg, false)
	c := h.c
	ctx := context.Background()
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "shop"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "netpulse"}},
		labelled(runningPod("shop", "web-0", "node-a", "10.0.0.1"), "app", "web"),
		labelled(runningPod("shop", "db", "node-b", "10.0.0.2"), "app", "db"),
		labelled(runningPod("netpulse", "agent-a", "node-a", "10.0.0.250"), "app.kubernetes.io/name", "netpulse"),
		denyIngress("shop", "deny-db", map[string]string{"app": "db"}),
	)
	c.kube = kube
	c.startPolicyWatch(kube)
	require.Eventually(t, c.policiesSynced, 10*time.Second, 10*time.Millisecond, "the policy informers sync")
	require.Eventually(t, func() bool { n, ns := c.PolicyIndexLen(); return n == 1 && ns == 2 }, 10*time.Second, 10*time.Millisecond)

	place := placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a", endpoint: "10.0.0.2:5432", targetKind: "Pod"}
	key := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	cs := h.track(key, place)
	cs.spec = spec{sourcePod: "web-0", target: v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "db", Port: 5432}}, probe: v1alpha1.ProbeTypeTCP}
	ocKey := checkKey{ocv1alpha1.Kind, "shop", "oc-web-to-db"}
	ocs := h.track(ocKey, place)
	ocs.spec = cs.spec

	now := time.Now().Add(-time.Hour)
	result := func(k checkKey, ok bool) {
		now = now.Add(time.Minute)
		c.ConsumeLogs(ctx, checkResult(k.kind, k.namespace, k.name, "netpulse", "agent-a", "uid-a", "node-a", now, ok))
	}

	// Healthy, although the policy would deny: never claimed (the network may not enforce
	// it), and nothing is read for a check that succeeds.
	result(key, true)
	c.explain(ctx)
	assert.Equal(t, checkstatus.ReasonProbeSucceeded, cs.st.Reachable.Reason)
	assert.False(t, cs.policy.pathRead, "no reads for a succeeding check")

	// Failing: the failure's reason until the path is evaluated, then the policy.
	result(key, false)
	result(ocKey, false)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, cs.st.Reachable.Reason)
	c.explain(ctx)
	assert.Equal(t, checkstatus.ConditionFalse, cs.st.Reachable.Status)
	assert.Equal(t, checkstatus.ReasonNetworkPolicyDenied, cs.st.Reachable.Reason)
	assert.Equal(t, "denied by NetworkPolicy shop/deny-db (ingress of the destination); the probe: tcp connection to 10.0.0.9:80 succeeded",
		cs.st.Reachable.Message)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, ocs.st.Reachable.Reason, "OpenShift's kind keeps OpenShift's reasons")
	assert.Contains(t, ocs.st.Reachable.Message, "denied by NetworkPolicy shop/deny-db")
	written := ncStatus(cs)
	assert.Equal(t, v1alpha1.Unreachable, written.Reachability)
	assert.Equal(t, checkstatus.ReasonNetworkPolicyDenied, findCondition(written.Conditions, v1alpha1.ConditionReachable).Reason)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, cs.st.Failures[0].Reason, "the log entry keeps what the probe reported")

	// The next failure keeps the explanation (no flip to the bare reason and back).
	result(key, false)
	assert.Equal(t, checkstatus.ReasonNetworkPolicyDenied, cs.st.Reachable.Reason)

	// An allowing policy beside it: the path is admitted, the bare reason returns.
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-from-netpulse"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "netpulse"}}}}}}}}
	_, err := kube.NetworkingV1().NetworkPolicies("shop").Create(ctx, allow, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { n, _ := c.PolicyIndexLen(); return n == 2 }, 10*time.Second, 10*time.Millisecond)
	c.explain(ctx)
	assert.Equal(t, checkstatus.ReasonNetworkPolicyDenied, cs.st.Reachable.Reason, "the agent's namespace lacks the label the new policy selects")
	assert.Contains(t, cs.st.Reachable.Message, "denied by NetworkPolicies shop/db-from-netpulse, shop/deny-db (ingress of the destination)",
		"every policy isolating the destination, none admitting the path")

	// The namespace gets the label (the API server sets kubernetes.io/metadata.name; the
	// fake does not): the path is admitted, the failure's own reason returns.
	gen := c.policies.Generation()
	_, err = kube.CoreV1().Namespaces().Update(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "netpulse",
		Labels: map[string]string{"kubernetes.io/metadata.name": "netpulse"}}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.policies.Generation() != gen }, 10*time.Second, 10*time.Millisecond)
	c.explain(ctx)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, cs.st.Reachable.Reason)
	assert.Equal(t, "tcp connection to 10.0.0.9:80 succeeded", cs.st.Reachable.Message, "the probe's own message")

	// Both policies deleted: still the bare reason; healed: ProbeSucceeded.
	for _, name := range []string{"deny-db", "db-from-netpulse"} {
		require.NoError(t, kube.NetworkingV1().NetworkPolicies("shop").Delete(ctx, name, metav1.DeleteOptions{}))
	}
	require.Eventually(t, func() bool { n, _ := c.PolicyIndexLen(); return n == 0 }, 10*time.Second, 10*time.Millisecond)
	c.explain(ctx)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, cs.st.Reachable.Reason)
	result(key, true)
	assert.Equal(t, checkstatus.ReasonProbeSucceeded, cs.st.Reachable.Reason)
}

// Without the index's initial state nothing is explained: a policy not yet seen could
// admit what the others deny.
func TestNoExplanationBeforeThePoliciesSync(t *testing.T) {
	cfg := defaultConfig()
	cfg.ExplainNetworkPolicy = true
	h := newHarness(t, cfg, false)
	h.c.policies = netpolicy.NewIndex()
	h.c.policiesSynced = func() bool { return false }
	h.c.policies.SetNamespace("shop", nil)
	h.c.policies.SetPolicy(netpolicy.Compile(denyIngress("shop", "deny-all", nil)))
	key := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	cs := h.track(key, placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a", endpoint: "10.0.0.2:80", targetKind: "Address"})
	h.c.ConsumeLogs(context.Background(), checkResult(key.kind, key.namespace, key.name, "netpulse", "agent-a", "uid-a", "node-a", time.Now(), false))
	h.c.explain(context.Background())
	assert.Equal(t, checkstatus.ReasonTCPConnectError, cs.st.Reachable.Reason)
	assert.False(t, cs.policy.pathRead)
}

// After a takeover a new leader keeps the recorded denial until it has evaluated the path
// itself, so a new failure does not flip the reason away and back.
func TestRecordedDenialKeptUntilEvaluated(t *testing.T) {
	cs := &checkState{key: nc("web-to-db")}
	at := t0
	st, _ := checkstatus.Apply(checkstatus.Status{}, checkstatus.FlavourNetpulse, checkstatus.Entry{Time: at, Reason: checkstatus.ReasonTCPConnectError, Message: "timeout"})
	st.Reachable.Reason, st.Reachable.Message = checkstatus.ReasonNetworkPolicyDenied, "denied by NetworkPolicy shop/x (ingress of the destination); the probe: timeout"
	cs.st = st
	prev := cs.st.Reachable
	cs.st, _ = checkstatus.Apply(cs.st, checkstatus.FlavourNetpulse, checkstatus.Entry{Time: at.Add(time.Minute), Reason: checkstatus.ReasonTCPConnectError, Message: "timeout"})
	explainReachable(cs, prev)
	assert.Equal(t, prev.Reason, cs.st.Reachable.Reason)
	assert.Equal(t, prev.Message, cs.st.Reachable.Message)

	// Evaluated and not denied: the bare reason.
	cs.policy.known = true
	explainReachable(cs, cs.st.Reachable)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, cs.st.Reachable.Reason)
	assert.Equal(t, "timeout", cs.st.Reachable.Message)
}

func TestPolicyPath(t *testing.T) {
	vantage := labelled(runningPod("netpulse", "agent-a", "node-a", "10.0.0.250"), "app", "agent")
	target := labelled(runningPod("shop", "db", "node-b", "10.0.0.2"), "app", "db")
	target.Spec.Containers = []corev1.Container{{Name: "db", Ports: []corev1.ContainerPort{{Name: "pg", ContainerPort: 5432}, {ContainerPort: 9000}}}}
	for _, tc := range []struct {
		name     string
		place    placement
		probe    v1alpha1.ProbeType
		target   *corev1.Pod
		why      string
		dst      string
		port     int32
		protocol netpolicy.Protocol
	}{
		{"pod tcp", placement{endpoint: "10.0.0.2:5432", targetKind: "Pod"}, v1alpha1.ProbeTypeTCP, target, "", "10.0.0.2", 5432, netpolicy.TCP},
		{"pod icmp", placement{endpoint: "10.0.0.2", targetKind: "Pod"}, v1alpha1.ProbeTypeICMP, target, "", "10.0.0.2", 0, netpolicy.None},
		{"address v6", placement{endpoint: "[fd00::2]:80", targetKind: "Address"}, "", nil, "", "fd00::2", 80, netpolicy.TCP},
		{"url https", placement{endpoint: "https://10.0.0.9/healthz", targetKind: "URL"}, v1alpha1.ProbeTypeHTTP, nil, "", "10.0.0.9", 443, netpolicy.TCP},
		{"url with port", placement{endpoint: "http://10.0.0.9:8080/", targetKind: "URL"}, v1alpha1.ProbeTypeHTTP, nil, "", "10.0.0.9", 8080, netpolicy.TCP},
		{"url by name", placement{endpoint: "https://db.shop.svc/", targetKind: "URL"}, v1alpha1.ProbeTypeHTTP, nil, "a name", "", 0, ""},
		{"service", placement{endpoint: "10.96.0.5:443", targetKind: "Service"}, "", nil, "a Service target", "", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, why := policyPath(tc.place, tc.probe, vantage, tc.target)
			if tc.why != "" {
				assert.Contains(t, why, tc.why)
				return
			}
			require.Empty(t, why)
			assert.Equal(t, netip.MustParseAddr(tc.dst), p.Destination.IP)
			assert.Equal(t, tc.port, p.Port)
			assert.Equal(t, tc.protocol, p.Protocol)
			assert.Equal(t, "netpulse", p.Source.Pod.Namespace)
			assert.Equal(t, tc.target != nil, p.Destination.Pod != nil)
			if tc.target != nil {
				assert.Equal(t, []netpolicy.ContainerPort{{Name: "pg", Number: 5432, Protocol: netpolicy.TCP}}, p.Destination.Pod.Ports, "named ports only")
			}
		})
	}
}

// With checks.explain_network_policy off nothing is watched and nothing explained.
func TestExplanationOff(t *testing.T) {
	h := newHarness(t, defaultConfig(), false)
	kube := kubefake.NewClientset(denyIngress("shop", "deny-all", nil))
	h.c.Start(kube, ncfake.NewSimpleClientset())
	assert.Nil(t, h.c.policyFactory, "no NetworkPolicy or Namespace watch")
	key := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	h.c.mu.Lock() // Start's NetworkCheck informer runs beside the test
	cs := h.track(key, placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a", endpoint: "10.0.0.2:80", targetKind: "Address"})
	h.c.mu.Unlock()
	h.c.ConsumeLogs(context.Background(), checkResult(key.kind, key.namespace, key.name, "netpulse", "agent-a", "uid-a", "node-a", time.Now(), false))
	h.c.explain(context.Background())
	h.c.mu.Lock()
	assert.Equal(t, checkstatus.ReasonTCPConnectError, cs.st.Reachable.Reason)
	h.c.mu.Unlock()
	n, ns := h.c.PolicyIndexLen()
	assert.Zero(t, n+ns)
}

func TestPolicyServicePaths(t *testing.T) {
	vantage := labelled(runningPod("netpulse", "agent-a", "node-a", "10.0.0.250"), "app", "agent")
	backend := func(name, ip string, ports ...corev1.ContainerPort) corev1.Pod {
		p := labelled(runningPod("shop", name, "node-b", ip), "app", "db")
		p.Spec.Containers = []corev1.Container{{Name: "db", Ports: ports}}
		return *p
	}
	pg := corev1.ContainerPort{Name: "pg", ContainerPort: 5432}
	pgAlt := corev1.ContainerPort{Name: "pg", ContainerPort: 6432}
	svc := func(target intstr.IntOrString) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.5", Selector: map[string]string{"app": "db"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: target}}}}
	}
	backends := []corev1.Pod{backend("db-0", "10.0.0.2", pg), backend("db-1", "10.0.0.3", pgAlt), backend("db-2", "10.0.0.4")}

	paths, why := policyServicePaths(v1alpha1.ProbeTypeTCP, 80, svc(intstr.FromString("pg")), vantage, backends)
	require.Empty(t, why)
	require.Len(t, paths, 2, "db-2 has no port named pg: no endpoint")
	assert.Equal(t, []int32{5432, 6432}, []int32{paths[0].Port, paths[1].Port}, "the named target port, per endpoint")
	assert.Equal(t, netip.MustParseAddr("10.0.0.3"), paths[1].Destination.IP)
	assert.Equal(t, "db-1", backends[1].Name)

	paths, why = policyServicePaths(v1alpha1.ProbeTypeTCP, 80, svc(intstr.FromInt32(8080)), vantage, backends)
	require.Empty(t, why)
	require.Len(t, paths, 3)
	assert.Equal(t, int32(8080), paths[2].Port)
	paths, _ = policyServicePaths(v1alpha1.ProbeTypeTCP, 80, svc(intstr.IntOrString{}), vantage, backends)
	assert.Equal(t, int32(80), paths[0].Port, "no targetPort: the port")

	for name, tc := range map[string]struct {
		probe v1alpha1.ProbeType
		port  int32
		svc   *corev1.Service
		want  string
	}{
		"icmp":        {v1alpha1.ProbeTypeICMP, 80, svc(intstr.FromInt32(80)), "ICMP"},
		"no selector": {v1alpha1.ProbeTypeTCP, 80, &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.5", Ports: []corev1.ServicePort{{Port: 80}}}}, "without a selector"},
		"no port":     {v1alpha1.ProbeTypeTCP, 81, svc(intstr.FromInt32(80)), "no TCP port 81"},
	} {
		_, why := policyServicePaths(tc.probe, tc.port, tc.svc, vantage, backends)
		assert.Contains(t, why, tc.want, name)
	}
	_, why = policyServicePaths(v1alpha1.ProbeTypeTCP, 80, svc(intstr.FromInt32(80)), vantage, nil)
	assert.Contains(t, why, "no running endpoint")
}

// A Service target is denied only when every endpoint is; the message names the policies
// of all of them.
func TestServiceCheckDeniedOnlyWhenEveryEndpointIs(t *testing.T) {
	cfg := defaultConfig()
	cfg.ExplainNetworkPolicy = true
	h := newHarness(t, cfg, false)
	c := h.c
	ctx := context.Background()
	db0 := labelled(runningPod("shop", "db-0", "node-b", "10.0.0.2"), "app", "db", "shard", "0")
	db1 := labelled(runningPod("shop", "db-1", "node-b", "10.0.0.3"), "app", "db", "shard", "1")
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "netpulse"}},
		labelled(runningPod("netpulse", "agent-a", "node-a", "10.0.0.250"), "app.kubernetes.io/name", "netpulse"),
		db0, db1,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.5",
			Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Port: 5432, TargetPort: intstr.FromInt32(5432)}}}},
		denyIngress("shop", "deny-shard-0", map[string]string{"shard": "0"}),
	)
	c.kube = kube
	c.startPolicyWatch(kube)
	require.Eventually(t, c.policiesSynced, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { n, ns := c.PolicyIndexLen(); return n == 1 && ns == 2 }, 10*time.Second, 10*time.Millisecond)

	key := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	cs := h.track(key, placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a", endpoint: "10.96.0.5:5432", targetKind: "Service"})
	cs.spec = spec{sourcePod: "web-0", target: v1alpha1.CheckTarget{Service: &v1alpha1.CheckServiceTarget{Name: "db", Port: 5432}}}
	c.ConsumeLogs(ctx, checkResult(key.kind, key.namespace, key.name, "netpulse", "agent-a", "uid-a", "node-a", time.Now().Add(-time.Minute), false))
	c.explain(ctx)
	assert.True(t, cs.policy.valid, cs.policy.why)
	assert.Len(t, cs.policy.paths, 2)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, cs.st.Reachable.Reason, "db-1 admits the probe: not explained by policy")

	_, err := kube.NetworkingV1().NetworkPolicies("shop").Create(ctx, denyIngress("shop", "deny-shard-1", map[string]string{"shard": "1"}), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { n, _ := c.PolicyIndexLen(); return n == 2 }, 10*time.Second, 10*time.Millisecond)
	c.explain(ctx)
	assert.Equal(t, checkstatus.ReasonNetworkPolicyDenied, cs.st.Reachable.Reason)
	assert.Contains(t, cs.st.Reachable.Message, "denied by NetworkPolicies shop/deny-shard-0, shop/deny-shard-1 (ingress of the destination) for each of the Service's 2 endpoints")
}

// The vantage pod of an agent-mode check is the reporter's pod only when the gateway reads
// it on the check's node: a reporter naming another pod gets no evaluation.
func TestReporterOffTheNodeIsNotEvaluated(t *testing.T) {
	cfg := defaultConfig()
	cfg.ExplainNetworkPolicy = true
	h := newHarness(t, cfg, false)
	c := h.c
	ctx := context.Background()
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "netpulse"}},
		labelled(runningPod("netpulse", "agent-a", "node-z", "10.0.0.250"), "app.kubernetes.io/name", "netpulse"),
		labelled(runningPod("shop", "db", "node-b", "10.0.0.2"), "app", "db"),
		denyIngress("shop", "deny-db", map[string]string{"app": "db"}),
	)
	c.kube = kube
	c.startPolicyWatch(kube)
	require.Eventually(t, c.policiesSynced, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { n, ns := c.PolicyIndexLen(); return n == 1 && ns == 2 }, 10*time.Second, 10*time.Millisecond)
	key := checkKey{v1alpha1.NetworkCheckKind, "shop", "web-to-db"}
	cs := h.track(key, placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: "web-0", node: "node-a", endpoint: "10.0.0.2:5432", targetKind: "Pod"})
	cs.spec = spec{sourcePod: "web-0", target: v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "db", Port: 5432}}}
	c.ConsumeLogs(ctx, checkResult(key.kind, key.namespace, key.name, "netpulse", "agent-a", "uid-a", "node-a", time.Now().Add(-time.Minute), false))
	c.explain(ctx)
	assert.False(t, cs.policy.valid)
	assert.Contains(t, cs.policy.why, "not on node node-a")
	assert.Equal(t, checkstatus.ReasonTCPConnectError, cs.st.Reachable.Reason)
}
