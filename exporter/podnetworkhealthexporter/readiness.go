// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/readiness"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// gatedPods watches pods and keeps, for those that declare the readiness gate, only what
// the gate decision needs; other pods are cached as empty shells (name and namespace).
type gatedPods struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
}

func newGatedPods(e *pnhExporter) *gatedPods {
	condType := corev1.PodConditionType(e.cfg.ReadinessGate.ConditionType)
	f := informers.NewSharedInformerFactoryWithOptions(e.kube, 0, informers.WithTransform(func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion}}
		for _, g := range p.Spec.ReadinessGates {
			if g.ConditionType == condType {
				out.CreationTimestamp = p.CreationTimestamp
				out.Spec.NodeName = p.Spec.NodeName
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

func (g *gatedPods) list() []readiness.PodInfo {
	var out []readiness.PodInfo
	for _, obj := range g.informer.GetStore().List() {
		p := obj.(*corev1.Pod)
		if len(p.Spec.ReadinessGates) == 0 {
			continue
		}
		info := readiness.PodInfo{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Node: p.Spec.NodeName, Created: p.CreationTimestamp.Time, HasGate: true}
		if len(p.Status.Conditions) > 0 {
			info.Condition = string(p.Status.Conditions[0].Status)
		}
		out = append(out, info)
	}
	return out
}

// reconcileReadiness sets the network-readiness condition of gated pods that have been
// reached from another node (rate-limited by the gate).
func (e *pnhExporter) reconcileReadiness(ctx context.Context, now time.Time) {
	if e.gated == nil || !e.gated.informer.HasSynced() {
		return
	}
	e.mu.Lock()
	flips := e.gate.Decide(e.gated.list(), now)
	e.mu.Unlock()
	for _, f := range flips {
		cond := corev1.PodCondition{
			Type: corev1.PodConditionType(f.ConditionType), Status: corev1.ConditionStatus(f.Status),
			Reason: f.Reason, Message: f.Message, LastTransitionTime: metav1.NewTime(now),
		}
		e.writer.Enqueue(apply.PodKey(f.Namespace, f.Name), writequeue.Verdict, func(ctx context.Context) error {
			return apply.SetPodCondition(ctx, e.kube, f.Namespace, f.Name, cond)
		}, "readiness_gate")
	}
}
