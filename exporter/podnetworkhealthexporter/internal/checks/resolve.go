// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resolve places one check: it reads what the pure decisions (place.go) ask for — the
// target pod or Service, the source pod — and lets them decide. Reads are bounded:
// checkResolveBatch per reconcile, and each check at most once per heartbeat unless it
// changes, is refused or falls silent.
func (c *Controller) resolve(ctx context.Context, key checkKey, sp spec) placement {
	tr, refusal := planTarget(key.namespace, sp, c.cfg.AllowCrossNamespaceTargets)
	if refusal != nil {
		return *refusal
	}
	endpoint, kind := tr.endpoint, tr.kind
	switch {
	case tr.pod:
		pod, err := c.kube.CoreV1().Pods(tr.namespace).Get(ctx, tr.name, metav1.GetOptions{})
		endpoint, refusal = podTarget(tr, pod, err, sp.probe)
		kind = "Pod"
	case tr.service:
		svc, err := c.kube.CoreV1().Services(tr.namespace).Get(ctx, tr.name, metav1.GetOptions{})
		endpoint, refusal = serviceTarget(tr, svc, err, sp.probe)
		kind = "Service"
	}
	if refusal != nil {
		return *refusal
	}
	if refusal := vetTarget(c.policy, endpoint, tr.cross); refusal != nil {
		return *refusal
	}
	pod, err := c.sourcePod(ctx, key.namespace, sp)
	return sourcePlacement(key.namespace, sp, pod, err, endpoint, kind)
}

// sourcePod reads the check's source pod: by name, or the oldest running one its selector
// matches (from the API server's cache: ResourceVersion "0").
func (c *Controller) sourcePod(ctx context.Context, ns string, sp spec) (*corev1.Pod, error) {
	if sp.selector == nil {
		return c.kube.CoreV1().Pods(ns).Get(ctx, sp.sourcePod, metav1.GetOptions{})
	}
	s, err := metav1.LabelSelectorAsSelector(sp.selector)
	if err != nil {
		return nil, err
	}
	list, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.String(), ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	return pickSourcePod(list.Items)
}
