// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node cache keeps both of our conditions (the gray one when degraded_type is set) and
// nothing else of the node.
func TestStripNodeKeepsBothConditions(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: "netpulse.io/PodNetworkProblem", Status: corev1.ConditionFalse},
		{Type: "netpulse.io/PodNetworkDegraded", Status: corev1.ConditionTrue, Reason: "PacketLoss"},
	}}}
	obj, err := stripNodeToCondition("netpulse.io/PodNetworkProblem", "netpulse.io/PodNetworkDegraded")(n)
	require.NoError(t, err)
	got := obj.(*corev1.Node)
	require.Empty(t, got.Labels)
	require.Len(t, got.Status.Conditions, 2)
	require.Equal(t, corev1.NodeConditionType("netpulse.io/PodNetworkProblem"), got.Status.Conditions[0].Type)
	require.Equal(t, "PacketLoss", got.Status.Conditions[1].Reason)

	obj, err = stripNodeToCondition("netpulse.io/PodNetworkProblem")(n)
	require.NoError(t, err)
	require.Len(t, obj.(*corev1.Node).Status.Conditions, 1, "off: only the outage condition")
}
