// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"
)

// NodesConfig configures the node conditions' controller.
type NodesConfig struct {
	// Enabled: node_conditions.enabled. The node judgement runs either way: it decides
	// which observers are distrusted, and localises zone cuts.
	Enabled bool
	// Control is the condition's type and the judgement's rules (plan.NodeConditions).
	Control plan.NodeConditions
	// CacheTypes are the condition types the node cache keeps (ours, and the gray one).
	CacheTypes []string
}

// Nodes is the node conditions' controller: the node cache (a stripped informer) feeds
// the verdict stage's node judgement (verdict.Engine.ReconcileNodes), plan.NodeConditions
// turns it into patches and the writer makes them. Its judgement of each tick is what the
// zones' and the gray node conditions' controllers, later in the list, write from.
type Nodes struct {
	cfg     NodesConfig
	d       Deps
	kube    kubernetes.Interface // from Start
	cadence cadence
	// judged is this tick's judgement (the lead loop's alone).
	judged nodeJudgement

	mu    sync.Mutex // guards cache (the node_problem gauge reads it)
	cache *nodeCache
	stop  chan struct{}
	once  sync.Once
}

// nodeJudgement is one tick's node judgement, for the controllers that follow it.
type nodeJudgement struct {
	at    time.Time
	nodes []*corev1.Node // this shard's nodes, as the cache held them
	zones zones.Result
}

// NewNodes returns the node conditions' controller.
func NewNodes(cfg NodesConfig, d Deps) *Nodes {
	return &Nodes{cfg: cfg, d: d, stop: make(chan struct{})}
}

// Start watches the nodes when node conditions are enabled.
func (c *Nodes) Start(kube kubernetes.Interface, _ versioned.Interface) {
	c.kube = kube
	if !c.cfg.Enabled {
		return
	}
	nc := newNodeCache(kube, c.cfg.CacheTypes...)
	c.mu.Lock()
	c.cache = nc
	c.mu.Unlock()
	nc.factory.Start(c.stop)
}

// Lead starts a term; with node conditions disabled it removes our condition type from
// every node, so turning them off leaves nothing stale behind.
func (c *Nodes) Lead(ctx context.Context) {
	c.cadence.reset()
	if !c.cfg.Enabled {
		c.d.Writer().CleanupNodeConditions(ctx, c.kube, c.cfg.Control.Type, c.d.Logger)
	}
}

// EndTerm: the engine forgets the term's node state with the pairs' (Pairs.EndTerm).
func (c *Nodes) EndTerm() {}

// Shutdown stops the node cache.
func (c *Nodes) Shutdown() {
	c.once.Do(func() { close(c.stop) })
	if nc := c.nodeCache(); nc != nil {
		nc.factory.Shutdown()
	}
}

// Reconcile runs the node judgement when due (always: it decides which observers are
// distrusted) and, when node conditions are enabled, has the conditions it decided
// written.
func (c *Nodes) Reconcile(_ context.Context, now time.Time) {
	if !c.cadence.due(now, c.d.Engine.TargetChanges()) {
		return
	}
	control := c.cfg.Control
	var nodes []*corev1.Node
	current := map[string]*verdict.NodeCondition{}
	if c.cfg.Enabled {
		var synced bool
		if nodes, synced = c.nodeCache().list(); !synced {
			return
		}
		// Another shard holds the evidence about the others and sets their conditions.
		nodes = slices.DeleteFunc(nodes, func(n *corev1.Node) bool { return !c.d.owns(n.Name) })
		current = control.Current(nodes)
	}
	d := c.d.Engine.ReconcileNodes(now, current, control.Config)
	if d.Suppressed {
		c.d.Logger.Warn("pod_network_health: node marking suppressed", zap.String("reason", d.SuppressedReason))
	}
	c.d.Writer().NodeConditions(c.kube, control.Plan(d, nodes, now))
	c.judged = nodeJudgement{at: now, nodes: nodes, zones: d.Zones}
}

// Judged is the node judgement made at now: this shard's nodes (none with node
// conditions off) and the zone judgement; false when the nodes were not judged at now.
func (c *Nodes) Judged(now time.Time) ([]*corev1.Node, zones.Result, bool) {
	if !c.judged.at.Equal(now) || now.IsZero() {
		return nil, zones.Result{}, false
	}
	return c.judged.nodes, c.judged.zones, true
}

// Statuses is the condition of every node as the node cache holds it (empty until the
// cache has synced, or with node conditions off): the node_problem gauge.
func (c *Nodes) Statuses() map[string]corev1.ConditionStatus {
	out := map[string]corev1.ConditionStatus{}
	nodes, _ := c.nodeCache().list()
	for node, cond := range c.cfg.Control.Current(nodes) {
		if cond != nil {
			out[node] = corev1.ConditionStatus(cond.Status)
		}
	}
	return out
}

func (c *Nodes) nodeCache() *nodeCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cache
}

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
