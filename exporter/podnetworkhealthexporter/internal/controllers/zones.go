// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"
)

// Zones is the ZoneNetworkHealth controller: the node judgement localises cut zone pairs
// first (verdict.NodeConfig.Zones; Nodes runs it), plan.ZoneObjects turns each judgement
// into ZoneNetworkHealth writes and Events, and the writer makes them. It keeps the
// newest judgement for the zone pair gauge whether or not it writes objects.
type Zones struct {
	// objects is nil unless zones.write_objects (and on shard 0 only); the lead loop's.
	objects *plan.ZoneObjects
	nodes   *Nodes
	d       Deps

	mu   sync.Mutex // guards last
	last zones.Result
}

// NewZones returns the zones' controller; objects nil writes no objects.
func NewZones(objects *plan.ZoneObjects, nodes *Nodes, d Deps) *Zones {
	return &Zones{objects: objects, nodes: nodes, d: d}
}

// Start watches the ZoneNetworkHealth objects through the writer.
func (c *Zones) Start(kubernetes.Interface, versioned.Interface) {
	if c.objects != nil {
		c.d.Writer().WatchZones()
	}
}

// Lead: the objects' state is seeded from the cache at the term's first writes.
func (c *Zones) Lead(context.Context) {}

// EndTerm forgets the decisions of the term (the next one reads the API again).
func (c *Zones) EndTerm() {
	if c.objects != nil {
		c.objects.Forget()
	}
}

// Shutdown: the cache is the writer's.
func (c *Zones) Shutdown() {}

// Reconcile has the objects and Events of the zone judgement Nodes made at now written.
// Until the ZoneNetworkHealth cache has synced (it never does without the RBAC for the
// objects) nothing is written; the judgement itself goes on.
func (c *Zones) Reconcile(_ context.Context, now time.Time) {
	_, r, judged := c.nodes.Judged(now)
	if !judged {
		return
	}
	c.mu.Lock()
	c.last = r
	c.mu.Unlock()
	if c.objects == nil {
		return
	}
	existing, synced := c.d.Writer().Zones()
	if !synced {
		return
	}
	writes := c.objects.Plan(r, c.d.Engine.GrayZones(), existing, now)
	c.d.Writer().ZoneObjects(writes)
	for _, w := range writes {
		if w.Event == nil {
			continue
		}
		c.d.Logger.Info("pod_network_health: zone pair verdict", zap.String("from", w.Object.Spec.SourceZone), zap.String("to", w.Object.Spec.TargetZone),
			zap.String("reachability", string(w.Object.Status.Reachability)), zap.String("message", w.Event.Message))
		// Events of cluster-scoped objects live in the default namespace, as Nodes' do.
		c.d.Event(corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ZoneNetworkHealth",
			Namespace: corev1.NamespaceDefault, Name: w.Object.Name}, w.Event.Type, w.Event.Reason, w.Event.Message, now)
	}
}

// Pairs is the newest zone judgement's pairs (the zone pair gauge).
func (c *Zones) Pairs() []zones.Pair {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last.Pairs
}
