// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
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
