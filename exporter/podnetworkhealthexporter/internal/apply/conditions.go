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
	w.CleanupNodeConditionsWhere(ctx, client, func(_ string, c corev1.NodeCondition) bool { return string(c.Type) == condType },
		"node_condition_cleanup", logger)
}

// cleanupListPage bounds the nodes one list request of a cleanup returns (and holds).
const cleanupListPage = 500

// CleanupNodeConditionsWhere removes every condition that match selects from the nodes,
// read page by page (RemoveNodeConditions).
func (w *Writer) CleanupNodeConditionsWhere(ctx context.Context, client kubernetes.Interface, match func(node string, c corev1.NodeCondition) bool, reason string, logger *zap.Logger) {
	opts := metav1.ListOptions{Limit: cleanupListPage}
	for {
		nodes, err := client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			logger.Info("pod_network_health: cannot list nodes to clean up node conditions", zap.String("cleanup", reason), zap.Error(err))
			return
		}
		for i := range nodes.Items {
			w.RemoveNodeConditions(client, &nodes.Items[i], match, reason, logger)
		}
		if nodes.Continue == "" {
			return
		}
		opts.Continue = nodes.Continue
	}
}

// RemoveNodeConditions removes the conditions of n that match selects, at Cleanup priority
// within the write budget: one removal per type it carries, none for a node that carries
// none. A removal the API refuses as forbidden (no nodes/status patch, or an admission
// policy that does not name the type) is logged and given up: retrying cannot help.
// reason labels the writes.
func (w *Writer) RemoveNodeConditions(client kubernetes.Interface, n *corev1.Node, match func(node string, c corev1.NodeCondition) bool, reason string, logger *zap.Logger) {
	for _, c := range n.Status.Conditions {
		if !match(n.Name, c) {
			continue
		}
		node, condType := n.Name, string(c.Type)
		w.Enqueue(NodeConditionKey(node, condType), writequeue.Cleanup, func(ctx context.Context) error {
			err := RemoveNodeCondition(ctx, client, node, condType)
			if apierrors.IsForbidden(err) {
				logger.Info("pod_network_health: a stale node condition of netpulse's remains; grant nodes/status patch (and name its type in the gateway's admission policy) to remove it",
					zap.String("node", node), zap.String("type", condType), zap.String("cleanup", reason), zap.Error(err))
				return nil // retrying cannot help
			}
			return err
		}, reason)
	}
}
