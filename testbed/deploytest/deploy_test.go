// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package deploytest applies the deploy/ variants with the real kubectl to the real local
// control plane, as users do: `kubectl apply -k deploy/<variant>`.
package deploytest

import (
	"context"
	"os/exec"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

func TestKubectlApplyVariants(t *testing.T) {
	cp := kubetest.StartForTest(t, kubetest.Options{})
	if cp.Binaries.Kubectl == "" {
		t.Fatal("bin/kubectl missing: run make kube-bins")
	}
	cs, err := cp.Clientset()
	require.NoError(t, err)
	ctx := context.Background()
	kubectl := func(args ...string) string {
		cmd := exec.Command(cp.Binaries.Kubectl, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kubectl %v:\n%s", args, out)
		return string(out)
	}

	kubectl("apply", "--server-side", "-k", kubetest.DeployPath("agent-gateway"))
	ds, err := cs.AppsV1().DaemonSets("netpulse").Get(ctx, "netpulse-agent", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "0 2147483647", ds.Spec.Template.Spec.SecurityContext.Sysctls[0].Value)
	require.True(t, *ds.Spec.Template.Spec.SecurityContext.RunAsNonRoot)
	require.True(t, *ds.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem)
	dep, err := cs.AppsV1().Deployments("netpulse").Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(2), *dep.Spec.Replicas)
	_, err = cs.PolicyV1().PodDisruptionBudgets("netpulse").Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "netpulse", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	// Least privilege for agent authentication: the gateway may create TokenReviews and do
	// nothing else with them, nor mint tokens; agents may not review tokens.
	gw, err := cs.RbacV1().ClusterRoles().Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	var authn []rbacv1.PolicyRule
	for _, r := range gw.Rules {
		if slices.Contains(r.APIGroups, "authentication.k8s.io") || slices.Contains(r.APIGroups, "*") {
			authn = append(authn, r)
		}
	}
	require.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}}, authn)
	canIn := func(sa, namespace, group, resource, subresource, verb string) bool {
		t.Helper()
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:netpulse:" + sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:netpulse", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Group: group, Resource: resource, Subresource: subresource, Verb: verb},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r.Status.Allowed
	}
	can := func(sa, group, resource, subresource, verb string) bool {
		t.Helper()
		return canIn(sa, "netpulse", group, resource, subresource, verb)
	}
	require.True(t, can("netpulse-gateway", "authentication.k8s.io", "tokenreviews", "", "create"))
	// k8s_token_auth's local verification reads the issuer's keys: granted to the gateway's
	// account itself (asked without its groups, so the cluster's default grant to every
	// service account does not count), and to the agents by nothing of ours.
	discovery := func(sa string) bool {
		t.Helper()
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:netpulse:" + sa,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/openid/v1/jwks", Verb: "get"},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r.Status.Allowed
	}
	require.True(t, discovery("netpulse-gateway"))
	require.False(t, discovery("netpulse-agent"))
	for _, verb := range []string{"get", "list", "watch", "update", "delete"} {
		require.False(t, can("netpulse-gateway", "authentication.k8s.io", "tokenreviews", "", verb), "gateway %s tokenreviews", verb)
	}
	require.False(t, can("netpulse-gateway", "", "serviceaccounts", "token", "create"), "the gateway mints no tokens")
	require.False(t, can("netpulse-gateway", "authorization.k8s.io", "subjectaccessreviews", "", "create"))
	require.False(t, can("netpulse-agent", "authentication.k8s.io", "tokenreviews", "", "create"), "agents review no tokens")
	require.False(t, can("netpulse-agent", "", "serviceaccounts", "token", "create"), "agents mint no tokens")

	// The gateway's verbs are what its code calls, no more (issue 40, item 5;
	// docs/security.md#rbac): the writes it makes are allowed, the ones it never makes are not.
	for _, r := range []struct {
		group, resource, sub, verb string
		ns                         string
		want                       bool
	}{
		{"netpulse.io", "podnetworkhealths", "", "create", "shop", true},
		{"netpulse.io", "podnetworkhealths", "", "update", "shop", true},
		{"netpulse.io", "podnetworkhealths", "", "delete", "shop", true},
		{"netpulse.io", "podnetworkhealths", "", "patch", "shop", false},
		{"netpulse.io", "podnetworkhealths", "status", "update", "shop", true},
		{"netpulse.io", "podnetworkhealths", "status", "patch", "shop", false},
		{"netpulse.io", "zonenetworkhealths", "", "delete", "", true},
		{"netpulse.io", "zonenetworkhealths", "", "update", "", false},
		{"netpulse.io", "zonenetworkhealths", "status", "update", "", true},
		{"", "events", "", "create", "shop", true},
		{"", "events", "", "patch", "shop", false},
		{"events.k8s.io", "events", "", "create", "shop", false},
		{"netpulse.io", "networkchecks", "", "patch", "shop", true},
		{"netpulse.io", "networkchecks", "", "update", "shop", false},
		{"netpulse.io", "networkchecks", "status", "patch", "shop", true},
		{"netpulse.io", "networkchecks", "status", "update", "shop", false},
		{"", "nodes", "status", "patch", "", true},
		{"", "nodes", "", "patch", "", false},
		{"", "pods", "", "patch", "netpulse", true}, // the leader label; the admission policy limits it
		{"", "pods", "", "patch", "shop", false},
		{"coordination.k8s.io", "leases", "", "update", "netpulse", true},
		{"coordination.k8s.io", "leases", "", "delete", "netpulse", false},
		// The writer's summary beside its Lease: created once, its status updated, nothing else;
		// listed and watched there by the view (netpulse_view), which reads the Leases too.
		{"netpulse.io", "networkhealthsummaries", "", "create", "netpulse", true},
		{"netpulse.io", "networkhealthsummaries", "", "watch", "netpulse", true},
		{"netpulse.io", "networkhealthsummaries", "", "list", "shop", false},
		{"coordination.k8s.io", "leases", "", "get", "netpulse", true},
		{"netpulse.io", "networkhealthsummaries", "status", "update", "netpulse", true},
		{"netpulse.io", "networkhealthsummaries", "", "update", "netpulse", false},
		{"netpulse.io", "networkhealthsummaries", "", "delete", "netpulse", false},
		{"netpulse.io", "networkhealthsummaries", "", "create", "shop", false},
		// checks.explain_network_policy: the policies and namespaces are watched, never written.
		{"networking.k8s.io", "networkpolicies", "", "watch", "", true},
		{"networking.k8s.io", "networkpolicies", "", "create", "shop", false},
		{"", "namespaces", "", "list", "", true},
		{"", "namespaces", "", "update", "", false},
	} {
		got := canIn("netpulse-gateway", r.ns, r.group, r.resource, r.sub, r.verb)
		require.Equal(t, r.want, got, "gateway %s %s/%s (%s) in %q", r.verb, r.resource, r.sub, r.group, r.ns)
	}
	// ... and the admission policy that limits its patches is installed and bound.
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "netpulse-gateway-writes", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, "netpulse-gateway-writes", metav1.GetOptions{})
	require.NoError(t, err)
	// ... and so is its API Priority and Fairness level (the classification itself:
	// testbed/helmtest, TestInstallUpgradeUninstall).
	fs, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "netpulse-gateway", fs.Spec.PriorityLevelConfiguration.Name)
	_, err = cs.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)

	// kubectl knows the new kind by its short name and category.
	require.Contains(t, kubectl("get", "pnh", "-A"), "No resources found")
	require.Contains(t, kubectl("api-resources", "--categories=netpulse"), "podnetworkhealths")

	// The all-in-one variant over it: the gateway is not part of it.
	kubectl("apply", "--server-side", "-k", kubetest.DeployPath("all-in-one"))
	role, err := cs.RbacV1().Roles("netpulse").Get(ctx, "netpulse-agent-all-in-one", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, role.Rules)
	out := kubectl("kustomize", kubetest.DeployPath("all-in-one"))
	require.NotContains(t, out, "name: netpulse-gateway\n", "the all-in-one variant has no gateway")
	require.Contains(t, out, "pod_network_health:")
}
