// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// injectValues turns the readiness condition's writer and the gate's injection on, with
// extra readinessGate.inject values.
func injectValues(inject map[string]any) map[string]any {
	in := map[string]any{"enabled": true}
	for k, v := range inject {
		in[k] = v
	}
	return map[string]any{"readinessGate": map[string]any{"enabled": true, "inject": in}}
}

// installInjection applies the MutatingAdmissionPolicy and its binding that the chart
// renders with values (server-side apply through the dynamic client: client-go v0.35 has
// no typed client for admissionregistration.k8s.io/v1's policies).
func installInjection(t *testing.T, cp *kubetest.ControlPlane, values map[string]any) {
	t.Helper()
	var docs []byte
	for _, o := range render(t, values) {
		if o["kind"] == "MutatingAdmissionPolicy" || o["kind"] == "MutatingAdmissionPolicyBinding" {
			b, err := yaml.Marshal(o)
			require.NoError(t, err)
			docs = append(append(docs, "---\n"...), b...)
		}
	}
	require.NotEmpty(t, docs, "the chart renders no MutatingAdmissionPolicy")
	f := filepath.Join(t.TempDir(), "injection.yaml")
	require.NoError(t, os.WriteFile(f, docs, 0o644))
	require.NoError(t, kubetest.Apply(context.Background(), cp.Config, f))
}

// The readiness gate's injection (readinessGate.inject, deploy/readiness-gate-injection)
// on the real kube-apiserver (v1.36: MutatingAdmissionPolicy is GA, served and on by
// default). A pod created in a namespace carrying the label gets exactly one gate entry
// with the exporter's condition type, after the gates it declared itself; a pod that
// already declares it is not given a second; pods in an unlabelled namespace and in the
// release namespace (labelled too) get none, nor do pods in kube-system (labelled too) and
// system-critical pods in a labelled namespace. Removing the namespace's label or the binding
// (the operator's off switches, docs/helm.md) stops the injection for new pods. The
// v1beta1 objects (for 1.34 and 1.35 clusters, here served with runtime-config) do the same.
// No scheduler or kubelet runs: creating a pod is all admission needs.
func TestReadinessGateInjection(t *testing.T) {
	cp := kubetest.StartForTest(t, kubetest.Options{
		NoControllerManager: true,
		ExtraAPIServerFlags: []string{"--runtime-config=admissionregistration.k8s.io/v1beta1=true"},
	})
	cs, err := cp.Clientset()
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cp.Config)
	require.NoError(t, err)
	ctx := context.Background()
	const condType = "netpulse.io/network-ready"
	optIn := map[string]string{"netpulse.io/readiness-gate": "enabled"}
	for name, labels := range map[string]map[string]string{"opted-in": optIn, "plain": nil, Namespace: optIn, "kube-system": optIn} {
		if name == "kube-system" { // the API server's own: label it
			ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			ns.Labels = labels
			_, err = cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
			require.NoError(t, err)
		} else {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		// What the controller manager (not run here) would make; pods refer to it.
		_, err = cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// failurePolicy Fail here: a policy that errors refuses the pod with its error, rather
	// than admitting it ungated (Ignore, the default, is what the v1beta1 run below uses).
	installInjection(t, cp, injectValues(map[string]any{"failurePolicy": "Fail"}))
	// The API server picks policies up from its informers: wait until they act.
	waitGated(t, cs, "opted-in", true, "the policy never added the gate")

	require.Equal(t, []string{condType}, gatesOf(t, createPod(t, cs, "opted-in", "web")), "a pod in a labelled namespace")
	require.Equal(t, []string{condType}, gatesOf(t, createPod(t, cs, "opted-in", "declared", condType)), "a pod that declares the gate itself is not given a second")
	require.Equal(t, []string{"example.com/ready", condType}, gatesOf(t, createPod(t, cs, "opted-in", "own-gate", "example.com/ready")), "the pod's own gates are kept, ours appended")
	require.Empty(t, gatesOf(t, createPod(t, cs, "plain", "web")), "a pod in an unlabelled namespace")
	require.Empty(t, gatesOf(t, createPod(t, cs, Namespace, "gateway")), "a pod in netpulse's own namespace, labelled or not")
	// The cluster's own: kube-system, labelled too, and system-critical pods anywhere.
	require.Empty(t, gatesOf(t, createPod(t, cs, "kube-system", "coredns")), "a pod in kube-system, labelled or not")
	for _, pc := range []string{"system-node-critical", "system-cluster-critical"} {
		require.Empty(t, gatesOf(t, createPriorityPod(t, cs, "opted-in", "critical-"+pc, pc)), "a %s pod in a labelled namespace", pc)
	}

	// The manual way out for a pod already gated (docs/helm.md): the condition set with a
	// strategic merge patch of its status, as the documented kubectl patch sends it.
	_, err = cs.CoreV1().Pods("opted-in").Patch(ctx, "web", types.StrategicMergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"netpulse.io/network-ready","status":"True","reason":"Manual"}]}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	web, err := cs.CoreV1().Pods("opted-in").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, web.Status.Conditions, corev1.PodCondition{Type: condType, Status: corev1.ConditionTrue, Reason: "Manual"})

	// Off switch 1: the namespace's label.
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "opted-in", metav1.GetOptions{})
	require.NoError(t, err)
	delete(ns.Labels, "netpulse.io/readiness-gate")
	_, err = cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitGated(t, cs, "opted-in", false, "pods still gated after the namespace's label was removed")
	ns, err = cs.CoreV1().Namespaces().Get(ctx, "opted-in", metav1.GetOptions{})
	require.NoError(t, err)
	ns.Labels["netpulse.io/readiness-gate"] = "enabled"
	_, err = cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitGated(t, cs, "opted-in", true, "pods not gated again after the label came back")

	// Off switch 2: the binding. Without it the policy does nothing.
	v1 := schema.GroupVersion{Group: "admissionregistration.k8s.io", Version: "v1"}
	require.NoError(t, dyn.Resource(v1.WithResource("mutatingadmissionpolicybindings")).Delete(ctx, "netpulse-readiness-gate", metav1.DeleteOptions{}))
	waitGated(t, cs, "opted-in", false, "pods still gated after the binding was deleted")
	require.NoError(t, dyn.Resource(v1.WithResource("mutatingadmissionpolicies")).Delete(ctx, "netpulse-readiness-gate", metav1.DeleteOptions{}))

	// admissionregistration.k8s.io/v1beta1, with the default failurePolicy (Ignore).
	installInjection(t, cp, injectValues(map[string]any{"apiVersion": "admissionregistration.k8s.io/v1beta1"}))
	waitGated(t, cs, "opted-in", true, "the v1beta1 policy never added the gate")
	require.Equal(t, []string{condType}, gatesOf(t, createPod(t, cs, "opted-in", "web-beta")))
	require.Equal(t, []string{condType}, gatesOf(t, createPod(t, cs, "opted-in", "declared-beta", condType)))
	require.Empty(t, gatesOf(t, createPod(t, cs, "plain", "web-beta")))
	require.Empty(t, gatesOf(t, createPod(t, cs, Namespace, "gateway-beta")))
}

// createPod creates a pod (name empty: a generated one) declaring gates, and returns it as
// admitted.
func createPod(t *testing.T, cs kubernetes.Interface, ns, name string, gates ...string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			AutomountServiceAccountToken: new(bool),
		},
	}
	if name == "" {
		p.GenerateName = "probe-"
	}
	for _, g := range gates {
		p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: corev1.PodConditionType(g)})
	}
	created, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	require.NoError(t, err, "create pod %s/%s", ns, name)
	return created
}

// createPriorityPod creates a pod of a priority class, and returns it as admitted.
func createPriorityPod(t *testing.T, cs kubernetes.Interface, ns, name, priorityClass string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			AutomountServiceAccountToken: new(bool),
			PriorityClassName:            priorityClass,
		},
	}
	created, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	require.NoError(t, err, "create pod %s/%s", ns, name)
	return created
}

func gatesOf(t *testing.T, p *corev1.Pod) []string {
	t.Helper()
	var out []string
	for _, g := range p.Spec.ReadinessGates {
		out = append(out, string(g.ConditionType))
	}
	return out
}

// waitGated creates throwaway pods in ns until one is admitted gated (want) or ungated
// (!want): policy, binding and namespace label changes reach admission through the API
// server's informers, within about a second.
func waitGated(t *testing.T, cs kubernetes.Interface, ns string, want bool, msg string) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	defer func() {
		t.Logf("figure: pods in %s admitted gated=%v %.1f s after the change", ns, want, time.Since(start).Seconds())
	}()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := createPod(t, cs, ns, "")
		if err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			return false, err
		}
		return (len(p.Spec.ReadinessGates) > 0) == want, nil
	})
	require.NoError(t, err, msg)
}
