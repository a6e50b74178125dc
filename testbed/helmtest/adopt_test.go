// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// Moving from `kubectl apply -k deploy/agent-gateway` to the chart, with the commands of
// docs/helm.md: the kustomize objects labelled and annotated for the release are adopted
// by `helm install --force-conflicts` (Helm takes over the fields kubectl applied), the
// user's TLS Secret is kept, and the generator's hash-named ConfigMaps are deleted.
func TestAdoptKustomizeInstall(t *testing.T) {
	bin, _ := helm(t)
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	if cp.Binaries.Kubectl == "" {
		t.Fatal("bin/kubectl missing: run make kube-bins")
	}
	cs, err := cp.Clientset()
	require.NoError(t, err)
	ctx := context.Background()
	home := t.TempDir()
	sh := func(script string) string {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = repoPath(t)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig, "PATH="+filepath.Dir(cp.Binaries.Kubectl)+":"+filepath.Dir(bin)+":"+os.Getenv("PATH"),
			"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s\n%s", script, out)
		return string(out)
	}

	// The kustomize install, with a TLS Secret of the user's.
	sh(`kubectl apply --server-side -k deploy/agent-gateway
kubectl -n netpulse create secret generic netpulse-gateway-tls --type=kubernetes.io/tls --from-literal=tls.crt=mine --from-literal=tls.key=mine --from-literal=ca.crt=mine`)

	// docs/helm.md, "Moving from kubectl apply -k".
	sh(`kubectl kustomize deploy/agent-gateway | kubectl label -f - app.kubernetes.io/managed-by=Helm --overwrite
kubectl kustomize deploy/agent-gateway | kubectl annotate -f - meta.helm.sh/release-name=netpulse meta.helm.sh/release-namespace=netpulse --overwrite
helm install netpulse deploy/helm/netpulse -n netpulse --set tls.generate.enabled=false --force-conflicts
kubectl -n netpulse get configmaps -o name | grep -E '/netpulse-(agent|gateway)-config-' | xargs kubectl -n netpulse delete`)

	require.Contains(t, sh("helm status netpulse -n netpulse"), "STATUS: deployed")
	cms, err := cs.CoreV1().ConfigMaps("netpulse").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, cm := range cms.Items {
		if strings.HasPrefix(cm.Name, "netpulse-") {
			names = append(names, cm.Name)
		}
	}
	require.ElementsMatch(t, []string{"netpulse-agent-config", "netpulse-gateway-config"}, names)
	ds, err := cs.AppsV1().DaemonSets("netpulse").Get(ctx, "netpulse-agent", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "Helm", ds.Labels["app.kubernetes.io/managed-by"])
	require.Equal(t, "netpulse-agent-config", ds.Spec.Template.Spec.Volumes[0].ConfigMap.Name)
	require.NotEmpty(t, ds.Spec.Template.Annotations["checksum/config"])
	secret, err := cs.CoreV1().Secrets("netpulse").Get(ctx, "netpulse-gateway-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "mine", string(secret.Data["tls.crt"]), "the user's Secret is kept")
	// The adopted objects are the release's now: uninstall removes them.
	sh("helm uninstall netpulse -n netpulse --wait")
	_, err = cs.AppsV1().DaemonSets("netpulse").Get(ctx, "netpulse-agent", metav1.GetOptions{})
	require.Error(t, err)
	sh("kubectl get crd podnetworkhealths.netpulse.io")
}
