// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// Node conditions: the I/O around verdict.ReconcileNodes, in one place. The engine judges
// every node from the per-target verdicts and says which conditions to write; this file
// reads the nodes (a stripped informer), applies the writes and removes the condition
// when the signal is disabled.

// nodeConfig maps the exporter's configuration onto the engine's node rules.
func (e *pnhExporter) nodeConfig() verdict.NodeConfig {
	nc := e.cfg.NodeConditions
	return verdict.NodeConfig{Quorum: nc.Quorum, MaxFailingShare: nc.MaxFailingShare, Heartbeat: nc.Heartbeat, MinHold: nc.MinHold}
}

// reconcileNodes runs the node judgement (always: it decides which observers are
// distrusted) and, when node conditions are enabled, writes the conditions it decided.
func (e *pnhExporter) reconcileNodes(ctx context.Context, now time.Time) {
	current := map[string]*verdict.NodeCondition{}
	byName := map[string]*corev1.Node{}
	if e.cfg.NodeConditions.Enabled {
		if !e.nodes.HasSynced() {
			return
		}
		for _, obj := range e.nodes.GetStore().List() {
			n := obj.(*corev1.Node)
			byName[n.Name] = n
			current[n.Name] = nil
			for _, c := range n.Status.Conditions {
				if string(c.Type) == e.cfg.NodeConditions.Type {
					current[n.Name] = &verdict.NodeCondition{Status: string(c.Status), Reason: c.Reason, Message: c.Message, LastHeartbeat: c.LastHeartbeatTime.Time}
				}
			}
		}
	}
	d := e.engine.ReconcileNodes(now, current, e.nodeConfig())
	if d.Suppressed {
		e.logger.Warn("pod_network_health: node marking suppressed", zap.String("reason", d.SuppressedReason))
	}
	for _, w := range d.Writes {
		n := byName[w.Node]
		if n == nil {
			continue
		}
		cond := corev1.NodeCondition{
			Type:               corev1.NodeConditionType(e.cfg.NodeConditions.Type),
			Status:             corev1.ConditionStatus(w.Condition.Status),
			Reason:             w.Condition.Reason,
			Message:            w.Condition.Message,
			LastHeartbeatTime:  metav1.NewTime(now),
			LastTransitionTime: metav1.NewTime(now),
		}
		e.writer.Enqueue(apply.NodeKey(n.Name), w.Priority, func(ctx context.Context) error {
			return apply.SetNodeCondition(ctx, e.kube, n, cond)
		}, "node_condition")
	}
}

// nodeConditionStatuses is the node condition of every node as the node cache holds it
// (empty until the cache has synced, or with node_conditions off).
func (e *pnhExporter) nodeConditionStatuses() map[string]corev1.ConditionStatus {
	out := map[string]corev1.ConditionStatus{}
	e.mu.Lock()
	nodes := e.nodes
	e.mu.Unlock()
	if nodes == nil || !nodes.HasSynced() {
		return out
	}
	for _, obj := range nodes.GetStore().List() {
		n := obj.(*corev1.Node)
		for _, c := range n.Status.Conditions {
			if string(c.Type) == e.cfg.NodeConditions.Type {
				out[n.Name] = c.Status
			}
		}
	}
	return out
}

// stripNodeToCondition keeps only the node's name and our condition in the cache.
func stripNodeToCondition(condType string) cache.TransformFunc {
	return func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
		for _, c := range n.Status.Conditions {
			if string(c.Type) == condType {
				out.Status.Conditions = append(out.Status.Conditions, c)
			}
		}
		return out, nil
	}
}

// cleanupNodeConditions removes the netpulse node condition from every node when the
// signal is disabled, so turning it off leaves nothing stale behind. It needs the opt-in
// node-status RBAC; without it, it says so once and gives up.
func (e *pnhExporter) cleanupNodeConditions(ctx context.Context) {
	nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		e.logger.Info("pod_network_health: cannot list nodes to clean up node conditions", zap.Error(err))
		return
	}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if string(c.Type) != e.cfg.NodeConditions.Type {
				continue
			}
			node, typ := n.Name, e.cfg.NodeConditions.Type
			e.writer.Enqueue(apply.NodeKey(node), writequeue.Cleanup, func(ctx context.Context) error {
				err := apply.RemoveNodeCondition(ctx, e.kube, node, typ)
				if apierrors.IsForbidden(err) {
					e.logger.Info("pod_network_health: node conditions are disabled but a stale one remains; grant nodes/status patch to remove it", zap.String("node", node))
					return nil // retrying cannot help
				}
				return err
			}, "node_condition_cleanup")
		}
	}
}
