// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/internal/kubeclient"
)

// The condition types and the leader label of the shipped gateway configuration, which
// deploy/rbac/gateway-admission-policy.yaml names.
const (
	nodeConditionType  = "netpulse.io/PodNetworkProblem"
	readinessCondition = "netpulse.io/network-ready"
	leaderLabelKey     = "netpulse.io/gateway-leader"
)

// gatewayClient is a client of the gateway's ServiceAccount (its kubeconfig from TestMain:
// a token bound to no pod).
func gatewayClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := kubeclient.Config{AuthType: kubeclient.AuthKubeConfig, Kubeconfig: gatewayKC, QPS: 50, Burst: 100}.RESTConfig("vap-test")
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// podBoundClient authenticates as the gateway's ServiceAccount with a token bound to pod,
// as the kubelet projects it: the API server adds the pod's name to the user's extra.
func podBoundClient(t *testing.T, pod *corev1.Pod) kubernetes.Interface {
	t.Helper()
	expiry := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts("netpulse").CreateToken(context.Background(), "netpulse-gateway", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry, BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: cp.Config.Host, BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CACertPEM()}})
	require.NoError(t, err)
	return cs
}

// controlClient is a ServiceAccount with exactly the gateway's rights on nodes/status,
// pods/status and pods in netpulse's namespace, which the policy does not name: what the
// gateway could do with its RBAC alone.
func controlClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	const name = "vap-control"
	cfg, err := cp.ServiceAccountConfig(ctx, "netpulse", name)
	require.NoError(t, err)
	if _, err := admin.RbacV1().ClusterRoles().Get(ctx, "kubetest:netpulse:"+name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		require.NoError(t, cp.Grant(ctx, "netpulse", name, true, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/status", "pods/status"}, Verbs: []string{"patch"}}))
		require.NoError(t, cp.Grant(ctx, "netpulse", name, false, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"}}))
	}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

func statusPatch(t *testing.T, status map[string]any) []byte {
	data, err := json.Marshal(map[string]any{"status": status})
	require.NoError(t, err)
	return data
}

func patchNodeStatus(cs kubernetes.Interface, node string, patch []byte) error {
	_, err := cs.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func patchPodStatus(cs kubernetes.Interface, ns, pod string, patch []byte) error {
	_, err := cs.CoreV1().Pods(ns).Patch(context.Background(), pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func patchPod(cs kubernetes.Interface, ns, pod string, patch string) error {
	_, err := cs.CoreV1().Pods(ns).Patch(context.Background(), pod, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// deniedByPolicy: the request was refused by netpulse's ValidatingAdmissionPolicy (403,
// naming the policy), not by RBAC.
func deniedByPolicy(t *testing.T, err error, what string) {
	t.Helper()
	if assert.Error(t, err, "%s: allowed", what) {
		assert.True(t, apierrors.IsForbidden(err), "%s: %v", what, err)
		assert.Contains(t, err.Error(), "netpulse-gateway-writes", "%s: not the policy's denial: %v", what, err)
	}
}

// Issue 40, item 5: the gateway's RBAC allows patch on nodes/status and pods/status with no
// limit on what changes (a node's labels, addresses, the kubelet's Ready condition; a pod's
// IP, its containers' readiness, its labels) and patch on the pods of its namespace (their
// images). deploy/rbac/gateway-admission-policy.yaml (the chart's gatewayAdmissionPolicy)
// lets the gateway's ServiceAccount change netpulse's own condition types and its leader
// label and nothing else. Each denied request is first shown allowed for a ServiceAccount
// with the same RBAC that the policy does not name.
func TestGatewayAdmissionPolicy(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	gw, control := gatewayClient(t), controlClient(t)

	// A node with the kubelet's Ready condition and a pod with its Ready condition.
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vap-node",
		Labels: map[string]string{"topology.kubernetes.io/zone": "a"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), "vap-node", metav1.DeleteOptions{}) })
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}}
	node, err = admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
	pod := makePod(t, "vap", "web-0", "vap-node")
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}
	pod.Status.PodIP, pod.Status.PodIPs = "10.1.0.5", []corev1.PodIP{{IP: "10.1.0.5"}}
	_, err = admin.CoreV1().Pods("vap").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)

	readyTrue := statusPatch(t, map[string]any{"conditions": []map[string]any{{"type": "Ready", "status": "False", "reason": "Forged", "lastTransitionTime": now}}})
	// The policy is in force once the API server's policy informer has it: wait for the
	// first denial of a patch that changes something every time (an unchanged object is
	// admitted whatever the patch).
	probe := 0
	require.Eventually(t, func() bool {
		probe++
		err := patchNodeStatus(gw, "vap-node", []byte(fmt.Sprintf(`{"status":{"conditions":[{"type":"Probe","status":"True","reason":"Probe%d"}]}}`, probe)))
		return err != nil && strings.Contains(err.Error(), "netpulse-gateway-writes")
	}, 30*time.Second, 200*time.Millisecond, "the policy never denied the gateway's patch of another condition type")
	require.NoError(t, patchNodeStatus(admin, "vap-node", []byte(`{"status":{"conditions":[{"type":"Probe","$patch":"delete"}]}}`)))

	// Allowed: netpulse's node condition, set and removed, exactly as the exporter writes it.
	cond := corev1.NodeCondition{Type: nodeConditionType, Status: corev1.ConditionTrue, Reason: "PodNetworkUnreachable", Message: "test", LastHeartbeatTime: now, LastTransitionTime: now}
	require.NoError(t, apply.SetNodeCondition(ctx, gw, node, cond), "the gateway sets its node condition")
	cond.Status, cond.Reason = corev1.ConditionFalse, "PodNetworkReachable"
	require.NoError(t, apply.SetNodeCondition(ctx, gw, node, cond), "the gateway changes its node condition")
	require.NoError(t, apply.RemoveNodeCondition(ctx, gw, "vap-node", nodeConditionType), "the gateway removes its node condition")

	// Denied: another condition type (the kubelet's Ready), added, changed or removed.
	// (The gateway's request first: once the control has made the change, the same patch
	// changes nothing and is admitted whatever the policy says.)
	err = patchNodeStatus(gw, "vap-node", readyTrue)
	t.Logf("the denial: %v", err)
	deniedByPolicy(t, err, "node Ready changed")
	require.NoError(t, patchNodeStatus(control, "vap-node", readyTrue), "control: RBAC alone lets Ready be forged")
	otherType := statusPatch(t, map[string]any{"conditions": []map[string]any{{"type": "NetworkUnavailable", "status": "True", "reason": "X", "lastTransitionTime": now}}})
	deniedByPolicy(t, patchNodeStatus(gw, "vap-node", otherType), "a condition of another type added")
	removeReady := statusPatch(t, map[string]any{"conditions": []map[string]any{{"type": "Ready", "$patch": "delete"}}})
	// (Ready is still there: the gateway's patches were refused.)
	deniedByPolicy(t, patchNodeStatus(gw, "vap-node", removeReady), "node Ready removed")
	// ... nor another status field, nor labels through the status subresource (which the
	// node status strategy keeps), nor the node itself.
	addresses := statusPatch(t, map[string]any{"addresses": []map[string]any{{"type": "InternalIP", "address": "198.51.100.66"}}})
	deniedByPolicy(t, patchNodeStatus(gw, "vap-node", addresses), "node addresses")
	require.NoError(t, patchNodeStatus(control, "vap-node", addresses), "control: RBAC alone lets the node's addresses be changed")
	relabel := []byte(`{"metadata":{"labels":{"topology.kubernetes.io/zone":"b"}}}`)
	deniedByPolicy(t, patchNodeStatus(gw, "vap-node", relabel), "node labels through nodes/status")
	require.NoError(t, patchNodeStatus(control, "vap-node", relabel), "control: RBAC alone lets a node be relabelled through nodes/status")
	mixed := statusPatch(t, map[string]any{"conditions": []map[string]any{
		{"type": nodeConditionType, "status": "True", "reason": "PodNetworkUnreachable", "lastTransitionTime": now},
		{"type": "Ready", "status": "Unknown", "reason": "Forged", "lastTransitionTime": now}}})
	deniedByPolicy(t, patchNodeStatus(gw, "vap-node", mixed), "netpulse's condition and Ready in one patch")
	_, err = gw.CoreV1().Nodes().Patch(ctx, "vap-node", types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	assert.True(t, apierrors.IsForbidden(err), "node spec: %v", err)
	got, err := admin.CoreV1().Nodes().Get(ctx, "vap-node", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, got.Spec.Unschedulable)

	// Pods: the readiness gate's condition is allowed; the pod's Ready, its IP and its
	// labels are not.
	require.NoError(t, apply.SetPodCondition(ctx, gw, "vap", "web-0", corev1.PodCondition{Type: readinessCondition, Status: corev1.ConditionTrue, Reason: "Reached", LastTransitionTime: now}),
		"the gateway sets its readiness condition")
	podReady := statusPatch(t, map[string]any{"conditions": []map[string]any{{"type": "Ready", "status": "True", "lastTransitionTime": now}}})
	deniedByPolicy(t, patchPodStatus(gw, "vap", "web-0", podReady), "pod Ready")
	podIP := []byte(`{"status":{"podIP":"10.1.0.99","podIPs":[{"ip":"10.1.0.99"}]}}`)
	_, err = gw.CoreV1().Pods("vap").Patch(ctx, "web-0", types.MergePatchType, podIP, metav1.PatchOptions{}, "status")
	deniedByPolicy(t, err, "a pod's IP (which EndpointSlices carry)")
	podMessage := statusPatch(t, map[string]any{"message": "forged"})
	deniedByPolicy(t, patchPodStatus(gw, "vap", "web-0", podMessage), "another field of a pod's status")
	podLabels := []byte(`{"metadata":{"labels":{"app":"other"}}}`)
	deniedByPolicy(t, patchPodStatus(gw, "vap", "web-0", podLabels), "pod labels through pods/status (which Services select by)")
	gotPod, err := admin.CoreV1().Pods("vap").Get(ctx, "web-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, gotPod.Status.Message)
	assert.Equal(t, "10.1.0.5", gotPod.Status.PodIP)
	assert.Empty(t, gotPod.Labels["app"])
	for _, c := range gotPod.Status.Conditions {
		if c.Type == corev1.PodReady {
			assert.Equal(t, corev1.ConditionFalse, c.Status, "the pod was made Ready")
		}
	}
	require.NoError(t, patchPodStatus(control, "vap", "web-0", podReady), "control: RBAC alone lets a pod be made Ready")
	_, err = control.CoreV1().Pods("vap").Patch(ctx, "web-0", types.MergePatchType, podIP, metav1.PatchOptions{}, "status")
	require.NoError(t, err, "control: RBAC alone lets a pod's IP be changed")
	require.NoError(t, patchPodStatus(control, "vap", "web-0", podLabels), "control: RBAC alone lets a pod be relabelled through pods/status")

	// Pods of its namespace: the leader label only, on its own pod when its token names one.
	mkGateway := func(name string) *corev1.Pod {
		spec := restrictedSpec()
		spec.ServiceAccountName = "netpulse-gateway"
		p, err := admin.CoreV1().Pods("netpulse").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"app.kubernetes.io/name": "netpulse-gateway"}}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = admin.CoreV1().Pods("netpulse").Delete(context.Background(), name, metav1.DeleteOptions{}) })
		return p
	}
	self, other := mkGateway("vap-gw-0"), mkGateway("vap-gw-1")
	lease := apply.Lease{LeaseNamespace: "netpulse", Identity: self.Name, LeaderLabel: leaderLabelKey}
	require.NoError(t, apply.LabelOwnPod(ctx, gw, lease, "true"), "the leader label (a token bound to no pod)")
	require.NoError(t, apply.LabelOwnPod(ctx, gw, lease, ""), "the leader label removed")
	image := `{"spec":{"containers":[{"name":"c","image":"example.invalid/evil:1"}]}}`
	deniedByPolicy(t, patchPod(gw, "netpulse", self.Name, image), "a pod's image")
	require.NoError(t, patchPod(control, "netpulse", other.Name, image), "control: RBAC alone lets a pod's image be changed")
	deniedByPolicy(t, patchPod(gw, "netpulse", self.Name, `{"metadata":{"labels":{"app.kubernetes.io/name":"x"}}}`), "another label of a pod")
	deniedByPolicy(t, patchPod(gw, "netpulse", self.Name, `{"metadata":{"annotations":{"x":"y"}}}`), "a pod's annotation")
	bound := podBoundClient(t, self)
	require.NoError(t, apply.LabelOwnPod(ctx, bound, lease, "true"), "the leader label on its own pod (a pod-bound token)")
	deniedByPolicy(t, apply.LabelOwnPod(ctx, bound, apply.Lease{LeaseNamespace: "netpulse", Identity: other.Name, LeaderLabel: leaderLabelKey}, "true"),
		"the leader label on another pod (a pod-bound token)")
	gotSelf, err := admin.CoreV1().Pods("netpulse").Get(ctx, self.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "example.invalid/x:1", gotSelf.Spec.Containers[0].Image)
	assert.Equal(t, "true", gotSelf.Labels[leaderLabelKey])
}
