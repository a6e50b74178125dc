package podnetworkhealthexporter

import (
	"context"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/readiness"
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
		err := setPodCondition(ctx, e.kube, f.Namespace, f.Name, cond)
		e.onWritten(writeResult{key: "pod/" + f.Namespace + "/" + f.Name, reason: "readiness_gate", err: err})
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
			err := removeNodeCondition(ctx, e.kube, n.Name, e.cfg.NodeConditions.Type)
			if apierrors.IsForbidden(err) {
				e.logger.Info("pod_network_health: node conditions are disabled but a stale one remains; grant nodes/status patch to remove it", zap.String("node", n.Name))
				return
			}
			e.onWritten(writeResult{key: "node/" + n.Name, reason: "node_condition_cleanup", err: err})
		}
	}
}
