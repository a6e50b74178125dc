// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// SetNodeCondition writes one condition of our own type into node status with a strategic
// merge patch keyed by type, so conditions owned by the kubelet or others are untouched.
// LastTransitionTime moves only when the status flips.
func SetNodeCondition(ctx context.Context, client kubernetes.Interface, node *corev1.Node, cond corev1.NodeCondition) error {
	for _, c := range node.Status.Conditions {
		if c.Type == cond.Type && c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Nodes().PatchStatus(ctx, node.Name, patch)
	if err != nil {
		return fmt.Errorf("patch node %s condition %s: %w", node.Name, cond.Type, err)
	}
	return nil
}

// RemoveNodeCondition deletes our condition type from node status (cleanup when the
// signal is disabled).
func RemoveNodeCondition(ctx context.Context, client kubernetes.Interface, node, condType string) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{
		{"type": condType, "$patch": "delete"},
	}}})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Nodes().PatchStatus(ctx, node, patch)
	if err != nil {
		return fmt.Errorf("remove node %s condition %s: %w", node, condType, err)
	}
	return nil
}

// SetPodCondition writes the network-readiness condition into pod status (readiness gate).
func SetPodCondition(ctx context.Context, client kubernetes.Interface, ns, name string, cond corev1.PodCondition) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch pod %s/%s condition %s: %w", ns, name, cond.Type, err)
	}
	return nil
}

// NodeConditions schedules the node condition patches of the plan under the write budget
// (one request each; a newer patch of a node's condition replaces a pending one).
func (w *Writer) NodeConditions(client kubernetes.Interface, writes []plan.NodeConditionWrite) {
	for _, nw := range writes {
		n, cond := nw.Node, nw.Condition
		w.Enqueue(NodeConditionKey(n.Name, string(cond.Type)), nw.Priority, func(ctx context.Context) error {
			return SetNodeCondition(ctx, client, n, cond)
		}, "node_condition")
	}
}

// PodConditions schedules the readiness gate's pod condition patches of the plan.
func (w *Writer) PodConditions(client kubernetes.Interface, writes []plan.PodConditionWrite) {
	for _, pw := range writes {
		ns, name, cond := pw.Namespace, pw.Name, pw.Condition
		w.Enqueue(PodKey(ns, name), pw.Priority, func(ctx context.Context) error {
			return SetPodCondition(ctx, client, ns, name, cond)
		}, "readiness_gate")
	}
}

// CleanupNodeConditions removes our condition type from every node when node conditions
// are disabled, so turning them off leaves nothing stale behind. It needs the opt-in
// node-status RBAC; without it, it says so once per node and gives up.
func (w *Writer) CleanupNodeConditions(ctx context.Context, client kubernetes.Interface, condType string, logger *zap.Logger) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		logger.Info("pod_network_health: cannot list nodes to clean up node conditions", zap.Error(err))
		return
	}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if string(c.Type) != condType {
				continue
			}
			node := n.Name
			w.Enqueue(NodeConditionKey(node, condType), writequeue.Cleanup, func(ctx context.Context) error {
				err := RemoveNodeCondition(ctx, client, node, condType)
				if apierrors.IsForbidden(err) {
					logger.Info("pod_network_health: node conditions are disabled but a stale one remains; grant nodes/status patch to remove it", zap.String("node", node))
					return nil // retrying cannot help
				}
				return err
			}, "node_condition_cleanup")
		}
	}
}
