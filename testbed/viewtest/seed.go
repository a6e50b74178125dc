// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewtest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

// Seed writes a fixture cluster into a real API server the way the cluster and the
// exporter would have: nodes (then their netpulse condition through the status
// subresource), the agents' namespace, its default service account and the agent pods,
// then each PodNetworkHealth (spec, then status through the status subresource). The
// CRD must be installed.
func Seed(ctx context.Context, cfg *rest.Config, f matrixtest.Fixture) error {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pc, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, n := range f.Nodes {
		created, err := kc.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
		if len(n.Status.Conditions) > 0 {
			created.Status.Conditions = n.Status.Conditions
			if _, err := kc.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("node %s condition: %w", n.Name, err)
			}
		}
	}
	namespaces := map[string]bool{}
	uids := map[string]types.UID{} // namespace/name -> the created pod's UID
	for _, p := range f.Pods {
		if !namespaces[p.Namespace] {
			namespaces[p.Namespace] = true
			if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			// Without kube-controller-manager nobody creates it, and pods need it.
			if _, err := kc.CoreV1().ServiceAccounts(p.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		pod := p.DeepCopy()
		pod.UID = ""
		created, err := kc.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod %s: %w", p.Name, err)
		}
		uids[p.Namespace+"/"+p.Name] = created.UID
	}
	for _, o := range f.Objects {
		obj := o.DeepCopy()
		// The objects name the real pods' UIDs, as the exporter's would.
		if uid, ok := uids[obj.Namespace+"/"+obj.Spec.SourcePodRef.Name]; ok {
			obj.Spec.SourcePodRef.UID = uid
		}
		if r := obj.Spec.TargetPodRef; r != nil {
			if uid, ok := uids[r.Namespace+"/"+r.Name]; ok {
				r.UID = uid
			}
		}
		st := obj.Status
		created, err := pc.NetpulseV1alpha1().PodNetworkHealths(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create %s: %w", obj.Name, err)
		}
		created.Status = st
		if _, err := pc.NetpulseV1alpha1().PodNetworkHealths(obj.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("status of %s: %w", obj.Name, err)
		}
	}
	return nil
}
