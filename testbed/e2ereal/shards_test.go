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
// its Service (cluster DNS, kube-proxy, the certificate covering the shard Services).
//
// During the upgrade (#40 item 4): the generated CA is kept (the Secret's ca.crt before and
// after), so no agent of the old configuration logs a TLS failure towards any gateway while
// it still runs; as soon as both shards lead, a node that runs no shard leader is cut off
// (once its own agent has rolled and is reached; the others may still be rolling), and its
// partition is reported by the shard that owns
// it under the new count: the objects towards its agent Unreachable and labelled
// "<owner>-of-2", an OutageDetected Event on them reported by a pod of
// netpulse-gateway-<owner>, which holds the Lease netpulse-gateway-<owner>, and no other
// node's condition True (its own is recorded, not asserted: see below). Healed, every pair of the new agents reads Reachable,
// written by its target node's shard. The reports that read anything but Reachable while
// the gateways changed, other than the cut node's, are counted (the figure): the new
// shards start without the old gateway's state.
func (s *suite) shardsOnRealNodes(t *testing.T) {
	ctx := context.Background()
	const shards = 2
	before := map[string]bool{}
	for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-agent") {
		before[p.Name] = true
	}
	caBefore := s.gatewayCA(ctx, t)
	start := time.Now()
	s.helmCmd(t, "upgrade", "netpulse", s.chart, "-n", namespace, "--reuse-values", "--set", fmt.Sprintf("gateway.shards=%d", shards))
	require.Equal(t, caBefore, s.gatewayCA(ctx, t), "the upgrade keeps the CA the agents trust")
	tlsFailures := map[string][]string{} // old agent pod → its TLS failure log lines since the upgrade
	var transient []string
	watch := func() {
		transient = append(transient, s.falseVerdicts(ctx, t, start)...)
		s.tlsFailuresOf(ctx, before, start, tlsFailures)
	}

	// Both shards lead (the agents may still roll): the node to cut runs no leader.
	leaders := map[string]bool{}
	d := s.awaitObjects(t, "both shards leading", 5*time.Minute, func(map[string]corev1.Pod, map[string]*v1alpha1.PodNetworkHealth) string {
		watch()
		clear(leaders)
		for i := range shards {
			holder, err := s.shardLeader(ctx, i)
			if err != nil {
				return err.Error()
			}
			leaders[holder.Spec.NodeName] = true
		}
		return ""
	})
	s.figure("helm upgrade --set gateway.shards=%d → both shards leading their Leases: %.0f s", shards, d.Seconds())
	// The shards relay (gateway.relay, the default): the agents' one Service has each
	// shard's leader behind it, and only them.
	d = s.awaitObjects(t, "netpulse-gateway-relay serving both leaders", time.Minute, func(map[string]corev1.Pod, map[string]*v1alpha1.PodNetworkHealth) string {
		eps, err := s.cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=netpulse-gateway-relay"})
		if err != nil {
			return err.Error()
		}
		ready := map[string]bool{}
		for _, sl := range eps.Items {
			for _, ep := range sl.Endpoints {
				if ep.TargetRef != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
					ready[ep.TargetRef.Name] = true
				}
			}
		}
		var want []string
		for i := range shards {
			holder, err := s.shardLeader(ctx, i)
			if err != nil {
				return err.Error()
			}
			want = append(want, holder.Name)
			if !ready[holder.Name] {
				return fmt.Sprintf("shard %d's leader %s not behind the relay Service (%v)", i, holder.Name, ready)
			}
		}
		if len(ready) != shards {
			return fmt.Sprintf("the relay Service serves %v, want only the leaders %v", ready, want)
		}
		return ""
	})
	s.figure("netpulse-gateway-relay serves both shards' leaders %.0f s after they lead", d.Seconds())
	victim := ""
	for _, n := range s.cl.Nodes {
		// Prefer a node that moved away from shard 0 (the single gateway's successor).
		if !leaders[n.Name] && (victim == "" || shard.Of(n.Name, shards) != 0) {
			victim = n.Name
		}
	}
	require.NotEmpty(t, victim, "every node runs a shard leader")
	owner := shard.Of(victim, shards)
	ownerDep := fmt.Sprintf("netpulse-gateway-%d", owner)
	// The cut is an outage of a pair that was Reachable (an agent pod that is unreachable
	// from its start makes no outage): the victim's agent of the new configuration, with an
	// object towards it Reachable. The other agents may still be rolling.
	s.awaitObjects(t, "the agent on "+victim+" rolled and reached", 5*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		watch()
		for name, p := range agents {
			if p.Spec.NodeName != victim {
				continue
			}
			if before[name] {
				return "agent " + name + " on " + victim + " not rolled yet"
			}
			for _, o := range objs {
				if src, ok := agents[o.Spec.SourcePodRef.Name]; ok && src.Spec.NodeName != victim && o.Spec.TargetPodRef.Name == name &&
					o.Status.Reachability == v1alpha1.Reachable {
					return ""
				}
			}
			return "no object towards " + name + " Reachable yet"
		}
		return "no agent on " + victim
	})
	rolled := 0
	for _, p := range s.pods(t, "app.kubernetes.io/name=netpulse-agent") {
		if !before[p.Name] && p.DeletionTimestamp == nil {
			rolled++
		}
	}
	cut := time.Now()
	require.NoError(t, s.cl.Partition(victim))
	healed := false
	var victimCond corev1.ConditionStatus
	defer func() {
		if !healed {
			_ = s.cl.Heal(victim)
		}
	}()
	victimAgents := map[string]bool{} // every agent pod seen on the victim (it may roll meanwhile)
	d = s.awaitObjects(t, fmt.Sprintf("partition of %s reported by %s", victim, ownerDep), 5*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		s.tlsFailuresOf(ctx, before, start, tlsFailures)
		target := ""
		for name, p := range agents {
			if p.Spec.NodeName == victim {
				target, victimAgents[name] = name, true
			}
		}
		if target == "" {
			return "no agent on " + victim
		}
		want := fmt.Sprintf("%d-of-%d", owner, shards)
		var bad []string
		towards := 0
		for key, o := range objs {
			if o.Spec.TargetPodRef.Name != target {
				continue
			}
			if src, ok := agents[o.Spec.SourcePodRef.Name]; !ok || src.Spec.NodeName == victim {
				continue
			}
			towards++
			switch {
			case o.Status.Reachability != v1alpha1.Unreachable:
				bad = append(bad, key+" is "+string(o.Status.Reachability))
			case o.Labels["netpulse.io/shard"] != want:
				bad = append(bad, fmt.Sprintf("%s labelled %q, want %q", key, o.Labels["netpulse.io/shard"], want))
			default:
				if by := s.eventReporters(ctx, o.Name, v1alpha1.EventOutageDetected, cut); len(by) == 0 {
					bad = append(bad, key+" has no "+v1alpha1.EventOutageDetected+" Event")
				} else {
					for _, r := range by {
						if !strings.HasPrefix(r, ownerDep+"-") {
							bad = append(bad, fmt.Sprintf("%s: Event reported by %q, not a pod of %s", key, r, ownerDep))
						}
					}
				}
			}
		}
		if towards == 0 {
			bad = append(bad, "no object towards "+target+" from another node's agent")
		}
		if holder, err := s.shardLeader(ctx, owner); err != nil {
			bad = append(bad, err.Error())
		} else if holder.Spec.NodeName == victim {
			bad = append(bad, "the owner's leader "+holder.Name+" moved onto the cut node")
		}
		// No other node is blamed. The cut node's own condition is not asserted: on 3
		// nodes a shard that owns 2 sees only its own targets' observations, so no observer
		// shows that it reaches another node and its quorum suppresses itself (Unknown,
		// Suppressed; docs/sharding.md), unless agents not rolled yet still send it their
		// successes towards the other shard (True then). A shard of a real cluster owns
		// many nodes.
		conds := s.nodeConditions(t)
		victimCond = conds[victim]
		for _, n := range s.cl.Nodes {
			if got := conds[n.Name]; n.Name != victim && got == corev1.ConditionTrue {
				bad = append(bad, fmt.Sprintf("node %s condition True: only %s is cut", n.Name, victim))
			}
		}
		slices.Sort(bad)
		return strings.Join(bad, "; ")
	})
	s.figure("partition of %s (shard %d of %d) %.0f s after the upgrade, %d of %d agents rolled → objects Unreachable, labelled and reported (Event) by %s, no other node's condition True (its own: %q): %.1f s",
		victim, owner, shards, cut.Sub(start).Seconds(), rolled, len(s.cl.Nodes), ownerDep, victimCond, d.Seconds())
	require.NoError(t, s.cl.Heal(victim))
	healed = true

	d = s.awaitObjects(t, "the sharded gateways' objects of the rolled agents Reachable and labelled", 5*time.Minute, func(agents map[string]corev1.Pod, objs map[string]*v1alpha1.PodNetworkHealth) string {
		watch()
		for name := range agents {
			if before[name] {
				return "agent " + name + " not rolled yet"
			}
		}
		for i := range shards {
			if _, err := s.shardLeader(ctx, i); err != nil {
				return err.Error()
			}
		}
		if p := allReachable(agents, objs); p != "" {
			return p
		}
		if st := s.nodeConditions(t)[victim]; st == corev1.ConditionTrue {
			return "node " + victim + " condition still True"
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
	// The cut node's reports are the partition's, not false ones.
	transient = slices.DeleteFunc(dedupe(transient), func(r string) bool {
		if strings.Contains(r, victim) {
			return true
		}
		for a := range victimAgents {
			if strings.Contains(r, a) {
				return true
			}
		}
		return false
	})
	if len(transient) > 0 {
		t.Logf("reports other than Reachable while the gateway was resharded: %s", strings.Join(transient, "\n"))
	}
	var failures []string
	for pod, lines := range tlsFailures {
		for _, l := range lines {
			failures = append(failures, pod+": "+l)
		}
	}
	slices.Sort(failures)
	require.Empty(t, failures, "agents of the old configuration failed TLS towards a gateway after the upgrade (the CA must be kept)")
	s.figure("helm upgrade --set gateway.shards=%d → both shards leading, agents rolled, every pair Reachable and labelled by its target node's shard %.0f s after the heal (%.0f s after the upgrade); %d transient reports during the change besides the cut node's; %d TLS failures logged by the %d agents of the old configuration",
		shards, d.Seconds(), time.Since(start).Seconds(), len(transient), len(failures), len(before))

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

// gatewayCA is ca.crt of the gateway's TLS Secret: what the agents trust.
func (s *suite) gatewayCA(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	sec, err := s.cs.CoreV1().Secrets(namespace).Get(ctx, "netpulse-gateway-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, sec.Data["ca.crt"])
	return sec.Data["ca.crt"]
}

// shardLeader is the pod that holds shard i's Lease, a Running pod of that shard's
// Deployment.
func (s *suite) shardLeader(ctx context.Context, i int) (*corev1.Pod, error) {
	dep := fmt.Sprintf("netpulse-gateway-%d", i)
	l, err := s.cs.CoordinationV1().Leases(namespace).Get(ctx, fmt.Sprintf("%s-%d", gatewayLease, i), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, dep+"-") {
		return nil, fmt.Errorf("lease %s-%d not held by a pod of %s", gatewayLease, i, dep)
	}
	p, err := s.cs.CoreV1().Pods(namespace).Get(ctx, *l.Spec.HolderIdentity, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return nil, fmt.Errorf("%s's leader %s is %s", dep, p.Name, p.Status.Phase)
	}
	return p, nil
}

// eventReporters: the ReportingInstance (the gateway pod's name) of every Event of reason
// on object since since.
func (s *suite) eventReporters(ctx context.Context, object, reason string, since time.Time) []string {
	evs, err := s.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object + ",reason=" + reason})
	if err != nil {
		return nil
	}
	var out []string
	for _, ev := range evs.Items {
		last := ev.LastTimestamp.Time
		if ev.EventTime.After(last) {
			last = ev.EventTime.Time
		}
		if ev.Series != nil && ev.Series.LastObservedTime.After(last) {
			last = ev.Series.LastObservedTime.Time
		}
		if !last.Before(since.Truncate(time.Second)) {
			out = append(out, ev.ReportingInstance)
		}
	}
	return out
}

// tlsFailuresOf reads the logs since since of the agent pods in pods that still exist and
// records (in into, by pod) their lines that report a TLS failure towards a gateway: a
// certificate the agent does not trust, or a handshake that failed. A pod's newest read
// replaces its older one (its log only grows; a deleted pod keeps what was read last).
func (s *suite) tlsFailuresOf(ctx context.Context, pods map[string]bool, since time.Time, into map[string][]string) {
	st := metav1.NewTime(since)
	for name := range pods {
		raw, err := s.cs.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{SinceTime: &st}).DoRaw(ctx)
		if err != nil {
			continue // gone, or not running
		}
		var lines []string
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.Contains(l, "x509:") || strings.Contains(l, "authentication handshake failed") || strings.Contains(l, "tls: ") {
				lines = append(lines, l)
			}
		}
		if len(lines) >= len(into[name]) {
			into[name] = lines
		}
	}
}
