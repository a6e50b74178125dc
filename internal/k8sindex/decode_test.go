// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8sindex

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodRecordFromPod(t *testing.T) {
	yes := true
	now := metav1.Unix(1_750_000_000, 0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "cart-5d8f7c9b6x-abcde", Namespace: "shop", UID: "u-1",
			CreationTimestamp: now, DeletionTimestamp: &now,
			Labels:      map[string]string{"app": "cart", "pod-template-hash": "5d8f7c9b6x", "secret-ish": "dropped"},
			Annotations: map[string]string{"big": "dropped"},
			OwnerReferences: []metav1.OwnerReference{
				{Kind: "SomethingElse", Name: "x"},
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "cart-5d8f7c9b6x", Controller: &yes},
			},
		},
		Spec: corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIP:  "10.0.0.1",
			PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}, {IP: "not-an-ip"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
		},
	}
	r := PodRecordFromPod(p, []string{"app", "missing"})
	assert.Equal(t, PodRecord{
		UID: "u-1", Name: "cart-5d8f7c9b6x-abcde", Namespace: "shop", NodeName: "node-a",
		IPs:   []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")},
		Phase: PhaseRunning, Ready: true, Terminating: true, Created: now.Time,
		Workload: Workload{Kind: WorkloadDeployment, Name: "cart"},
		Labels:   []string{"cart", ""},
	}, r)
	assert.True(t, r.OwnsIPs())

	// Old API servers / single-stack: only status.podIP.
	p.Status.PodIPs = nil
	p.Status.Conditions = nil
	r = PodRecordFromPod(p, nil)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("10.0.0.1")}, r.IPs)
	assert.False(t, r.Ready)
	assert.Nil(t, r.Labels)

	p.Status.PodIP = ""
	p.Status.Phase = corev1.PodPending
	r = PodRecordFromPod(p, nil)
	assert.Empty(t, r.IPs)
	assert.False(t, r.OwnsIPs())
	assert.Equal(t, PhasePending, r.Phase)
	assert.Equal(t, time.Unix(1_750_000_000, 0).Unix(), r.Created.Unix())
}

func TestWorkloadOf(t *testing.T) {
	yes, no := true, false
	owned := func(kind, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}},
		}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want Workload
	}{
		{"deployment via pod-template-hash label", owned("ReplicaSet", "web-frontend-7c9d8f6b5", map[string]string{"pod-template-hash": "7c9d8f6b5"}), Workload{WorkloadDeployment, "web-frontend"}},
		{"deployment via hash-shaped suffix", owned("ReplicaSet", "web-frontend-7c9d8f6b5", nil), Workload{WorkloadDeployment, "web-frontend"}},
		{"label that does not match the name", owned("ReplicaSet", "web-abc", map[string]string{"pod-template-hash": "zzz"}), Workload{WorkloadReplicaSet, "web-abc"}},
		{"bare replicaset", owned("ReplicaSet", "legacy", nil), Workload{WorkloadReplicaSet, "legacy"}},
		{"suffix with vowels is no hash", owned("ReplicaSet", "my-service", nil), Workload{WorkloadReplicaSet, "my-service"}},
		{"statefulset", owned("StatefulSet", "db", nil), Workload{WorkloadStatefulSet, "db"}},
		{"daemonset", owned("DaemonSet", "netpulse-agent", nil), Workload{WorkloadDaemonSet, "netpulse-agent"}},
		{"cronjob via job name", owned("Job", "nightly-report-29123456", nil), Workload{WorkloadCronJob, "nightly-report"}},
		{"plain job", owned("Job", "migrate-v2", nil), Workload{WorkloadJob, "migrate-v2"}},
		{"short numeric suffix is a job", owned("Job", "batch-42", nil), Workload{WorkloadJob, "batch-42"}},
		{"static pod owned by its node", owned("Node", "node-a", nil), Workload{}},
		{"custom controller", owned("Rollout", "r", nil), Workload{}},
		{"no owner", &corev1.Pod{}, Workload{}},
		{"single non-controller owner", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: &no}}}}, Workload{WorkloadDaemonSet, "ds"}},
		{"several non-controller owners", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "a"}, {Kind: "Job", Name: "b"}}}}, Workload{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, WorkloadOf(tt.pod))
		})
	}
	assert.Equal(t, "k8s.deployment.name", WorkloadDeployment.AttributeKey())
	assert.Equal(t, "k8s.cronjob.name", WorkloadCronJob.AttributeKey())
	assert.Equal(t, "", WorkloadNone.AttributeKey())
}

func TestNodeRecordFromNode(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{
			corev1.LabelTopologyZone: "eu-west-1b", legacyRegionLabel: "eu-west-1",
		}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: "node-a"},
			{Type: corev1.NodeInternalIP, Address: "172.16.0.1"},
			{Type: corev1.NodeInternalIP, Address: "fd00:172::1"},
			{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
			{Type: corev1.NodeInternalDNS, Address: "node-a.internal"},
		}},
	}
	assert.Equal(t, NodeRecord{
		Name: "node-a", Zone: "eu-west-1b", Region: "eu-west-1",
		IPs: []netip.Addr{netip.MustParseAddr("172.16.0.1"), netip.MustParseAddr("fd00:172::1"), netip.MustParseAddr("203.0.113.1")},
	}, NodeRecordFromNode(n))

	// Cordoned (a drain) and Ready not True (the kubelet stopped reporting): the
	// disruptions the gateway excuses failures with.
	n.Spec.Unschedulable = true
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	r := NodeRecordFromNode(n)
	assert.True(t, r.Cordoned)
	assert.True(t, r.NotReady)
	n.Status.Conditions[1].Status = corev1.ConditionTrue
	assert.False(t, NodeRecordFromNode(n).NotReady)
	n.Status.Conditions = nil
	assert.False(t, NodeRecordFromNode(n).NotReady, "no Ready condition yet: not known to be down")
}
