// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/readiness"
)

// Readiness is the readiness gate's controller: the pod cache feeds the verdict stage's
// gate (readiness.Gate.Decide), plan.ReadinessGate turns its flips into pod condition
// patches and the writer makes them. The gate hears every observation on every replica
// (Observe, Expire), so that a new leader decides at once.
type Readiness struct {
	condType string
	d        Deps
	kube     kubernetes.Interface // from Start
	cadence  cadence

	mu   sync.Mutex // guards gate and pods
	gate *readiness.Gate
	pods *gatedPods
	stop chan struct{}
	once sync.Once
}

// NewReadiness returns the readiness gate's controller.
func NewReadiness(cfg readiness.Config, d Deps) *Readiness {
	return &Readiness{condType: cfg.ConditionType, d: d, gate: readiness.NewGate(cfg), stop: make(chan struct{})}
}

// Observe tells the gate which pods were reached, and from where.
func (c *Readiness) Observe(obs []observation.Observation) {
	c.mu.Lock()
	c.gate.Observe(obs...)
	c.mu.Unlock()
}

// Expire forgets reaches older than the gate's memory.
func (c *Readiness) Expire(now time.Time) {
	c.mu.Lock()
	c.gate.Expire(now)
	c.mu.Unlock()
}

// Decide is the gate's decision for pods at now (rate-limited by the gate).
func (c *Readiness) Decide(pods []readiness.PodInfo, now time.Time) []readiness.Flip {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gate.Decide(pods, now)
}

// Start watches the pods.
func (c *Readiness) Start(kube kubernetes.Interface, _ versioned.Interface) {
	c.kube = kube
	gp := newGatedPods(kube, c.condType)
	c.mu.Lock()
	c.pods = gp
	c.mu.Unlock()
	gp.factory.Start(c.stop)
}

// Lead starts a term: the first tick decides.
func (c *Readiness) Lead(context.Context) { c.cadence.reset() }

// EndTerm: the gate is every replica's, not the term's.
func (c *Readiness) EndTerm() {}

// Shutdown stops the pod cache.
func (c *Readiness) Shutdown() {
	c.once.Do(func() { close(c.stop) })
	c.mu.Lock()
	gp := c.pods
	c.mu.Unlock()
	if gp != nil {
		gp.factory.Shutdown()
	}
}

// Reconcile sets the network-readiness condition of gated pods that have been reached
// from another node, on the node conditions' cadence.
func (c *Readiness) Reconcile(_ context.Context, now time.Time) {
	if !c.cadence.due(now, c.d.Engine.TargetChanges()) {
		return
	}
	c.mu.Lock()
	gp := c.pods
	c.mu.Unlock()
	pods, synced := gp.list()
	if !synced {
		return
	}
	// A pod's reachability as a target is judged by its node's shard.
	pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return !c.d.owns(p.Spec.NodeName) })
	var control plan.ReadinessGate
	flips := c.Decide(control.Pods(pods), now)
	c.d.Writer().PodConditions(c.kube, control.Plan(flips, now))
}

// gatedPods watches pods and keeps, for those that declare the readiness gate, only what
// the gate decision needs; other pods are cached as empty shells (name and namespace).
type gatedPods struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
}

func newGatedPods(kube kubernetes.Interface, conditionType string) *gatedPods {
	condType := corev1.PodConditionType(conditionType)
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion}}
		for _, g := range p.Spec.ReadinessGates {
			if g.ConditionType == condType {
				out.CreationTimestamp = p.CreationTimestamp
				out.Spec.NodeName = p.Spec.NodeName
				out.Spec.PriorityClassName = p.Spec.PriorityClassName // system-critical pods are exempt
				out.Spec.ReadinessGates = []corev1.PodReadinessGate{g}
				for _, c := range p.Status.Conditions {
					if c.Type == condType {
						out.Status.Conditions = []corev1.PodCondition{c}
					}
				}
			}
		}
		return out, nil
	}))
	return &gatedPods{factory: f, informer: f.Core().V1().Pods().Informer()}
}

// list returns the cached pods; false until the cache has synced (and for a nil cache).
func (g *gatedPods) list() ([]*corev1.Pod, bool) {
	if g == nil || !g.informer.HasSynced() {
		return nil, false
	}
	objs := g.informer.GetStore().List()
	out := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.(*corev1.Pod))
	}
	return out, true
}
