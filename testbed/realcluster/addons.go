// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package realcluster

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

//go:embed manifests/coredns.yaml
var corednsManifest []byte

// deployDNS applies the CoreDNS addon and waits until it is Available.
func (c *Cluster) deployDNS(ctx context.Context, cs kubernetes.Interface) error {
	path := filepath.Join(c.Dir, "coredns.yaml")
	if err := os.WriteFile(path, corednsManifest, 0o644); err != nil {
		return err
	}
	if err := kubetest.Apply(ctx, c.ControlPlane.Config, path); err != nil {
		return fmt.Errorf("realcluster: apply CoreDNS: %w", err)
	}
	return c.WaitDeploymentAvailable(ctx, cs, "kube-system", "coredns", 2*time.Minute)
}

// WaitDeploymentAvailable waits until every replica of a Deployment is updated and
// available; on timeout the error lists its pods' states (and the nodes' log tails when a
// node component died).
func (c *Cluster) WaitDeploymentAvailable(ctx context.Context, cs kubernetes.Interface, ns, name string, timeout time.Duration) error {
	return waitFor(ctx, timeout, func() (bool, error) {
		if err := c.Healthy(); err != nil {
			return false, err
		}
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.AvailableReplicas == want && d.Status.Replicas == want, nil
	}, func() string {
		return fmt.Sprintf("deployment %s/%s not available\n%s", ns, name, c.PodReport(ctx, cs, ns))
	})
}

// PodReport describes every pod of a namespace (phase, node, container states, recent
// Events): what a failed wait shows.
func (c *Cluster) PodReport(ctx context.Context, cs kubernetes.Interface, ns string) string {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "list pods: " + err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s/%s on %s: %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, " %s=%s(%s)", cond.Type, cond.Status, cond.Message)
			}
		}
		for _, st := range p.Status.ContainerStatuses {
			switch {
			case st.State.Waiting != nil:
				fmt.Fprintf(&b, " [%s waiting %s: %s]", st.Name, st.State.Waiting.Reason, st.State.Waiting.Message)
			case st.State.Terminated != nil:
				fmt.Fprintf(&b, " [%s terminated %s exit %d: %s]", st.Name, st.State.Terminated.Reason, st.State.Terminated.ExitCode, st.State.Terminated.Message)
			case st.State.Running != nil:
				fmt.Fprintf(&b, " [%s running, ready=%v, restarts %d]", st.Name, st.Ready, st.RestartCount)
			}
		}
		b.WriteString("\n")
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		items := evs.Items
		if len(items) > 25 {
			items = items[len(items)-25:]
		}
		for _, e := range items {
			if e.Type != corev1.EventTypeNormal {
				fmt.Fprintf(&b, "event %s %s/%s: %s %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}
