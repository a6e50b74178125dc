// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// The chart on the real kube-apiserver of testbed/kubetest: its rendered manifests pass a
// server-side dry run (CRD first, then everything, with the defaults and with every
// optional feature on); `helm install`, `helm upgrade` with changed values and
// `helm uninstall` leave the expected objects: uninstall deletes neither the CRD nor a
// PodNetworkHealth object (those owned by agent pods go with the pods, by garbage
// collection). The API server classifies the gateway ServiceAccount's writes into the
// chart's API Priority and Fairness FlowSchema and level (by the UIDs in its response
// headers), and back into service-accounts with them switched off. No scheduler or kubelet
// runs: pods stay Pending, nothing waits for them.
func TestInstallUpgradeUninstall(t *testing.T) {
	_, chart := helm(t)
	// With the controller manager: the DaemonSet controller makes an agent pod for a node,
	// and the garbage collector deletes what the agent pods own.
	cp := kubetest.StartForTest(t, kubetest.Options{})
	if cp.Binaries.Kubectl == "" {
		t.Fatal("bin/kubectl missing: run make kube-bins")
	}
	cs, err := cp.Clientset()
	require.NoError(t, err)
	ctx := context.Background()
	home := t.TempDir()
	run := func(bin string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	bin, _ := helm(t)
	helmOK := func(args ...string) string {
		t.Helper()
		out, err := run(bin, args...)
		require.NoError(t, err, "helm %v:\n%s", args, out)
		return out
	}
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := run(cp.Binaries.Kubectl, args...)
		require.NoError(t, err, "kubectl %v:\n%s", args, out)
		return out
	}

	// Server-side dry run of what helm template renders: the netpulse CRD first, then
	// everything. The optional objects' kinds come from stand-in CRDs
	// (testdata/third-party-crds.yaml); the release namespace must exist.
	kubectl("apply", "--server-side", "-f", "testdata/third-party-crds.yaml")
	kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com",
		"crd/prometheusrules.monitoring.coreos.com", "crd/certificates.cert-manager.io")
	kubectl("create", "namespace", "netpulse-dryrun")
	for name, values := range map[string]map[string]any{"defaults": nil, "all-features": allFeatures(t), "shards": shards2(), "shards relaying": shardsRelay()} {
		out, err := Template(bin, chart, values, "--include-crds", "--namespace", "netpulse-dryrun")
		require.NoError(t, err)
		objs, err := Decode(out)
		require.NoError(t, err)
		var crds, rest []string
		for _, doc := range strings.Split(string(out), "\n---") {
			if strings.Contains(doc, "\nkind: CustomResourceDefinition\n") {
				crds = append(crds, doc)
			} else if strings.TrimSpace(doc) != "" {
				rest = append(rest, doc)
			}
		}
		require.Len(t, crds, 4, name) // PodNetworkHealth, NetworkCheck, ZoneNetworkHealth and NetworkHealthSummary
		dir := t.TempDir()
		for file, docs := range map[string][]string{"crds.yaml": crds, "rest.yaml": rest} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(strings.Join(docs, "\n---\n")), 0o644))
		}
		kubectl("apply", "--server-side", "--dry-run=server", "-f", filepath.Join(dir, "crds.yaml"))
		applied := kubectl("apply", "--server-side", "--dry-run=server", "-f", filepath.Join(dir, "rest.yaml"))
		require.Equal(t, len(objs)-len(crds), strings.Count(applied, "serverside-applied (server dry run)"), "%s:\n%s", name, applied)
	}

	// A typo refuses the install, naming the key, before anything is created.
	out, err := run(bin, "install", "netpulse", chart, "-n", "netpulse", "--create-namespace", "--set", "probe.intervall=5s")
	require.Error(t, err)
	require.Contains(t, out, "additional properties 'intervall' not allowed")
	_, err = cs.CoreV1().Namespaces().Get(ctx, "netpulse", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a refused install created the namespace")

	// helm install, as docs/helm.md says.
	helmOK("install", "netpulse", chart, "-n", "netpulse", "--create-namespace")
	require.Contains(t, helmOK("status", "netpulse", "-n", "netpulse"), "STATUS: deployed")
	kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/podnetworkhealths.netpulse.io")
	ds, err := cs.AppsV1().DaemonSets("netpulse").Get(ctx, "netpulse-agent", metav1.GetOptions{})
	require.NoError(t, err)
	dep, err := cs.AppsV1().Deployments("netpulse").Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 2, *dep.Spec.Replicas)
	for _, get := range []func() error{
		func() error {
			_, err := cs.CoreV1().Services("netpulse").Get(ctx, "netpulse-gateway", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.PolicyV1().PodDisruptionBudgets("netpulse").Get(ctx, "netpulse-gateway", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.NetworkingV1().NetworkPolicies("netpulse").Get(ctx, "netpulse-gateway", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ConfigMaps("netpulse").Get(ctx, "netpulse-agent-config", metav1.GetOptions{})
			return err
		},
	} {
		require.NoError(t, get())
	}
	tlsSecret, err := cs.CoreV1().Secrets("netpulse").Get(ctx, "netpulse-gateway-tls", metav1.GetOptions{})
	require.NoError(t, err)
	verifyServingCert(t, tlsSecret.Data, "netpulse-gateway.netpulse.svc")

	can := sarFunc(t, cs)
	require.True(t, can("netpulse-gateway", "", "nodes", "status", "patch"), "node conditions are on by default")
	require.False(t, can("netpulse-gateway", "", "pods", "status", "patch"), "the readiness gate is off by default")
	require.True(t, can("netpulse-gateway", "authentication.k8s.io", "tokenreviews", "", "create"))
	require.True(t, issuerDiscoveryGranted(t, cs, "netpulse-gateway"), "k8s_token_auth reads the issuer's keys")
	require.True(t, can("netpulse-gateway", "coordination.k8s.io", "leases", "", "update"))
	require.False(t, can("netpulse-gateway", "", "secrets", "", "get"))
	require.True(t, can("netpulse-agent", "", "nodes", "", "watch"))
	require.False(t, can("netpulse-agent", "authentication.k8s.io", "tokenreviews", "", "create"))
	require.False(t, can("netpulse-agent", "netpulse.io", "podnetworkhealths", "", "create"))

	// API Priority and Fairness: the gateway's writes are classified into netpulse's own
	// FlowSchema and priority level, its Lease and reads are not.
	requireGatewayClassified(t, cs, cp.Config, "netpulse")

	// PodNetworkHealth objects as the gateway writes them: in the source (agent) pod's
	// namespace, owned by that pod. The agent pod is made as the DaemonSet controller would
	// (kubetest runs none): from the DaemonSet's template, owned by it. And an object owned
	// by no pod.
	agent, err := cs.CoreV1().Pods("netpulse").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "netpulse-agent-node-a", Labels: ds.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Spec: *ds.Spec.Template.Spec.DeepCopy(),
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pnh := filepath.Join(t.TempDir(), "pnh.yaml")
	require.NoError(t, os.WriteFile(pnh, []byte(fmt.Sprintf(`apiVersion: netpulse.io/v1alpha1
kind: PodNetworkHealth
metadata:
  name: agent-to-node-a
  namespace: netpulse
  ownerReferences: [{apiVersion: v1, kind: Pod, name: %s, uid: %s, blockOwnerDeletion: true}]
spec:
  sourcePodRef: {name: %[1]s, namespace: netpulse, uid: %[2]s}
  targetKind: Node
  targetNodeRef: {name: node-a}
---
apiVersion: netpulse.io/v1alpha1
kind: PodNetworkHealth
metadata: {name: web-1-to-node-a, namespace: default}
spec:
  sourcePodRef: {name: web-1, namespace: default}
  targetKind: Node
  targetNodeRef: {name: node-a}
`, agent.Name, agent.UID)), 0o644))
	kubectl("apply", "--server-side", "-f", pnh)

	// helm upgrade with changed values: the configuration, the pods' checksum, the replicas,
	// the readiness gate's feature gate and RBAC; the generated TLS Secret is kept.
	oldChecksum := ds.Spec.Template.Annotations["checksum/config"]
	require.NotEmpty(t, oldChecksum)
	// The CRD upgrade docs/helm.md prescribes before `helm upgrade` (Helm leaves crds/ alone).
	require.Contains(t, kubectl("apply", "--server-side", "--force-conflicts", "-f", filepath.Join(chart, "crds")),
		"customresourcedefinition.apiextensions.k8s.io/podnetworkhealths.netpulse.io serverside-applied")
	helmOK("upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values",
		"--set", "probe.interval=30s", "--set", "readinessGate.enabled=true", "--set", "gateway.replicas=3")
	cm, err := cs.CoreV1().ConfigMaps("netpulse").Get(ctx, "netpulse-agent-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, cm.Data["agent.yaml"], "interval: ${env:NETPULSE_PROBE_INTERVAL:-30s}")
	ds, err = cs.AppsV1().DaemonSets("netpulse").Get(ctx, "netpulse-agent", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, oldChecksum, ds.Spec.Template.Annotations["checksum/config"], "the agents roll")
	dep, err = cs.AppsV1().Deployments("netpulse").Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 3, *dep.Spec.Replicas)
	require.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--feature-gates=exporter.podnetworkhealth.readinessGate")
	require.True(t, can("netpulse-gateway", "", "pods", "status", "patch"))
	kept, err := cs.CoreV1().Secrets("netpulse").Get(ctx, "netpulse-gateway-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, tlsSecret.Data, kept.Data, "an upgrade keeps the generated certificate")

	// A bad value refuses the upgrade; the release stays where it was.
	out, err = run(bin, "upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values", "--set", "probe.k=0")
	require.Error(t, err)
	require.Contains(t, out, "/probe/k")
	require.Contains(t, helmOK("status", "netpulse", "-n", "netpulse"), "REVISION: 2")

	// Switching a writer off takes its RBAC away; switching API Priority and Fairness off
	// puts the gateway's writes back under service-accounts.
	helmOK("upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values", "--set", "nodeConditions.enabled=false",
		"--set", "apiPriorityAndFairness.enabled=false")
	requireGatewayUnclassified(t, cs, cp.Config, "netpulse")
	_, err = cs.RbacV1().ClusterRoles().Get(ctx, "netpulse-gateway-node-conditions", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "node-conditions ClusterRole left after switching it off: %v", err)
	require.False(t, can("netpulse-gateway", "", "nodes", "status", "patch"))

	// Sharding the gateway: the Deployment is replaced by one per shard, each with its
	// leader Service; the generated certificate, which covered netpulse-gateway only, is
	// remade for every shard's Service; the shards' Leases may be written.
	helmOK("upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values", "--set", "gateway.shards=2",
		"--set", "apiPriorityAndFairness.enabled=true")
	// Every shard's writes in the one level again (the same ServiceAccount).
	requireGatewayClassified(t, cs, cp.Config, "netpulse")
	_, err = cs.AppsV1().Deployments("netpulse").Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the unsharded Deployment left: %v", err)
	for i := range 2 {
		name := fmt.Sprintf("netpulse-gateway-%d", i)
		dep, err := cs.AppsV1().Deployments("netpulse").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 3, *dep.Spec.Replicas)
		require.Equal(t, fmt.Sprint(i), dep.Spec.Selector.MatchLabels["netpulse.io/shard"])
		svc, err := cs.CoreV1().Services("netpulse").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), svc.Spec.Selector["netpulse.io/shard"])
		_, err = cs.PolicyV1().PodDisruptionBudgets("netpulse").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:netpulse:netpulse-gateway",
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:netpulse", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "netpulse", Group: "coordination.k8s.io", Resource: "leases", Name: name, Verb: "update"},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.True(t, r.Status.Allowed, "Lease %s", name)
	}
	resharded, err := cs.CoreV1().Secrets("netpulse").Get(ctx, "netpulse-gateway-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, tlsSecret.Data, resharded.Data, "the certificate for one gateway was kept")
	for _, host := range []string{"netpulse-gateway.netpulse.svc", "netpulse-gateway-0.netpulse.svc", "netpulse-gateway-1.netpulse.svc.cluster.local", "netpulse-gateway-relay.netpulse.svc"} {
		verifyServingCert(t, resharded.Data, host)
	}
	// The shards relay (gateway.relay, the default): the agents send to the relay Service.
	cm, err = cs.CoreV1().ConfigMaps("netpulse").Get(ctx, "netpulse-agent-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, cm.Data["agent.yaml"], "netpulse-gateway-relay.netpulse.svc:4317")
	relaySvc, err := cs.CoreV1().Services("netpulse").Get(ctx, "netpulse-gateway-relay", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"app.kubernetes.io/name": "netpulse-gateway", "netpulse.io/gateway-leader": "true"}, relaySvc.Spec.Selector)
	// Back to one gateway: the certificate, which covers it, is kept.
	helmOK("upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values", "--set", "gateway.shards=1")
	_, err = cs.AppsV1().Deployments("netpulse").Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = cs.AppsV1().Deployments("netpulse").Get(ctx, "netpulse-gateway-1", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "shard 1's Deployment left: %v", err)
	kept, err = cs.CoreV1().Secrets("netpulse").Get(ctx, "netpulse-gateway-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, resharded.Data, kept.Data, "an upgrade to fewer shards keeps the certificate")

	// helm uninstall removes every object of the release. It deletes neither the CRD nor
	// any PodNetworkHealth object; the garbage collector deletes the agent pods' objects
	// with the agent pods (docs/helm.md).
	helmOK("uninstall", "netpulse", "-n", "netpulse", "--wait")
	left := map[string][]string{}
	names := func(kind string) func(runtime.Object, error) {
		return func(list runtime.Object, err error) {
			t.Helper()
			require.NoError(t, err)
			items, err := meta.ExtractList(list)
			require.NoError(t, err)
			for _, it := range items {
				o, err := meta.Accessor(it)
				require.NoError(t, err)
				if strings.HasPrefix(o.GetName(), "netpulse") && o.GetNamespace() != "netpulse-dryrun" {
					left[kind] = append(left[kind], o.GetName())
				}
			}
		}
	}
	opts := metav1.ListOptions{}
	names("DaemonSet")(cs.AppsV1().DaemonSets("netpulse").List(ctx, opts))
	names("Deployment")(cs.AppsV1().Deployments("netpulse").List(ctx, opts))
	names("Service")(cs.CoreV1().Services("netpulse").List(ctx, opts))
	names("ConfigMap")(cs.CoreV1().ConfigMaps("netpulse").List(ctx, opts))
	names("Secret")(cs.CoreV1().Secrets("netpulse").List(ctx, opts))
	names("ServiceAccount")(cs.CoreV1().ServiceAccounts("netpulse").List(ctx, opts))
	names("Role")(cs.RbacV1().Roles("netpulse").List(ctx, opts))
	names("RoleBinding")(cs.RbacV1().RoleBindings("netpulse").List(ctx, opts))
	names("ClusterRole")(cs.RbacV1().ClusterRoles().List(ctx, opts))
	names("ClusterRoleBinding")(cs.RbacV1().ClusterRoleBindings().List(ctx, opts))
	names("PodDisruptionBudget")(cs.PolicyV1().PodDisruptionBudgets("netpulse").List(ctx, opts))
	names("NetworkPolicy")(cs.NetworkingV1().NetworkPolicies("netpulse").List(ctx, opts))
	names("FlowSchema")(cs.FlowcontrolV1().FlowSchemas().List(ctx, opts))
	names("PriorityLevelConfiguration")(cs.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, opts))
	require.Empty(t, left, "helm uninstall left objects behind")
	kubectl("get", "crd", "podnetworkhealths.netpulse.io")
	require.Contains(t, kubectl("get", "pnh", "-A", "-o", "name"), "podnetworkhealth.netpulse.io/web-1-to-node-a")
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Pods("netpulse").Get(ctx, agent.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 200*time.Millisecond, "the agent pod outlived its DaemonSet")
	// Its object is now owned by a pod that is gone: the garbage collector deletes it once
	// it has discovered the CRD's kind (up to 30 s after the CRD appeared; not waited for).
	owned, err := exec.Command(cp.Binaries.Kubectl, "--kubeconfig", cp.Kubeconfig, "get", "pnh", "-n", "netpulse", "agent-to-node-a",
		"-o", "jsonpath={.metadata.ownerReferences[0].uid}").CombinedOutput()
	if err == nil {
		require.Equal(t, string(agent.UID), string(owned))
	} else {
		require.Contains(t, string(owned), "NotFound")
	}
	require.NotContains(t, helmOK("list", "-A"), "netpulse\t")
}

// sarFunc asks the API server whether a netpulse ServiceAccount may do something.
func sarFunc(t *testing.T, cs kubernetes.Interface) func(sa, group, resource, subresource, verb string) bool {
	return func(sa, group, resource, subresource, verb string) bool {
		t.Helper()
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:netpulse:" + sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:netpulse", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "netpulse", Group: group, Resource: resource, Subresource: subresource, Verb: verb},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r.Status.Allowed
	}
}

// issuerDiscoveryGranted: may sa read the service-account issuer's keys (GET
// /openid/v1/jwks) by a grant to the account itself? Asked without the account's groups,
// so the default grant to every service account (group system:serviceaccounts) does not
// count: only the chart's own binding does.
func issuerDiscoveryGranted(t *testing.T, cs kubernetes.Interface, sa string) bool {
	t.Helper()
	r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  "system:serviceaccount:netpulse:" + sa,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/openid/v1/jwks", Verb: "get"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// verifyServingCert checks that a TLS Secret's certificate is valid for host, signed by
// its ca.crt, with a key that matches.
func verifyServingCert(t *testing.T, data map[string][]byte, host string) {
	t.Helper()
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		require.NotEmpty(t, data[k], k)
	}
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(data["ca.crt"]))
	block, _ := pem.Decode(data["tls.crt"])
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	_, err = cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err)
}
