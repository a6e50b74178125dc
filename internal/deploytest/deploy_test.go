// Package deploytest applies the deploy/ variants with the real kubectl to the real local
// control plane, as users do: `kubectl apply -k deploy/<variant>`.
package deploytest

import (
	"context"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/internal/kubetest"
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
