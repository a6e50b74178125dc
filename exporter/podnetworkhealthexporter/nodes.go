// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// Node conditions, wired: the node cache (a stripped informer) feeds the verdict stage's
// node judgement (verdict.Engine.ReconcileNodes), the controller plan.NodeConditions turns
// it into patches, and the writer (apply) makes them.

// nodeCache watches the nodes and keeps of each only its name and our conditions.
type nodeCache struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
}

func newNodeCache(kube kubernetes.Interface, condTypes ...string) *nodeCache {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(stripNodeToCondition(condTypes...)))
	return &nodeCache{factory: f, informer: f.Core().V1().Nodes().Informer()}
}

// list returns the cached nodes; false until the cache has synced (and for a nil cache).
func (c *nodeCache) list() ([]*corev1.Node, bool) {
	if c == nil || !c.informer.HasSynced() {
		return nil, false
	}
	objs := c.informer.GetStore().List()
	out := make([]*corev1.Node, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.(*corev1.Node))
	}
	return out, true
}

// nodeControl is the node conditions' controller for this configuration.
func nodeControl(cfg *Config) plan.NodeConditions {
	nc := cfg.NodeConditions
	return plan.NodeConditions{Type: nc.Type,
		Config: verdict.NodeConfig{Quorum: nc.Quorum, MaxFailingShare: nc.MaxFailingShare, Heartbeat: nc.Heartbeat, MinHold: nc.MinHold,
			Zones: zoneConfig(cfg)}}
}

// reconcileNodes runs the node judgement (always: it decides which observers are
// distrusted) and, when node conditions are enabled, has the conditions it decided written.
func (e *pnhExporter) reconcileNodes(now time.Time) {
	control := nodeControl(e.cfg)
	var nodes []*corev1.Node
	current := map[string]*verdict.NodeCondition{}
	if e.cfg.NodeConditions.Enabled {
		var synced bool
		if nodes, synced = e.nodeCache().list(); !synced {
			return
		}
		if e.cfg.Shard.sharded() {
			// Another shard holds the evidence about the others and sets their conditions.
			nodes = slices.DeleteFunc(nodes, func(n *corev1.Node) bool { return !e.cfg.Shard.owns(n.Name) })
		}
		current = control.Current(nodes)
	}
	d := e.engine.ReconcileNodes(now, current, control.Config)
	if d.Suppressed {
		e.logger.Warn("pod_network_health: node marking suppressed", zap.String("reason", d.SuppressedReason))
	}
	e.writer.NodeConditions(e.kube, control.Plan(d, nodes, now))
	e.writeZones(d.Zones, now)
	if e.cfg.NodeConditions.Enabled && e.cfg.NodeConditions.DegradedType != "" {
		e.reconcileGrayNodes(now, nodes)
	}
}

// reconcileGrayNodes has the gray node conditions written (node_conditions.degraded_type)
// for the nodes reconcileNodes judged (this shard's).
func (e *pnhExporter) reconcileGrayNodes(now time.Time, nodes []*corev1.Node) {
	nc := e.cfg.NodeConditions
	control := plan.NodeConditions{Type: nc.DegradedType}
	d := e.engine.ReconcileGrayNodes(now, control.Current(nodes), verdict.GrayNodeConfig{Heartbeat: nc.Heartbeat, MinHold: nc.MinHold})
	if d.Suppressed && len(d.Writes) > 0 {
		e.logger.Warn("pod_network_health: gray node marking suppressed", zap.String("reason", d.SuppressedReason))
	}
	e.writer.NodeConditions(e.kube, control.Plan(d, nodes, now))
}

// nodeCache is the node cache (nil until start, and with node_conditions off).
func (e *pnhExporter) nodeCache() *nodeCache {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nodes
}

// nodeConditionStatuses is the node condition of every node as the node cache holds it
// (empty until the cache has synced, or with node_conditions off).
func (e *pnhExporter) nodeConditionStatuses() map[string]corev1.ConditionStatus {
	out := map[string]corev1.ConditionStatus{}
	nodes, _ := e.nodeCache().list()
	for node, c := range nodeControl(e.cfg).Current(nodes) {
		if c != nil {
			out[node] = corev1.ConditionStatus(c.Status)
		}
	}
	return out
}

// stripNodeToCondition keeps only the node's name and our conditions in the cache.
func stripNodeToCondition(condTypes ...string) cache.TransformFunc {
	return func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
		for _, c := range n.Status.Conditions {
			if slices.Contains(condTypes, string(c.Type)) {
				out.Status.Conditions = append(out.Status.Conditions, c)
			}
		}
		return out, nil
	}
}
