// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// One control plane serves every test in this package; each test uses its own namespace.
var shared *ControlPlane

func TestMain(m *testing.M) {
	cp, err := Start(context.Background(), Options{})
	if err != nil {
		// Fail loudly: these tests exist to prove the control plane works.
		println("FAIL: start local control plane:", err.Error())
		os.Exit(1)
	}
	shared = cp
	code := m.Run()
	if err := cp.Stop(); err != nil {
		println("stop local control plane:", err.Error())
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("k8s.io/klog/v2.(*loggingT).flushDaemon")); err != nil {
			println("goroutine leak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}

func testPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "probe"}},
		Spec: corev1.PodSpec{
			NodeName:   "node-a",
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none:1"}},
		},
	}
}

func TestPodCreateReadWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := shared.Clientset()
	require.NoError(t, err)
	ns := "foundation-pods"
	require.NoError(t, EnsureNamespace(ctx, cs, ns))
	waitDefaultServiceAccount(t, cs, ns)

	created, err := cs.CoreV1().Pods(ns).Create(ctx, testPod(ns, "p1"), metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := cs.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, created.UID, got.UID)
	require.Equal(t, "node-a", got.Spec.NodeName)

	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", "p1").String(),
		ResourceVersion: got.ResourceVersion,
	})
	require.NoError(t, err)
	defer w.Stop()

	// Play the kubelet: report an IP and readiness through the status subresource.
	got.Status.PodIP = "192.0.2.10"
	got.Status.PodIPs = []corev1.PodIP{{IP: "192.0.2.10"}, {IP: "2001:db8::10"}}
	got.Status.Phase = corev1.PodRunning
	got.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)

	select {
	case ev := <-w.ResultChan():
		require.Equal(t, watch.Modified, ev.Type)
		pod := ev.Object.(*corev1.Pod)
		require.Equal(t, "192.0.2.10", pod.Status.PodIP)
		require.Len(t, pod.Status.PodIPs, 2)
	case <-ctx.Done():
		t.Fatal("no watch event for the status update")
	}
}

func TestServiceAccountWithoutRBACIsDenied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := "foundation-rbac"
	saCfg, err := shared.ServiceAccountConfig(ctx, ns, "nobody")
	require.NoError(t, err)
	saClient, err := kubernetes.NewForConfig(saCfg)
	require.NoError(t, err)

	_, err = saClient.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.Error(t, err)
	require.Truef(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
	require.Contains(t, err.Error(), "system:serviceaccount:"+ns+":nobody")

	// The same identity may write once RBAC allows it, and only where it allows it.
	require.NoError(t, shared.Grant(ctx, ns, "nobody", false, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get"},
	}))
	require.Eventually(t, func() bool {
		_, err = saClient.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err)
	}, 10*time.Second, 100*time.Millisecond, "write still denied after grant: %v", err)
	_, err = saClient.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "write outside the granted namespace: %v", err)
}

// The controller manager's garbage collector deletes dependents of a deleted owner, which
// the exporter relies on (PodNetworkHealth objects are owned by their source pod).
func TestGarbageCollection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs, err := shared.Clientset()
	require.NoError(t, err)
	ns := "foundation-gc"
	require.NoError(t, EnsureNamespace(ctx, cs, ns))
	waitDefaultServiceAccount(t, cs, ns)
	owner, err := cs.CoreV1().Pods(ns).Create(ctx, testPod(ns, "owner"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID,
		}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	zero := int64(0)
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "dependent was not garbage-collected")
}

func TestAPIServerRestartKeepsState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := shared.Clientset()
	require.NoError(t, err)
	ns := "foundation-restart"
	require.NoError(t, EnsureNamespace(ctx, cs, ns))
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, shared.StopAPIServer())
	_, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
	require.Error(t, err, "API server should be unreachable while stopped")
	require.NoError(t, shared.StartAPIServer(ctx))
	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "kept", got.Name)
}

func TestAdminKubeconfig(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", shared.Kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, KubeVersion, v.GitVersion, "the binaries should be stamped with the release they are built from")
}

// Stop must leave no process behind and tolerate being called twice.
func TestStopLeavesNoProcesses(t *testing.T) {
	cp, err := Start(context.Background(), Options{NoControllerManager: true})
	require.NoError(t, err)
	pids := []int{cp.etcd.Pid(), cp.apiserver.Pid()}
	dir := cp.Dir
	require.NoError(t, cp.Stop())
	require.NoError(t, cp.Stop())
	for _, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "pid %d still alive", pid)
	}
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "temp dir %s not removed", dir)
}

func waitDefaultServiceAccount(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "default service account in %s never appeared", ns)
}
