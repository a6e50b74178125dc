// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2ereal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/realcluster"
)

// checksNamespace is the workload namespace of the declared check.
const checksNamespace = "shop"

// sidecarCheck follows docs/checks.md's sidecar mode as a user would on real nodes: the
// gateway told to accept the workload's service account as a sidecar (helm upgrade with
// gateway.config and networkPolicy.sidecarNamespaceSelector), the sidecar's ConfigMaps and
// deploy/sidecar/rbac.yaml in the workload's namespace, a Deployment patched with
// `kubectl patch --patch-file deploy/sidecar/patch.yaml`, a Service as the target, and a
// NetworkCheck from the workload's pods: the gateway places it on the sidecar, the sidecar
// probes from the pod's own network namespace, and the check reads Reachable.
func (s *suite) sidecarCheck(t *testing.T) {
	ctx := context.Background()
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	start := time.Now()

	// The gateway: the workload's service account in the sidecar role; sidecars of labelled
	// namespaces through the NetworkPolicy.
	s.helmCmd(t, "upgrade", "netpulse", s.chart, "-n", namespace, "--reuse-values",
		"--set-json", `gateway.config={"extensions":{"k8s_token_auth":{"service_accounts":["netpulse/netpulse-agent","shop/default"],"agent_service_accounts":["netpulse/netpulse-agent"]}}}`,
		"--set-json", `networkPolicy.sidecarNamespaceSelector={"matchLabels":{"netpulse.io/checks":"enabled"}}`)
	require.NoError(t, s.cl.WaitDeploymentAvailable(ctx, s.cs, namespace, "netpulse-gateway", 3*time.Minute))

	_, err = s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: checksNamespace, Labels: map[string]string{"netpulse.io/checks": "enabled"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sidecarCfg, err := os.ReadFile(filepath.Join(root, "deploy", "sidecar", "config", "sidecar.yaml"))
	require.NoError(t, err)
	tlsSecret, err := s.cs.CoreV1().Secrets(namespace).Get(ctx, "netpulse-gateway-tls", metav1.GetOptions{})
	require.NoError(t, err)
	for name, data := range map[string]map[string]string{
		"netpulse-sidecar-config": {"sidecar.yaml": string(sidecarCfg)},
		"netpulse-gateway-ca":     {"ca.crt": string(tlsSecret.Data["ca.crt"])},
		// The target's DNS server: a TCP port to reach (CoreDNS, the image the cluster has).
		"dns-corefile": {"Corefile": ".:53 {\n    errors\n}\n"},
	} {
		_, err := s.cs.CoreV1().ConfigMaps(checksNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// deploy/sidecar/rbac.yaml, in the workload's namespace (kubectl apply -n shop -f).
	kubectl := filepath.Join(root, "bin", "kubectl")
	s.kubectl(t, kubectl, "apply", "-n", checksNamespace, "-f", filepath.Join(root, "deploy", "sidecar", "rbac.yaml"))

	// The target: a Deployment and a Service.
	labels := map[string]string{"app": "dns"}
	_, err = s.cs.AppsV1().Deployments(checksNamespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "dns"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "dns", Image: realcluster.CoreDNSImage, ImagePullPolicy: corev1.PullNever,
				Args:         []string{"-conf", "/etc/coredns/Corefile"},
				Ports:        []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolTCP}},
				VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/coredns"}}}},
				Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "dns-corefile"}}}}}},
		}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = s.cs.CoreV1().Services(checksNamespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dns"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "dns-tcp", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolTCP}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)

	// The workload: any container (pause here), then the shipped sidecar patch.
	web := map[string]string{"app": "web"}
	_, err = s.cs.AppsV1().Deployments(checksNamespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: web}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: web},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: realcluster.PauseImage, ImagePullPolicy: corev1.PullNever}}},
		}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	s.kubectl(t, kubectl, "patch", "deployment", "web", "-n", checksNamespace, "--patch-file", filepath.Join(root, "deploy", "sidecar", "patch.yaml"))
	require.NoError(t, s.cl.WaitDeploymentAvailable(ctx, s.cs, checksNamespace, "dns", 2*time.Minute))
	require.NoError(t, s.cl.WaitDeploymentAvailable(ctx, s.cs, checksNamespace, "web", 2*time.Minute))

	_, err = s.pnh.NetpulseV1alpha1().NetworkChecks(checksNamespace).Create(ctx, &v1alpha1.NetworkCheck{
		ObjectMeta: metav1.ObjectMeta{Name: "web-to-dns"},
		Spec: v1alpha1.NetworkCheckSpec{
			Source:   v1alpha1.CheckSource{PodSelector: &metav1.LabelSelector{MatchLabels: web}},
			Target:   v1alpha1.CheckTarget{Service: &v1alpha1.CheckServiceTarget{Name: "dns", Port: 53}},
			Probe:    v1alpha1.ProbeTypeTCP,
			Interval: &metav1.Duration{Duration: 10 * time.Second},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	created := time.Now()
	var last string
	for {
		nc, err := s.pnh.NetpulseV1alpha1().NetworkChecks(checksNamespace).Get(ctx, "web-to-dns", metav1.GetOptions{})
		require.NoError(t, err)
		st := nc.Status
		switch {
		case st.Vantage == nil:
			last = "not placed yet"
		case st.Vantage.Mode != v1alpha1.VantageSidecar:
			t.Fatalf("placed on %q, want the sidecar: %+v", st.Vantage.Mode, st.Vantage)
		case st.Reachability != v1alpha1.Reachable:
			last = fmt.Sprintf("reachability %q (successes %d, failures %d)", st.Reachability, len(st.Successes), len(st.Failures))
		default:
			s.figure("NetworkCheck from a pod with the shipped sidecar patch to a Service → Reachable from the sidecar (%s, source %s) %.0f s after it was created (%.0f s with the set-up)",
				st.Vantage.ObserverPod, st.Vantage.SourceAddress, time.Since(created).Seconds(), time.Since(start).Seconds())
			return
		}
		if time.Since(created) > 3*time.Minute {
			t.Logf("pods of %s:\n%s", checksNamespace, s.cl.PodReport(ctx, s.cs, checksNamespace))
			t.Fatalf("the check is not Reachable from the sidecar: %s; status %+v", last, st)
		}
		time.Sleep(time.Second)
	}
}

func (s *suite) kubectl(t *testing.T, kubectl string, args ...string) {
	t.Helper()
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", s.cl.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl %v:\n%s", args, out)
}
