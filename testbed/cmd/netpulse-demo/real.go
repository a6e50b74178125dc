// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/realcluster"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// realNamespace is where the demo installs the chart, as docs/helm.md does.
const realNamespace = "netpulse"

// realMinHold shortens the node condition's flap damping (node_conditions.min_hold, 1 m in
// the chart) through the chart's gateway.config, as the simulated demo does with its
// environment, so the scripted recovery shows within seconds.
const realMinHold = `{"exporters":{"pod_network_health":{"node_conditions":{"min_hold":"5s"}}}}`

// runReal plays the demo's story on real nodes (DEMO_REAL=1): a local cluster of real
// kubelets, containerd, CNI, kube-proxy and CoreDNS (testbed/realcluster), netpulse
// installed with its Helm chart and image as a user would, a node partitioned and healed.
func (d *demo) runReal(ctx context.Context) error {
	image := filepath.Join(d.cfg.repoRoot, "bin", "realnode", "images", "otelcol-netpulse.tar")
	helm := filepath.Join(d.cfg.repoRoot, "bin", "helm")
	for _, p := range []string{image, helm} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%v (DEMO_REAL=1 make demo builds it: make helm node-bins node-image)", err)
		}
	}
	if err := d.startReal(ctx, image); err != nil {
		return err
	}
	installed, gatewayNodes, err := d.installReal(ctx, helm)
	if err != nil {
		return err
	}
	d.header("Wait until every agent pair is Reachable")
	if _, err := d.await(ctx, "every pair Reachable", d.cfg.timeout(convergeTimeout), (*snapshot).allReachable); err != nil {
		return err
	}
	d.done("every pair Reachable %s after helm install", round(time.Since(installed)))

	victim, victimPod, err := d.realVictim(ctx, gatewayNodes)
	if err != nil {
		return err
	}
	tFault, err := d.partitionReal(ctx, victim, victimPod)
	if err != nil {
		return err
	}
	if err := d.healReal(ctx, victim, victimPod, tFault); err != nil {
		return err
	}
	return d.exploreReal(ctx)
}

// startReal starts the real nodes with the image imported, and leaves them in d.real.
func (d *demo) startReal(ctx context.Context, image string) error {
	d.header("Start the control plane and %d real nodes (kubelet, containerd, CNI, kube-proxy, CoreDNS)", d.cfg.nodes)
	t0 := time.Now()
	sctx, cancel := context.WithTimeout(ctx, startTimeout+lockTimeout)
	cl, err := realcluster.Start(sctx, realcluster.Options{Nodes: d.cfg.nodes, Zones: 2, Images: []string{image},
		LockTimeout: lockTimeout, StartTimeout: startTimeout, Logf: d.logf})
	cancel()
	if err != nil {
		return fmt.Errorf("start the real nodes: %w", err)
	}
	d.real = cl
	cs, err := cl.Clientset()
	if err != nil {
		return err
	}
	d.core = cs
	if d.pnh, err = versioned.NewForConfig(cl.ControlPlane.Config); err != nil {
		return err
	}
	d.agents = func(ctx context.Context) []simcluster.Agent {
		pods, err := cs.CoreV1().Pods(realNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=netpulse-agent"})
		if err != nil {
			return nil
		}
		var out []simcluster.Agent
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, simcluster.Agent{Node: p.Spec.NodeName, Pod: p.Name, Namespace: p.Namespace, UID: string(p.UID)})
			}
		}
		return out
	}
	d.done("%d nodes and cluster DNS Ready in %s (run %s, %s)", len(cl.Nodes), round(time.Since(t0)), cl.RunID, cl.Dir)
	for _, n := range cl.Nodes {
		d.out.println(fmt.Sprintf("    %-8s %-7s netns %-14s %s  %s  pods %s %s", n.Name, n.Zone, n.Netns, n.IPv4, n.IPv6, n.PodCIDR4, n.PodCIDR6))
	}
	return nil
}

// installReal installs the chart with helm into a Pod Security restricted namespace and
// waits for the gateway and every agent; it returns when it began, and the gateway
// replicas' nodes.
func (d *demo) installReal(ctx context.Context, helm string) (installed time.Time, gatewayNodes map[string]bool, err error) {
	cl, cs := d.real, d.core
	d.header("helm install netpulse deploy/helm/netpulse -n %s (Pod Security restricted; image imported, pullPolicy Never)", realNamespace)
	t0 := time.Now()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: realNamespace, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{}); err != nil {
		return t0, nil, err
	}
	cmd := exec.CommandContext(ctx, helm, "install", "netpulse", filepath.Join(d.cfg.repoRoot, "deploy", "helm", "netpulse"),
		"-n", realNamespace, "--set", "image.pullPolicy=Never", "--set-json", "gateway.config="+realMinHold)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cl.Kubeconfig, "HELM_CACHE_HOME="+filepath.Join(cl.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(cl.Dir, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(cl.Dir, "helm", "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return t0, nil, fmt.Errorf("helm install: %w\n%s", err, out)
	}
	if err := cl.WaitDeploymentAvailable(ctx, cs, realNamespace, "netpulse-gateway", d.cfg.timeout(agentsTimeout)); err != nil {
		return t0, nil, stepErr(ctx, "gateway Ready", err)
	}
	if err := d.waitAgentsReady(ctx); err != nil {
		return t0, nil, err
	}
	d.done("every agent and both gateway replicas Ready in %s", round(time.Since(t0)))
	pods, _ := cs.CoreV1().Pods(realNamespace).List(ctx, metav1.ListOptions{})
	gatewayNodes = map[string]bool{}
	for _, p := range pods.Items {
		d.out.println(fmt.Sprintf("    %-8s %s/%s  %s", p.Spec.NodeName, p.Namespace, p.Name, p.Status.PodIP))
		if strings.HasPrefix(p.Name, "netpulse-gateway-") {
			gatewayNodes[p.Spec.NodeName] = true
		}
	}
	return t0, gatewayNodes, nil

}

// waitAgentsReady waits until the agent DaemonSet has a Ready pod on every node.
func (d *demo) waitAgentsReady(ctx context.Context) error {
	cl, cs := d.real, d.core
	deadline := time.Now().Add(d.cfg.timeout(agentsTimeout))
	for {
		ds, err := cs.AppsV1().DaemonSets(realNamespace).Get(ctx, "netpulse-agent", metav1.GetOptions{})
		if err == nil && ds.Status.DesiredNumberScheduled == int32(len(cl.Nodes)) && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agents not Ready:\n%s", cl.PodReport(ctx, cs, realNamespace))
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(pollInterval):
		}
	}
	return nil
}

// realVictim is the node to partition (DEMO_PARTITION, else one without a gateway
// replica: cutting the writer off is another story) and its agent pod.
func (d *demo) realVictim(ctx context.Context, gatewayNodes map[string]bool) (victim, victimPod string, err error) {
	cl := d.real
	victim = os.Getenv("DEMO_PARTITION")
	if victim == "" {
		for _, n := range cl.Nodes {
			if !gatewayNodes[n.Name] {
				victim = n.Name
				break
			}
		}
	}
	if _, err := cl.Node(victim); err != nil {
		return "", "", fmt.Errorf("DEMO_PARTITION: %w", err)
	}
	for _, a := range d.agents(ctx) {
		if a.Node == victim {
			victimPod = a.Pod
		}
	}
	return victim, victimPod, nil
}

// partitionReal cuts victim off and waits until the pairs towards its agent are
// Unreachable and its node condition is True; it returns when the fault began.
func (d *demo) partitionReal(ctx context.Context, victim, victimPod string) (tFault time.Time, err error) {
	cl := d.real
	d.header("Partition %s (nft in its network namespace drops its traffic with the other nodes and their pods)", victim)
	tFault = time.Now()
	if err := cl.Partition(victim); err != nil {
		return tFault, err
	}
	var pairsAt, condAt time.Duration
	snap, err := d.await(ctx, "partition detected", d.cfg.timeout(detectTimeout), func(s *snapshot) (bool, string) {
		okPairs, why := s.towards(victimPod, v1alpha1.Unreachable)
		if okPairs && pairsAt == 0 {
			pairsAt = time.Since(tFault)
		}
		okCond := s.condition(victim) == metav1.ConditionTrue
		if okCond && condAt == 0 {
			condAt = time.Since(tFault)
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
	return tFault, nil
}

// healReal lifts the partition and waits until every pair is Reachable again, the
// outages since the fault closed and the node condition no longer True.
func (d *demo) healReal(ctx context.Context, victim, victimPod string, tFault time.Time) error {
	cl := d.real
	d.header("Heal %s", victim)
	tHeal := time.Now()
	if err := cl.Heal(victim); err != nil {
		return err
	}
	snap, err := d.await(ctx, "recovery", d.cfg.timeout(recoverTimeout), func(s *snapshot) (bool, string) {
		if ok, why := s.allReachable(); !ok {
			return false, why
		}
		if ok, why := s.outagesClosed(victimPod, tFault); !ok {
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
	// The chart's rounds are 10 s: an outage starts at the first failed round, stamped up to
	// a round before the fault (lastOutage allows 5 s, the simulated demo's rounds are 1 s).
	for _, o := range snap.outagesTowards(victimPod, tFault.Add(-10*time.Second)) {
		d.out.println("      " + o)
	}
	return nil
}

// exploreReal keeps the cluster up for DEMO_DURATION, saying how to look at it.
func (d *demo) exploreReal(ctx context.Context) error {
	cl := d.real
	if d.cfg.duration > 0 {
		d.header("Cluster stays up for %s for exploration (Ctrl-C ends it earlier)", d.cfg.duration)
		d.out.println("  in another shell, as root:")
		d.out.println("    export KUBECONFIG=" + cl.Kubeconfig)
		d.out.println("    bin/kubectl get pnh -A; bin/kubectl get pods -A -o wide; bin/helm list -n " + realNamespace)
		d.out.println("    bin/kubectl-netpulse matrix")
		d.out.println("  node logs (kubelet, containerd, kube-proxy, pods): " + cl.Dir)
		until := time.Now().Add(d.cfg.duration)
		if _, err := d.await(ctx, "", d.cfg.duration, func(*snapshot) (bool, string) { return !time.Now().Before(until), "" }); err != nil && ctx.Err() != nil {
			return err
		}
	}
	return nil
}
