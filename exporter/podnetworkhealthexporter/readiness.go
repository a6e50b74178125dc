// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
)

// The readiness gate, wired: the pod cache feeds the verdict stage's gate
// (readiness.Gate.Decide), the controller plan.ReadinessGate turns its flips into pod
// condition patches, and the writer (apply) makes them.

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

// reconcileReadiness sets the network-readiness condition of gated pods that have been
// reached from another node (rate-limited by the gate).
func (e *pnhExporter) reconcileReadiness(now time.Time) {
	pods, synced := e.gated.list()
	if !synced {
		return
	}
	if e.cfg.Shard.sharded() {
		// A pod's reachability as a target is judged by its node's shard.
		pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return !e.cfg.Shard.owns(p.Spec.NodeName) })
	}
	var control plan.ReadinessGate
	e.mu.Lock()
	flips := e.gate.Decide(control.Pods(pods), now)
	e.mu.Unlock()
	e.writer.PodConditions(e.kube, control.Plan(flips, now))
}
