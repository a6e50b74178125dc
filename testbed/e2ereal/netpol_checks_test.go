// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2ereal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/testbed/realcluster"
)

const (
	// policyChecksNamespace holds the workload whose own NetworkPolicy blocks a declared
	// check.
	policyChecksNamespace = "np-checks"
	// userPolicy is that workload's NetworkPolicy: the server admits nothing.
	userPolicy = "deny-server"
)

// checkBlockedByUserPolicy: a declared check that the workload's own NetworkPolicy blocks,
// enforced by the nodes' engine (kube-network-policies), reads Unreachable with the reason
// NetworkPolicyDenied and a message naming the policy, not a bare timeout; deleted, the
// check reads Reachable again. The check runs from the agent of the client's node (the
// client has no sidecar) to a server pod (CoreDNS on TCP 53) on another node.
//
//  1. no user policy: the check reads Reachable (the path works, so what follows is the
//     policy's doing);
//  2. the policy deny-server (the server's ingress isolated, no rule) created: the engine
//     drops the probes' SYNs, the probes time out, and the check reads
//     reachability Unreachable, Reachable=False reason NetworkPolicyDenied, message
//     "denied by NetworkPolicy np-checks/deny-server (ingress of the destination); …",
//     while its newest failure log entry keeps the probe's own reason (TCPConnectError);
//  3. the policy deleted: Reachable=True, ProbeSucceeded.
func (s *suite) checkBlockedByUserPolicy(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	nodes := s.cl.Nodes
	require.GreaterOrEqual(t, len(nodes), 2)
	_, err := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyChecksNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		_ = s.cs.CoreV1().Namespaces().Delete(context.Background(), policyChecksNamespace, metav1.DeleteOptions{})
	})
	_, err = s.cs.CoreV1().ConfigMaps(policyChecksNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dns-corefile"},
		Data: map[string]string{"Corefile": ".:53 {\n    errors\n}\n"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	client := probePod(policyChecksNamespace, "client", nodes[0].Name, map[string]string{"app": "client"})
	server := probePod(policyChecksNamespace, "server", nodes[1].Name, map[string]string{"app": "server"})
	server.Spec.Containers = []corev1.Container{{Name: "dns", Image: realcluster.CoreDNSImage, ImagePullPolicy: corev1.PullNever,
		Args:         []string{"-conf", "/etc/coredns/Corefile"},
		Ports:        []corev1.ContainerPort{{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP}},
		VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/coredns"}}}}
	server.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "dns-corefile"}}}}}
	for _, p := range []*corev1.Pod{client, server} {
		_, err := s.cs.CoreV1().Pods(policyChecksNamespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	s.waitPodRunning(t, policyChecksNamespace, "client", 2*time.Minute)
	s.waitPodRunning(t, policyChecksNamespace, "server", 2*time.Minute)

	const name = "client-to-server"
	_, err = s.pnh.NetpulseV1alpha1().NetworkChecks(policyChecksNamespace).Create(ctx, &v1alpha1.NetworkCheck{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NetworkCheckSpec{
			Source:   v1alpha1.CheckSource{PodName: "client"},
			Target:   v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "server", Port: 53}},
			Probe:    v1alpha1.ProbeTypeTCP,
			Interval: &metav1.Duration{Duration: 10 * time.Second},
			Timeout:  &metav1.Duration{Duration: 3 * time.Second},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// await polls the check until ok says "" (its status is what is wanted) or timeout.
	await := func(what string, timeout time.Duration, ok func(*v1alpha1.NetworkCheck, *metav1.Condition) string) (*v1alpha1.NetworkCheck, time.Duration) {
		t.Helper()
		since := time.Now()
		last := ""
		for {
			nc, err := s.pnh.NetpulseV1alpha1().NetworkChecks(policyChecksNamespace).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			var cond *metav1.Condition
			for i := range nc.Status.Conditions {
				if nc.Status.Conditions[i].Type == v1alpha1.ConditionReachable {
					cond = &nc.Status.Conditions[i]
				}
			}
			if last = ok(nc, cond); last == "" {
				return nc, time.Since(since)
			}
			if time.Since(since) > timeout {
				t.Logf("pods of %s:\n%s", policyChecksNamespace, s.cl.PodReport(ctx, s.cs, policyChecksNamespace))
				t.Fatalf("%s: not after %v: %s; status %+v", what, timeout, last, nc.Status)
			}
			require.NoError(t, s.cl.Healthy())
			time.Sleep(time.Second)
		}
	}
	describe := func(nc *v1alpha1.NetworkCheck, c *metav1.Condition) string {
		if c == nil {
			return fmt.Sprintf("reachability %q, no Reachable condition", nc.Status.Reachability)
		}
		return fmt.Sprintf("reachability %q, Reachable=%s %s: %q", nc.Status.Reachability, c.Status, c.Reason, c.Message)
	}

	// 1. Without a user policy the path works.
	nc, took := await("the check reads Reachable without a user policy", 3*time.Minute, func(nc *v1alpha1.NetworkCheck, c *metav1.Condition) string {
		if nc.Status.Reachability == v1alpha1.Reachable && c != nil && c.Reason == checkstatus.ReasonProbeSucceeded {
			return ""
		}
		return describe(nc, c)
	})
	require.NotNil(t, nc.Status.Vantage)
	require.Equal(t, v1alpha1.VantageAgent, nc.Status.Vantage.Mode, "the client has no sidecar: its node's agent probes")
	s.figure("NetworkCheck %s/%s (agent %s → pod %s) Reachable %.0f s after it was created", policyChecksNamespace, name,
		nc.Status.Vantage.ObserverPod, nc.Status.Target.Endpoint, took.Seconds())

	// 2. The workload's own policy blocks it; the engine enforces it.
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: policyChecksNamespace, Name: userPolicy},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	_, err = s.cs.NetworkingV1().NetworkPolicies(policyChecksNamespace).Create(ctx, deny, metav1.CreateOptions{})
	require.NoError(t, err)
	wantMessage := "denied by NetworkPolicy " + policyChecksNamespace + "/" + userPolicy + " (ingress of the destination)"
	nc, took = await("the blocked check reads Unreachable naming the policy", 3*time.Minute, func(nc *v1alpha1.NetworkCheck, c *metav1.Condition) string {
		if nc.Status.Reachability == v1alpha1.Unreachable && c != nil && c.Status == metav1.ConditionFalse &&
			c.Reason == checkstatus.ReasonNetworkPolicyDenied && strings.HasPrefix(c.Message, wantMessage) {
			return ""
		}
		return describe(nc, c)
	})
	require.NotEmpty(t, nc.Status.Failures)
	require.Equal(t, checkstatus.ReasonTCPConnectError, nc.Status.Failures[0].Reason, "the failure log keeps what the probe reported")
	var msg string
	for _, c := range nc.Status.Conditions {
		if c.Type == v1alpha1.ConditionReachable {
			msg = c.Message
		}
	}
	s.figure("NetworkPolicy %s/%s created → the check reads Unreachable, NetworkPolicyDenied %.0f s later: %q", policyChecksNamespace, userPolicy, took.Seconds(), msg)

	// 3. Deleted: reachable again.
	require.NoError(t, s.cs.NetworkingV1().NetworkPolicies(policyChecksNamespace).Delete(ctx, userPolicy, metav1.DeleteOptions{}))
	_, took = await("the check reads Reachable once the policy is deleted", 3*time.Minute, func(nc *v1alpha1.NetworkCheck, c *metav1.Condition) string {
		if nc.Status.Reachability == v1alpha1.Reachable && c != nil && c.Reason == checkstatus.ReasonProbeSucceeded {
			return ""
		}
		return describe(nc, c)
	})
	s.figure("NetworkPolicy %s/%s deleted → the check reads Reachable %.0f s later; the declared-check part of the step took %.0f s",
		policyChecksNamespace, userPolicy, took.Seconds(), time.Since(start).Seconds())
}
