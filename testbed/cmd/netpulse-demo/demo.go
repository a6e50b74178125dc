// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/realcluster"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// nodeConditionType is the node condition the gateway's pod_network_health exporter writes
// (node_conditions.enabled in gateway.yaml; the exporter's default type).
const nodeConditionType = "netpulse.io/PodNetworkProblem"

type demo struct {
	cfg   config
	out   *output
	began time.Time

	cl  *simcluster.Cluster
	pnh versioned.Interface
	// real is the cluster of real nodes (DEMO_REAL=1, real.go) instead of cl.
	real *realcluster.Cluster
	// core and agents are what the snapshot reads: the simulated cluster's, or the real
	// one's (its agent pods from the API).
	core   kubernetes.Interface
	agents func(ctx context.Context) []simcluster.Agent

	step     int
	lastShow time.Time
	locked   time.Time // when Start got the host lock (from its log line)
}

// run plays the script. The cluster, once started, is left in d.cl for stop.
func (d *demo) run(ctx context.Context) error {
	if err := d.startCluster(ctx); err != nil {
		return err
	}
	agentsUp, err := d.startPipeline(ctx)
	if err != nil {
		return err
	}
	if err := d.converge(ctx, agentsUp); err != nil {
		return err
	}
	victim := d.cfg.partition
	victimAgent, _ := d.cl.Agent(victim)
	tFault, err := d.partition(ctx, victim, victimAgent)
	if err != nil {
		return err
	}
	if err := d.heal(ctx, victim, victimAgent, tFault); err != nil {
		return err
	}
	return d.explore(ctx, victim)
}

// startCluster starts the simulated cluster and leaves it in d.cl.
func (d *demo) startCluster(ctx context.Context) error {
	d.header("Start the control plane and a simulated %d-node cluster", d.cfg.nodes)
	t0 := time.Now()
	sctx, cancel := context.WithTimeout(ctx, startTimeout+lockTimeout)
	cl, err := simcluster.Start(sctx, simcluster.Options{
		Nodes:        d.cfg.nodes,
		Collector:    d.cfg.collector,
		RepoRoot:     d.cfg.repoRoot,
		LockTimeout:  lockTimeout,
		StartTimeout: startTimeout,
		Logf:         d.logf,
	})
	cancel()
	if err != nil {
		return fmt.Errorf("start the simulated cluster: %w", err)
	}
	d.cl = cl
	if d.pnh, err = versioned.NewForConfig(cl.AdminConfig); err != nil {
		return err
	}
	d.core = cl.Client
	d.agents = func(context.Context) []simcluster.Agent { return cl.Agents() }
	if _, err := cl.Node(d.cfg.partition); err != nil {
		return fmt.Errorf("DEMO_PARTITION: %w", err)
	}
	up := time.Since(t0)
	if !d.locked.IsZero() && d.locked.Sub(t0) > time.Second {
		// simcluster logs "run <id>" once it holds the host lock: the rest is set-up.
		wait := d.locked.Sub(t0)
		d.done("control plane, network and deploy/ up in %s, after %s waiting for another simulated cluster (run %s, %s)",
			round(up-wait), round(wait), cl.RunID, cl.Dir)
	} else {
		d.done("control plane, network and deploy/ up in %s (run %s, %s)", round(up), cl.RunID, cl.Dir)
	}
	for _, n := range cl.Nodes() {
		d.out.println(fmt.Sprintf("    %-8s %-7s netns %-12s %s  %s", n.Name, n.Zone, n.Netns, n.IPv4, n.IPv6))
	}
	return nil
}

// startPipeline starts the gateway, then one agent per node; it returns when the agents
// started.
func (d *demo) startPipeline(ctx context.Context) (agentsUp time.Time, err error) {
	cl := d.cl
	d.header("Start the gateway (deploy/agent-gateway/config/gateway.yaml) on %s", simcluster.HostIPv4)
	t0 := time.Now()
	gctx, cancel := context.WithTimeout(ctx, gatewayTimeout)
	// The node condition's flap damping (min_hold, 1m in gateway.yaml) shortened as in the
	// e2e suite, so the scripted recovery shows within seconds.
	gw, err := cl.StartGateway(gctx, simcluster.GatewayOptions{ReadyTimeout: gatewayTimeout,
		Env: map[string]string{"NETPULSE_NODE_MIN_HOLD": "5s"}})
	cancel()
	if err != nil {
		return time.Time{}, stepErr(ctx, "start the gateway", err)
	}
	d.done("gateway %s ready in %s: OTLP on %s, pid %d, service account %s", gw.Name, round(time.Since(t0)), gw.Endpoint, gw.Process().Pid(), simcluster.GatewayServiceAccount)

	d.header("Start one agent per node (deploy/agent-gateway/config/agent.yaml, %s probe rounds)", probeInterval)
	t0 = time.Now()
	actx, cancel := context.WithTimeout(ctx, agentsTimeout)
	err = cl.StartAgents(actx, simcluster.AgentOptions{
		GatewayEndpoint: gw.Endpoint,
		ProbeInterval:   probeInterval,
		ProbeTimeout:    probeTimeout,
		PeerGrace:       0,
	})
	cancel()
	if err != nil {
		return time.Time{}, stepErr(ctx, "start the agents", err)
	}
	d.done("%d agents Ready in %s", len(cl.Agents()), round(time.Since(t0)))
	for _, a := range cl.Agents() {
		d.out.println(fmt.Sprintf("    %-8s %s/%s  %s", a.Node, a.Namespace, a.Pod, joinAddrs(a)))
	}
	return t0, nil

}

// converge waits until every pair (or, sampled, every stable pair) is Reachable.
func (d *demo) converge(ctx context.Context, agentsUp time.Time) error {
	cl := d.cl
	sampled := len(cl.Agents()) > meshAgents
	if sampled {
		d.header("Wait until every agent's stable pair is Reachable (%d agents: sampled probing, 4 of %d peers a round)", len(cl.Agents()), len(cl.Agents())-1)
	} else {
		d.header("Wait until every agent pair is Reachable")
	}
	if _, err := d.await(ctx, "every pair Reachable", d.cfg.timeout(convergeTimeout), (*snapshot).allReachable); err != nil {
		return err
	}
	if sampled {
		d.done("every stable pair Reachable %s after the agents started (one object per agent; a mesh would write %d)",
			round(time.Since(agentsUp)), len(cl.Agents())*(len(cl.Agents())-1))
	} else {
		d.done("full mesh Reachable %s after the agents started", round(time.Since(agentsUp)))
	}
	return nil
}

// partition cuts victim off and waits until the pairs towards its agent are Unreachable
// and its node condition is True; it returns when the fault began.
func (d *demo) partition(ctx context.Context, victim string, victimAgent simcluster.Agent) (tFault time.Time, err error) {
	cl := d.cl
	d.header("Partition %s (nft drops everything but the host side of the bridge)", victim)
	tFault = time.Now()
	if err := cl.Partition(victim); err != nil {
		return tFault, fmt.Errorf("partition %s: %w", victim, err)
	}
	d.logf("partitioned %s at %s", victim, tFault.Format("15:04:05.000"))
	var pairsAt, condAt time.Duration
	snap, err := d.await(ctx, "partition detected", d.cfg.timeout(detectTimeout), func(s *snapshot) (bool, string) {
		okPairs, why := s.towards(victimAgent.Pod, v1alpha1.Unreachable)
		if okPairs && pairsAt == 0 {
			pairsAt = time.Since(tFault)
			d.logf("pairs towards %s Unreachable after %s", victim, round(pairsAt))
		}
		okCond := s.condition(victim) == metav1.ConditionTrue
		if okCond && condAt == 0 {
			condAt = time.Since(tFault)
			d.logf("%s condition %s=True after %s", victim, nodeConditionType, round(condAt))
		}
		if !okCond {
			why = strings.TrimPrefix(why+"; ", "; ") + fmt.Sprintf("%s %s is %s", victim, nodeConditionType, orNone(string(s.condition(victim))))
		}
		return okPairs && okCond, why
	})
	if err != nil {
		return tFault, err
	}
	d.done("partition detected in %s (pairs towards %s Unreachable in %s, node condition True in %s)",
		round(time.Since(tFault)), victim, round(pairsAt), round(condAt))
	if c := snap.nodeCond(victim); c != nil {
		d.out.println(fmt.Sprintf("    node %s: %s=%s %s: %s", victim, c.Type, c.Status, c.Reason, c.Message))
	}
	for _, l := range snap.reachableConditions(victimAgent.Pod) {
		d.out.println("    " + l)
	}
	return tFault, nil
}

// heal lifts the partition and waits until every pair is Reachable again, the outages
// since tFault closed and the node condition no longer True.
func (d *demo) heal(ctx context.Context, victim string, victimAgent simcluster.Agent, tFault time.Time) error {
	cl := d.cl
	d.header("Heal %s", victim)
	tHeal := time.Now()
	if err := cl.Heal(victim); err != nil {
		return fmt.Errorf("heal %s: %w", victim, err)
	}
	snap, err := d.await(ctx, "recovery", d.cfg.timeout(recoverTimeout), func(s *snapshot) (bool, string) {
		if ok, why := s.allReachable(); !ok {
			return false, why
		}
		if ok, why := s.outagesClosed(victimAgent.Pod, tFault); !ok {
			return false, why
		}
		if st := s.condition(victim); st == metav1.ConditionTrue {
			return false, fmt.Sprintf("%s %s is still True", victim, nodeConditionType)
		}
		return true, ""
	})
	if err != nil {
		return err
	}
	d.done("recovered in %s: every pair Reachable, %s %s=%s", round(time.Since(tHeal)), victim, nodeConditionType, orNone(string(snap.condition(victim))))
	d.out.println("    outages recorded in the status of the pairs towards " + victim + ":")
	for _, o := range snap.outagesTowards(victimAgent.Pod, tFault) {
		d.out.println("      " + o)
	}
	return nil
}

// explore keeps the cluster up for DEMO_DURATION, saying how to look at it.
func (d *demo) explore(ctx context.Context, victim string) error {
	cl := d.cl
	if d.cfg.duration > 0 {
		d.header("Cluster stays up for %s for exploration (Ctrl-C ends it earlier)", d.cfg.duration)
		d.out.println("  in another shell, as root:")
		d.out.println("    export KUBECONFIG=" + cl.AdminKubeconfig)
		d.out.println("    bin/kubectl get pnh -A")
		d.out.println("    bin/kubectl get pnh -A -o wide; bin/kubectl -n netpulse describe pnh <name>")
		d.out.println("    bin/kubectl get nodes -L topology.kubernetes.io/zone; bin/kubectl get events -n netpulse")
		d.out.println(fmt.Sprintf("    ip netns exec %s nft list ruleset    # faults are set here", victimNetns(cl, victim)))
		d.out.println("  logs: " + cl.Dir + "/logs")
		until := time.Now().Add(d.cfg.duration)
		_, err := d.await(ctx, "", d.cfg.duration, func(s *snapshot) (bool, string) {
			return !time.Now().Before(until), ""
		})
		if err != nil && ctx.Err() != nil {
			return err
		}
	}
	return nil
}

func victimNetns(cl *simcluster.Cluster, node string) string {
	n, err := cl.Node(node)
	if err != nil {
		return "?"
	}
	return n.Netns
}

// stop removes the cluster (idempotent).
func (d *demo) stop() error {
	switch {
	case d.real != nil:
		return d.stopCluster("realcluster", d.real.Stop, "containers, nodes, namespaces and control plane")
	case d.cl != nil:
		return d.stopCluster("simcluster", d.cl.Stop, "processes, namespaces, bridge and control plane")
	}
	return nil
}

// stopCluster runs stop within stopTimeout and says what it removed.
func (d *demo) stopCluster(name string, stop func() error, what string) error {
	d.header("Stop and clean up")
	t0 := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- stop() }()
	select {
	case err := <-errc:
		if err != nil {
			return err
		}
	case <-time.After(stopTimeout):
		return fmt.Errorf("%s Stop did not return within %s (the next start sweeps leftovers)", name, stopTimeout)
	}
	d.done("%s removed in %s", what, round(time.Since(t0)))
	return nil
}

// await polls the API until cond holds, refreshing the table every cfg.refresh. It returns
// the last snapshot, or an error naming the step and what was still missing.
func (d *demo) await(ctx context.Context, what string, timeout time.Duration, cond func(*snapshot) (bool, string)) (*snapshot, error) {
	deadline := time.Now().Add(timeout)
	var last *snapshot
	var why string
	var lastErr error
	for {
		s, err := d.snapshot(ctx)
		if err != nil {
			lastErr = err
		} else {
			last = s
			var ok bool
			ok, why = cond(s)
			if ok {
				d.show(s, true)
				return s, nil
			}
			if time.Since(d.lastShow) >= d.cfg.refresh {
				d.show(s, false)
			}
		}
		if time.Now().After(deadline) {
			if last != nil {
				d.show(last, true)
			}
			msg := fmt.Sprintf("step %q timed out after %s", what, timeout)
			if why != "" {
				msg += ": " + why
			}
			if lastErr != nil {
				msg += fmt.Sprintf(" (last API error: %v)", lastErr)
			}
			return last, errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("step %q: %w", what, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

func (d *demo) show(s *snapshot, force bool) {
	if !force && time.Since(d.lastShow) < d.cfg.refresh {
		return
	}
	d.lastShow = time.Now()
	d.out.live(renderTable(s, time.Since(d.began)))
}

func (d *demo) header(format string, args ...any) {
	d.step++
	d.out.println("")
	d.out.println(fmt.Sprintf("==> [%d] %s   (t=%s)", d.step, fmt.Sprintf(format, args...), round(time.Since(d.began))))
}

func (d *demo) done(format string, args ...any) {
	d.out.println("  ✔ " + fmt.Sprintf(format, args...))
}

func (d *demo) logf(format string, args ...any) {
	if d.locked.IsZero() && strings.HasPrefix(format, "simcluster: run ") {
		d.locked = time.Now()
	}
	d.out.println(fmt.Sprintf("    %s %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...)))
}

func stepErr(ctx context.Context, step string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return fmt.Errorf("%s: %w", step, cause)
	}
	return fmt.Errorf("%s: %w", step, err)
}

func joinAddrs(a simcluster.Agent) string {
	var s []string
	for _, ip := range a.IPs {
		s = append(s, ip.String())
	}
	return strings.Join(s, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

// snapshot is one read of what the API says.
type snapshot struct {
	at       time.Time
	items    []v1alpha1.PodNetworkHealth
	nodes    []corev1.Node
	podNode  map[string]string // agent pod name -> node
	agents   []simcluster.Agent
	expected int // agent pairs with objects (source pod -> target pod on another node)
	// sampled: the cluster is too large for k=3 plus the stable peer to probe every other
	// agent each round (more than 5 agents): only the stable pairs (one per agent) and
	// failing pairs have objects, and every target is judged from all its observers.
	sampled bool
}

// meshAgents is the largest cluster where k=3 rotating peers plus 1 stable peer (agent.yaml)
// cover every other agent each round.
const meshAgents = 5

func (d *demo) snapshot(ctx context.Context) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := d.pnh.NetpulseV1alpha1().PodNetworkHealths(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PodNetworkHealth: %w", err)
	}
	nodes, err := d.core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	s := &snapshot{at: time.Now(), items: list.Items, nodes: nodes.Items, podNode: map[string]string{}, agents: d.agents(ctx)}
	for _, a := range s.agents {
		s.podNode[a.Pod] = a.Node
	}
	s.expected = len(s.agents) * (len(s.agents) - 1)
	if len(s.agents) > meshAgents {
		s.sampled, s.expected = true, len(s.agents)
	}
	sort.Slice(s.items, func(i, j int) bool {
		a, b := s.items[i], s.items[j]
		ka := s.podNode[a.Spec.SourcePodRef.Name] + " " + s.targetNode(&a) + " " + a.Name
		kb := s.podNode[b.Spec.SourcePodRef.Name] + " " + s.targetNode(&b) + " " + b.Name
		return ka < kb
	})
	sort.Slice(s.nodes, func(i, j int) bool { return s.nodes[i].Name < s.nodes[j].Name })
	return s, nil
}

// agentPair reports whether o is a pair between two current agent pods.
func (s *snapshot) agentPair(o *v1alpha1.PodNetworkHealth) bool {
	if o.Spec.TargetKind != v1alpha1.TargetKindPod || o.Spec.TargetPodRef == nil {
		return false
	}
	_, src := s.podNode[o.Spec.SourcePodRef.Name]
	_, dst := s.podNode[o.Spec.TargetPodRef.Name]
	return src && dst
}

func (s *snapshot) targetNode(o *v1alpha1.PodNetworkHealth) string {
	switch {
	case o.Spec.TargetPodRef != nil:
		if n, ok := s.podNode[o.Spec.TargetPodRef.Name]; ok {
			return n
		}
	case o.Spec.TargetNodeRef != nil:
		return o.Spec.TargetNodeRef.Name
	}
	return ""
}

// allReachable: one object per agent pair (sampled: per agent, its stable pair), every
// one Reachable.
func (s *snapshot) allReachable() (bool, string) {
	n, reachable := 0, 0
	var bad []string
	sources := map[string]bool{}
	for i := range s.items {
		o := &s.items[i]
		if !s.agentPair(o) {
			continue
		}
		n++
		sources[o.Spec.SourcePodRef.Name] = true
		if o.Status.Reachability == v1alpha1.Reachable {
			reachable++
		} else {
			bad = append(bad, fmt.Sprintf("%s->%s %s", s.podNode[o.Spec.SourcePodRef.Name], s.targetNode(o), orNone(string(o.Status.Reachability))))
		}
	}
	if s.sampled && len(sources) == len(s.agents) && reachable == n {
		return true, ""
	}
	if s.sampled || n < s.expected || reachable < s.expected {
		msg := fmt.Sprintf("%d of %d agent pairs have an object, %d Reachable", n, s.expected, reachable)
		if s.sampled {
			msg = fmt.Sprintf("%d of %d agents are the source of an object (their stable pair); %d of %d objects Reachable", len(sources), len(s.agents), reachable, n)
		}
		if len(bad) > 0 {
			msg += " (" + strings.Join(first(bad, 6), ", ") + ")"
		}
		return false, msg
	}
	return true, ""
}

// towards: every other agent's pair towards pod has verdict r (sampled: every object
// towards pod, at least one).
func (s *snapshot) towards(pod string, r v1alpha1.Reachability) (bool, string) {
	want := s.pairsTowards(pod)
	n := 0
	var bad []string
	for i := range s.items {
		o := &s.items[i]
		if !s.agentPair(o) || o.Spec.TargetPodRef.Name != pod {
			continue
		}
		if o.Status.Reachability == r {
			n++
		} else {
			bad = append(bad, fmt.Sprintf("%s->%s %s", s.podNode[o.Spec.SourcePodRef.Name], s.targetNode(o), orNone(string(o.Status.Reachability))))
		}
	}
	if n < want {
		msg := fmt.Sprintf("%d of %d pairs towards %s are %s", n, want, s.podNode[pod], r)
		if len(bad) > 0 {
			msg += " (" + strings.Join(bad, ", ") + ")"
		}
		return false, msg
	}
	return true, ""
}

// outagesClosed: every pair towards pod recorded an outage that began after since and has
// ended.
func (s *snapshot) outagesClosed(pod string, since time.Time) (bool, string) {
	want := s.pairsTowards(pod)
	n := 0
	for i := range s.items {
		o := &s.items[i]
		if !s.agentPair(o) || o.Spec.TargetPodRef.Name != pod {
			continue
		}
		if x := lastOutage(o, since); x != nil && x.End != nil {
			n++
		}
	}
	if n < want {
		return false, fmt.Sprintf("%d of %d pairs towards %s show a closed outage", n, want, s.podNode[pod])
	}
	return true, ""
}

func (s *snapshot) outagesTowards(pod string, since time.Time) []string {
	var out []string
	for i := range s.items {
		o := &s.items[i]
		if !s.agentPair(o) || o.Spec.TargetPodRef.Name != pod {
			continue
		}
		x := lastOutage(o, since)
		if x == nil {
			continue
		}
		line := fmt.Sprintf("%s -> %s: start %s", s.podNode[o.Spec.SourcePodRef.Name], s.targetNode(o), x.Start.Format("15:04:05"))
		if x.End != nil {
			line += fmt.Sprintf("  end %s  (%s)", x.End.Format("15:04:05"), x.End.Sub(x.Start.Time))
		} else {
			line += "  (ongoing)"
		}
		if x.Reason != "" {
			line += "  reason " + x.Reason
		}
		if x.Message != "" {
			line += ": " + x.Message
		}
		out = append(out, line)
	}
	return out
}

func lastOutage(o *v1alpha1.PodNetworkHealth, since time.Time) *v1alpha1.Outage {
	var last *v1alpha1.Outage
	for i := range o.Status.Outages {
		x := &o.Status.Outages[i]
		// The outage starts at the first failed round, which may be stamped up to a round
		// before the fault was applied.
		if x.Start.Time.Before(since.Add(-5 * time.Second)) {
			continue
		}
		if last == nil || x.Start.After(last.Start.Time) {
			last = x
		}
	}
	return last
}

func (s *snapshot) nodeCond(node string) *corev1.NodeCondition {
	for i := range s.nodes {
		if s.nodes[i].Name != node {
			continue
		}
		for j := range s.nodes[i].Status.Conditions {
			if c := &s.nodes[i].Status.Conditions[j]; string(c.Type) == nodeConditionType {
				return c
			}
		}
	}
	return nil
}

func (s *snapshot) condition(node string) metav1.ConditionStatus {
	if c := s.nodeCond(node); c != nil {
		return metav1.ConditionStatus(c.Status)
	}
	return ""
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

// reachableConditions describes the Reachable condition of the pairs from and to pod.
func (s *snapshot) reachableConditions(pod string) []string {
	var out []string
	for i := range s.items {
		o := &s.items[i]
		if !s.agentPair(o) || (o.Spec.SourcePodRef.Name != pod && o.Spec.TargetPodRef.Name != pod) {
			continue
		}
		line := fmt.Sprintf("pair %s -> %s: %s", s.podNode[o.Spec.SourcePodRef.Name], s.targetNode(o), orNone(string(o.Status.Reachability)))
		if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReachable); c != nil {
			line += fmt.Sprintf(", condition Reachable=%s %s: %s", c.Status, c.Reason, ellipsis(c.Message, 100))
		}
		out = append(out, line)
	}
	return out
}

// pairsTowards is how many pairs towards pod must agree: every other agent's in a mesh;
// sampled, the objects that exist towards it (its stable observers', at least one).
func (s *snapshot) pairsTowards(pod string) int {
	if !s.sampled {
		return len(s.agents) - 1
	}
	n := 0
	for i := range s.items {
		if o := &s.items[i]; s.agentPair(o) && o.Spec.TargetPodRef.Name == pod {
			n++
		}
	}
	return max(n, 1)
}
