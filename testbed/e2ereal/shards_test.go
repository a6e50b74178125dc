// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2ereal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/shard"
)

// shardsOnRealNodes: `helm upgrade --reuse-values --set gateway.shards=2` on the installed
// release: the single gateway Deployment is replaced by two shard Deployments, each leading
// its own Lease; the agents roll to their per-shard pipelines and reach each shard through
// its Service (cluster DNS, kube-proxy, the certificate covering the shard Services); every
// pair of the new agents reads Reachable, written by its target node's shard. The reports
// that read anything but Reachable while the gateways changed are counted (the figure): the
// new shards start without the old gateway's state.
func (s *suite) shardsOnRealNodes(t *testing.T) {
	ctx := context.Background()
	const shards = 2
	before := map[string]bool{}
	for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-agent") {
		before[p.Name] = true
	}
	start := time.Now()
	s.helmCmd(t, "upgrade", "netpulse", s.chart, "-n", namespace, "--reuse-values", "--set", fmt.Sprintf("gateway.shards=%d", shards))
	var transient []string
	d := s.awaitObjects(t, "the sharded gateways' objects of the rolled agents Reachable and labelled", 5*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		transient = append(transient, s.falseVerdicts(ctx, t, start)...)
		for name := range agents {
			if before[name] {
				return "agent " + name + " not rolled yet"
			}
		}
		for i := range shards {
			dep, err := s.cs.AppsV1().Deployments(namespace).Get(ctx, fmt.Sprintf("netpulse-gateway-%d", i), metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if dep.Status.ReadyReplicas < 1 {
				return dep.Name + " has no Ready replica"
			}
			l, err := s.cs.CoordinationV1().Leases(namespace).Get(ctx, fmt.Sprintf("%s-%d", gatewayLease, i), metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, dep.Name+"-") {
				return fmt.Sprintf("Lease %s-%d not held by a pod of %s", gatewayLease, i, dep.Name)
			}
		}
		if p := allReachable(agents, objs); p != "" {
			return p
		}
		for key, o := range objs {
			dst, ok := agents[o.Spec.TargetPodRef.Name]
			if _, src := agents[o.Spec.SourcePodRef.Name]; !ok || !src {
				continue
			}
			if want := fmt.Sprintf("%d-of-%d", shard.Of(dst.Spec.NodeName, shards), shards); o.Labels["netpulse.io/shard"] != want {
				return fmt.Sprintf("%s labelled %q, want %q (its target's node %s)", key, o.Labels["netpulse.io/shard"], want, dst.Spec.NodeName)
			}
		}
		return ""
	})
	_, err := s.cs.AppsV1().Deployments(namespace).Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.Error(t, err, "the single gateway's Deployment is replaced")
	transient = dedupe(transient)
	slices.Sort(transient)
	if len(transient) > 0 {
		t.Logf("reports other than Reachable while the gateway was resharded: %s", strings.Join(transient, "\n"))
	}
	s.figure("helm upgrade --set gateway.shards=2 → both shards leading, agents rolled, every pair Reachable and labelled by its target node's shard %.0f s after the upgrade; %d transient reports during the change", d.Seconds(), len(transient))

	// What sharding costs every node: an agent now runs a filter and an OTLP exporter (its
	// own connection and queue) per shard. Read from the cgroup after 30 s of steady state;
	// it must still fit the memory request Footprint holds the unsharded agent to.
	time.Sleep(30 * time.Second)
	for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-agent") {
		n, err := s.cl.Node(p.Spec.NodeName)
		require.NoError(t, err)
		for _, cst := range p.Status.ContainerStatuses {
			if cst.ContainerID == "" || cst.State.Running == nil {
				continue
			}
			id := cst.ContainerID[strings.Index(cst.ContainerID, "://")+3:]
			usage, rss, cpu, err := n.ContainerUsage(string(p.UID), string(p.Status.QOSClass), id)
			require.NoError(t, err)
			var req string
			for _, c := range p.Spec.Containers {
				if c.Name == cst.Name {
					if r := c.Resources.Requests.Memory(); !r.IsZero() {
						req = r.String()
						require.Less(t, rss, r.Value(), "%s/%s with %d shards: anonymous memory above its memory request", p.Name, cst.Name, shards)
					}
				}
			}
			age := time.Since(cst.State.Running.StartedAt.Time)
			s.figure("%s/%s on %s with %d shards: memory working set %.1f MiB, anonymous %.1f MiB (request %s), CPU %.2f%% of a core over its %.0f s",
				p.Name, cst.Name, p.Spec.NodeName, shards, float64(usage)/(1<<20), float64(rss)/(1<<20), req, 100*cpu.Seconds()/age.Seconds(), age.Seconds())
		}
	}
}
