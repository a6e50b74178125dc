// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// The node cache keeps both of our conditions (the gray one when degraded_type is set) and
// nothing else of the node.
func TestStripNodeKeepsBothConditions(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: "netpulse.io/PodNetworkProblem", Status: corev1.ConditionFalse},
		{Type: "netpulse.io/PodNetworkDegraded", Status: corev1.ConditionTrue, Reason: "PacketLoss"},
	}}}
	obj, err := stripNodeToCondition(cachedCondition([]string{"netpulse.io/PodNetworkProblem", "netpulse.io/PodNetworkDegraded"}))(n)
	require.NoError(t, err)
	got := obj.(*corev1.Node)
	require.Empty(t, got.Labels)
	require.Len(t, got.Status.Conditions, 2)
	require.Equal(t, corev1.NodeConditionType("netpulse.io/PodNetworkProblem"), got.Status.Conditions[0].Type)
	require.Equal(t, "PacketLoss", got.Status.Conditions[1].Reason)

	obj, err = stripNodeToCondition(cachedCondition([]string{"netpulse.io/PodNetworkProblem"}))(n)
	require.NoError(t, err)
	require.Len(t, obj.(*corev1.Node).Status.Conditions, 1, "off: only the outage condition")
}

// A gray node condition of a type no longer configured stays in the cache, recognised by
// its reason and message (what Nodes.cleanStaleGray removes); a condition of another
// controller with a gray reason but its own message does not.
func TestStripNodeKeepsStaleGrayConditions(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: "example.com/OldGray", Status: corev1.ConditionFalse, Reason: verdict.NodeReasonWithinThresholds,
			Message: "packet loss and latency at this node are within thresholds"},
		{Type: "example.com/Renamed", Status: corev1.ConditionTrue, Reason: verdict.NodeReasonPacketLoss,
			Message: "packet loss at this node, seen by its observers on other nodes: 20.0% of 300 echoes"},
		{Type: "npd.example/NetworkLoss", Status: corev1.ConditionTrue, Reason: verdict.NodeReasonPacketLoss, Message: "eth0 drops"},
	}}}
	obj, err := stripNodeToCondition(cachedCondition([]string{"netpulse.io/PodNetworkProblem"}))(n)
	require.NoError(t, err)
	var kept []corev1.NodeConditionType
	for _, c := range obj.(*corev1.Node).Status.Conditions {
		kept = append(kept, c.Type)
	}
	require.Equal(t, []corev1.NodeConditionType{"example.com/OldGray", "example.com/Renamed"}, kept)
}

// A stale gray condition is one of netpulse's gray reasons and messages under a type the
// gateway does not write now (degraded_type unset or renamed), on a node of this shard.
func TestStaleGraySelectsOnlyOldGrayConditionsOfOwnNodes(t *testing.T) {
	gray := func(typ string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: corev1.ConditionTrue, Reason: verdict.NodeReasonHighLatency,
			Message: "high latency at this node, seen by its own agent towards its targets"}
	}
	for _, tc := range []struct {
		name, grayType, node string
		cond                 corev1.NodeCondition
		stale                bool
	}{
		{"unset: the old name", "", "mine", gray("netpulse.io/PodNetworkDegraded"), true},
		{"renamed: the old name", "example.com/Gray", "mine", gray("netpulse.io/PodNetworkDegraded"), true},
		{"renamed: the new name", "example.com/Gray", "mine", gray("example.com/Gray"), false},
		{"another shard's node", "", "theirs", gray("netpulse.io/PodNetworkDegraded"), false},
		{"the outage condition", "", "mine", corev1.NodeCondition{Type: "netpulse.io/PodNetworkProblem", Reason: verdict.NodeReasonSuppressed,
			Message: "gray node marking is suppressed: more than half of the nodes with gray evidence are blamed at once (a cluster-wide problem, not a node's)"}, false},
		{"another controller's", "", "mine", corev1.NodeCondition{Type: "npd.example/Latency", Reason: verdict.NodeReasonHighLatency, Message: "slow disk"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Nodes{cfg: NodesConfig{Control: plan.NodeConditions{Type: "netpulse.io/PodNetworkProblem"}, GrayType: tc.grayType},
				d: Deps{Owns: func(n string) bool { return n == "mine" }}}
			require.Equal(t, tc.stale, c.staleGray(tc.node, tc.cond))
		})
	}
}
