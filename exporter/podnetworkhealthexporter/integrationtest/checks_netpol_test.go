// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
)

// A declared check that a NetworkPolicy blocks reads Unreachable with the reason
// NetworkPolicyDenied and a message naming the policy; a check failing beside it that no
// policy explains keeps the probe's own reason; deleting the policy turns the reason back
// while the probes still fail, and the heal reads ProbeSucceeded. Everything the gateway
// evaluates it reads itself, as the gateway's service account under deploy/rbac (the
// NetworkPolicy and Namespace watches, the pod reads): the agent only reports failures.
func TestCheckBlockedByNetworkPolicyNamesIt(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const ns = "checks-netpol"
	web := makePod(t, ns, "web", "node-a")
	runningPodStatus(t, web, "10.244.7.10")
	// db serves its port by name; a Service in front of it targets that name.
	db, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Labels: map[string]string{"app": "db"}},
		Spec: corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "c", Image: "example.invalid/x:1",
			Ports: []corev1.ContainerPort{{Name: "pg", ContainerPort: 5432}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	runningPodStatus(t, db, "10.244.8.20")
	_, err = admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Port: 5432, TargetPort: intstr.FromString("pg")}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	cache := makePod(t, ns, "cache", "node-b")
	runningPodStatus(t, cache, "10.244.8.21")
	// The agent of node-a, which runs both checks (their source has no sidecar) and whose
	// pod is the probes' source.
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "netpulse", Name: "agent-a", Labels: map[string]string{"app.kubernetes.io/name": "netpulse"}},
		Spec: restrictedSpec()}
	agent.Spec.NodeName = "node-a"
	agent, err = admin.CoreV1().Pods("netpulse").Create(ctx, agent, metav1.CreateOptions{})
	require.NoError(t, err)
	defer func() { _ = admin.CoreV1().Pods("netpulse").Delete(ctx, "agent-a", *metav1.NewDeleteOptions(0)) }()
	runningPodStatus(t, agent, "10.244.7.250")

	// db admits nothing (ingress isolated, no rule).
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny-db"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	_, err = admin.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{})
	require.NoError(t, err)

	cfg := testConfig("pnh-checks-netpol")
	cfg.Checks.Enabled = true
	cfg.Checks.Heartbeat = time.Minute
	cfg.RequireAuthenticatedObservers = false
	require.True(t, cfg.Checks.ExplainNetworkPolicy, "on by default")
	exp := startLogsExporter(t, cfg, "gw-netpol")
	defer func() { _ = exp.Shutdown(ctx) }()

	for name, target := range map[string]v1alpha1.CheckTarget{
		"web-to-db":     {Pod: &v1alpha1.CheckPodTarget{Name: "db", Port: 5432}},
		"web-to-db-svc": {Service: &v1alpha1.CheckServiceTarget{Name: "db", Port: 5432}},
		"web-to-cache":  {Pod: &v1alpha1.CheckPodTarget{Name: "cache", Port: 5432}},
	} {
		_, err := pnhClient.NetpulseV1alpha1().NetworkChecks(ns).Create(ctx, &v1alpha1.NetworkCheck{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       v1alpha1.NetworkCheckSpec{Source: v1alpha1.CheckSource{PodName: "web"}, Target: target},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	get := func(name string) *v1alpha1.NetworkCheck {
		c, err := pnhClient.NetpulseV1alpha1().NetworkChecks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return c
	}
	reachable := func(name string) *metav1.Condition {
		if c := get(name); c != nil {
			return findCond(c.Status.Conditions, v1alpha1.ConditionReachable)
		}
		return nil
	}
	for _, name := range []string{"web-to-db", "web-to-db-svc", "web-to-cache"} {
		require.Eventually(t, func() bool {
			c := get(name)
			return c != nil && c.Status.Vantage != nil && c.Status.Vantage.Node == "node-a" && c.Status.Target != nil
		}, 30*time.Second, 100*time.Millisecond, "%s is placed on node-a's agent", name)
	}

	// Both checks fail, as probes a policy drops do: a timeout, nothing more.
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	next := func() time.Time { at = at.Add(time.Second); return at }
	for _, name := range []string{"web-to-db", "web-to-db-svc", "web-to-cache"} {
		require.NoError(t, exp.ConsumeLogs(ctx, checkRecord(ns, name, next(), false)))
	}
	require.Eventually(t, func() bool {
		r := reachable("web-to-db")
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == checkstatus.ReasonNetworkPolicyDenied
	}, 30*time.Second, 100*time.Millisecond, "the blocked check names the policy: %+v", reachable("web-to-db"))
	r := reachable("web-to-db")
	assert.Equal(t, "denied by NetworkPolicy checks-netpol/deny-db (ingress of the destination); the probe: tcp connection refused", r.Message)
	c := get("web-to-db")
	assert.Equal(t, v1alpha1.Unreachable, c.Status.Reachability)
	require.NotEmpty(t, c.Status.Failures)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, c.Status.Failures[0].Reason, "the log entry keeps what the probe reported")

	// Through the Service: its one endpoint (db, on the port named pg) is denied.
	require.Eventually(t, func() bool {
		r := reachable("web-to-db-svc")
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == checkstatus.ReasonNetworkPolicyDenied
	}, 30*time.Second, 100*time.Millisecond, "the check through the Service names the policy: %+v", reachable("web-to-db-svc"))
	assert.Equal(t, "denied by NetworkPolicy checks-netpol/deny-db (ingress of the destination) for the Service's one endpoint; the probe: tcp connection refused",
		reachable("web-to-db-svc").Message)

	// The other check fails too, but no policy is on its path: the probe's own reason.
	require.Eventually(t, func() bool {
		r := reachable("web-to-cache")
		return r != nil && r.Status == metav1.ConditionFalse
	}, 30*time.Second, 100*time.Millisecond)
	time.Sleep(3 * time.Second) // a few reconciles: no explanation arrives for it
	r = reachable("web-to-cache")
	assert.Equal(t, checkstatus.ReasonTCPConnectError, r.Reason)
	assert.Equal(t, "tcp connection refused", r.Message)
	assert.Equal(t, checkstatus.ReasonNetworkPolicyDenied, reachable("web-to-db").Reason)

	// The policy is deleted while the probes still fail: the reason goes back to the
	// probe's.
	require.NoError(t, admin.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "deny-db", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		r := reachable("web-to-db")
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == checkstatus.ReasonTCPConnectError && !strings.Contains(r.Message, "NetworkPolic")
	}, 30*time.Second, 100*time.Millisecond, "the reason goes back once the policy is gone: %+v", reachable("web-to-db"))

	// Healed.
	require.NoError(t, exp.ConsumeLogs(ctx, checkRecord(ns, "web-to-db", next(), true)))
	require.Eventually(t, func() bool {
		r := reachable("web-to-db")
		return r != nil && r.Status == metav1.ConditionTrue && r.Reason == checkstatus.ReasonProbeSucceeded
	}, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, v1alpha1.Reachable, get("web-to-db").Status.Reachability)

	// A policy that denies a path whose probes succeed is never claimed: the network may
	// not enforce it (here nothing does).
	_, err = admin.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, exp.ConsumeLogs(ctx, checkRecord(ns, "web-to-db", next(), true)))
	time.Sleep(3 * time.Second)
	r = reachable("web-to-db")
	assert.Equal(t, metav1.ConditionTrue, r.Status)
	assert.Equal(t, checkstatus.ReasonProbeSucceeded, r.Reason)
	err = admin.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "deny-db", metav1.DeleteOptions{})
	assert.True(t, err == nil || apierrors.IsNotFound(err))
}
