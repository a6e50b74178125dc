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
	// GrayType is the gray node condition's type this gateway writes
	// (node_conditions.degraded_type while node conditions are enabled; "" none).
	GrayType string
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
	// grayCleaned: this term removed the stale gray conditions (the lead loop's alone).
	grayCleaned bool

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
	nc := newNodeCache(kube, cachedCondition(c.cfg.CacheTypes))
	c.mu.Lock()
	c.cache = nc
	c.mu.Unlock()
	nc.factory.Start(c.stop)
}

// Lead starts a term; with node conditions disabled it removes our condition type from
// every node, so turning them off leaves nothing stale behind. It also removes, from this
// shard's nodes, a gray node condition of another type than GrayType: written before
// degraded_type was unset or renamed (staleGray).
func (c *Nodes) Lead(ctx context.Context) {
	c.cadence.reset()
	c.grayCleaned = false
	if !c.cfg.Enabled {
		// One list of the nodes (no cache runs) for both.
		c.d.Writer().CleanupNodeConditionsWhere(ctx, c.kube, func(node string, cond corev1.NodeCondition) bool {
			return string(cond.Type) == c.cfg.Control.Type || c.staleGray(node, cond)
		}, "node_condition_cleanup", c.d.Logger)
		c.grayCleaned = true
	}
}

// cleanStaleGray removes, once a term, the stale gray conditions (staleGray) of the
// cached nodes: the node cache keeps them (stripNodeToCondition), so this costs no read.
func (c *Nodes) cleanStaleGray(nodes []*corev1.Node) {
	if c.grayCleaned {
		return
	}
	c.grayCleaned = true
	for _, n := range nodes {
		c.d.Writer().RemoveNodeConditions(c.kube, n, c.staleGray, "gray_node_condition_cleanup", c.d.Logger)
	}
}

// staleGray selects a gray node condition this gateway no longer writes. The old
// degraded_type is not known after the configuration changed (and a node annotation that
// recorded it would be a write the gateway is not allowed, the admission policy refuses
// annotations), so the condition is recognised by what only it says: its reasons with its
// messages (verdict.IsGrayNodeCondition), under any type but the two this gateway writes.
// A node of another shard is that shard's to clean.
func (c *Nodes) staleGray(node string, cond corev1.NodeCondition) bool {
	t := string(cond.Type)
	return t != c.cfg.Control.Type && t != c.cfg.GrayType && c.d.owns(node) &&
		verdict.IsGrayNodeCondition(cond.Reason, cond.Message)
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
		c.cleanStaleGray(nodes)
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

func newNodeCache(kube kubernetes.Interface, keep func(corev1.NodeCondition) bool) *nodeCache {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(stripNodeToCondition(keep)))
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

// cachedCondition selects the conditions the node cache keeps: those of types, and a gray
// node condition of any type (verdict.IsGrayNodeCondition), so that a stale one can be
// removed without reading the nodes again (Nodes.cleanStaleGray).
func cachedCondition(types []string) func(corev1.NodeCondition) bool {
	return func(cond corev1.NodeCondition) bool {
		return slices.Contains(types, string(cond.Type)) || verdict.IsGrayNodeCondition(cond.Reason, cond.Message)
	}
}

// stripNodeToCondition keeps only the node's name and the conditions keep selects in the
// cache.
func stripNodeToCondition(keep func(corev1.NodeCondition) bool) cache.TransformFunc {
	return func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
		for _, c := range n.Status.Conditions {
			if keep(c) {
				out.Status.Conditions = append(out.Status.Conditions, c)
			}
		}
		return out, nil
	}
}
