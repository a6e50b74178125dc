// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/readiness"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// NodeConditionWrite is one node condition patch for the apply stage.
type NodeConditionWrite struct {
	// Node as the node cache holds it (its condition of our type decides whether
	// LastTransitionTime moves).
	Node      *corev1.Node
	Condition corev1.NodeCondition
	Priority  Priority
}

// NodeConditions is the node conditions' controller: it reads the condition of our type
// from the node cache's objects for the verdict stage's node judgement, and turns that
// judgement into condition patches. Pure.
type NodeConditions struct {
	// Type of the condition (node_conditions.type).
	Type string
	// Config is the node judgement's rules (quorum, share, heartbeat, hold).
	Config verdict.NodeConfig
}

// Current is the condition of our type on every node (nil for a node without it).
func (c NodeConditions) Current(nodes []*corev1.Node) map[string]*verdict.NodeCondition {
	out := make(map[string]*verdict.NodeCondition, len(nodes))
	for _, n := range nodes {
		out[n.Name] = nil
		for _, cond := range n.Status.Conditions {
			if string(cond.Type) == c.Type {
				out[n.Name] = &verdict.NodeCondition{Status: string(cond.Status), Reason: cond.Reason, Message: cond.Message, LastHeartbeat: cond.LastHeartbeatTime.Time}
			}
		}
	}
	return out
}

// Plan returns the patches of the judgement's writes, for the nodes the cache holds.
func (c NodeConditions) Plan(d verdict.NodeDecision, nodes []*corev1.Node, now time.Time) []NodeConditionWrite {
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var out []NodeConditionWrite
	for _, w := range d.Writes {
		n := byName[w.Node]
		if n == nil {
			continue
		}
		out = append(out, NodeConditionWrite{Node: n, Priority: NodeWritePriority(w, d.Gray), Condition: corev1.NodeCondition{
			Type:               corev1.NodeConditionType(c.Type),
			Status:             corev1.ConditionStatus(w.Condition.Status),
			Reason:             w.Condition.Reason,
			Message:            w.Condition.Message,
			LastHeartbeatTime:  metav1.NewTime(now),
			LastTransitionTime: metav1.NewTime(now),
		}})
	}
	return out
}

// PodConditionWrite is one pod condition patch (the readiness gate) for the apply stage.
type PodConditionWrite struct {
	Namespace, Name string
	Condition       corev1.PodCondition
	Priority        Priority
}

// ReadinessGate is the readiness gate's controller: the gated pods as the gate judges
// them, and the gate's flips as pod condition patches. Pure.
type ReadinessGate struct{}

// Pods is what the gate needs of the gated pods among pods (the pod cache keeps, of a pod
// that declares the gate, only the gate and our condition; other pods have no gates).
func (ReadinessGate) Pods(pods []*corev1.Pod) []readiness.PodInfo {
	var out []readiness.PodInfo
	for _, p := range pods {
		if len(p.Spec.ReadinessGates) == 0 {
			continue
		}
		info := readiness.PodInfo{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Node: p.Spec.NodeName, Created: p.CreationTimestamp.Time, HasGate: true,
			Exempt: readiness.Exempt(p.Namespace, p.Spec.PriorityClassName)}
		if len(p.Status.Conditions) > 0 {
			info.Condition = string(p.Status.Conditions[0].Status)
		}
		out = append(out, info)
	}
	return out
}

// Plan returns the pod condition patches of flips, each as urgent as a verdict.
func (ReadinessGate) Plan(flips []readiness.Flip, now time.Time) []PodConditionWrite {
	out := make([]PodConditionWrite, 0, len(flips))
	for _, f := range flips {
		out = append(out, PodConditionWrite{Namespace: f.Namespace, Name: f.Name, Priority: writequeue.Verdict, Condition: corev1.PodCondition{
			Type: corev1.PodConditionType(f.ConditionType), Status: corev1.ConditionStatus(f.Status),
			Reason: f.Reason, Message: f.Message, LastTransitionTime: metav1.NewTime(now),
		}})
	}
	return out
}
