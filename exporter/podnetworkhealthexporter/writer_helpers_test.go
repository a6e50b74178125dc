// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
)

// results collects what the writer reports, in order (checks_trust_test.go's helper; the
// writer's own tests are in internal/apply).
type results struct {
	mu  sync.Mutex
	all []apply.WriteResult
}

func (r *results) done(res apply.WriteResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, res)
}

func (r *results) get() []apply.WriteResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

func testPNH(name, node string) *v1alpha1.PodNetworkHealth {
	return &v1alpha1.PodNetworkHealth{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name,
			Labels:          map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "src", UID: "uid-src"}},
		},
		Spec: v1alpha1.PodNetworkHealthSpec{
			SourcePodRef:  v1alpha1.PodReference{Namespace: "ns", Name: "src", UID: "uid-src"},
			TargetKind:    v1alpha1.TargetKindNode,
			TargetNodeRef: &v1alpha1.NodeReference{Name: name},
		},
		Status: v1alpha1.PodNetworkHealthStatus{Reachability: v1alpha1.Reachable, ObservedFromNode: node},
	}
}

func drained(w *apply.Writer) func() bool {
	return func() bool { return w.PendingCount() == 0 }
}
