// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/featuregate"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	pnhexporter "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/probetest"
)

// mesh feeds rounds from every agent to every other until stop is closed; down[i] makes
// agent i's pod unreachable from everyone (and everyone from it), like a partitioned node.
type mesh struct {
	agents  []*probetest.Agent
	targets []probetest.Target
	mu      sync.Mutex
	down    map[int]bool
	// lossTo[i]: each echo towards agent i's pod is lost with this probability (a round
	// that loses all 3 fails; one that loses some is a partial answer).
	lossTo map[int]float64
	// linkLoss, when set, adds a loss probability for the echoes from agent i to agent j's
	// pod (a lossy link between zones).
	linkLoss func(i, j int) float64
	// linkDelay, when set, adds to the RTT of agent i's rounds towards agent j's pod (a
	// slow link between zones).
	linkDelay func(i, j int) time.Duration
	stop      chan struct{}
	done      chan struct{}
}

func newMesh(t *testing.T, ns string, n int) *mesh {
	m := &mesh{down: map[int]bool{}, lossTo: map[int]float64{}, stop: make(chan struct{}), done: make(chan struct{})}
	for i := range n {
		node := fmt.Sprintf("%s-node-%d", ns, i)
		_, err := admin.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
		require.NoError(t, err)
		p := makePod(t, ns, fmt.Sprintf("agent-%d", i), node)
		ip := fmt.Sprintf("192.0.2.%d", 20+i)
		m.agents = append(m.agents, probetest.NewAgent(ns, p.Name, string(p.UID), node, ip))
		m.targets = append(m.targets, probetest.Target{NS: ns, Pod: p.Name, UID: string(p.UID), Node: node, IP: ip})
	}
	return m
}

func (m *mesh) set(i int, down bool) {
	m.mu.Lock()
	m.down[i] = down
	m.mu.Unlock()
}

func (m *mesh) setLoss(i int, p float64) {
	m.mu.Lock()
	m.lossTo[i] = p
	m.mu.Unlock()
}

// setLinkDelay sets the RTT added to the rounds from agent i to agent j's pod (nil: none).
func (m *mesh) setLinkDelay(f func(i, j int) time.Duration) {
	m.mu.Lock()
	m.linkDelay = f
	m.mu.Unlock()
}

// setLinkLoss sets the loss of the echoes from agent i to agent j's pod (nil: none).
func (m *mesh) setLinkLoss(f func(i, j int) float64) {
	m.mu.Lock()
	m.linkLoss = f
	m.mu.Unlock()
}

func (m *mesh) run(exp exporter.Metrics) {
	rng := rand.New(rand.NewPCG(1, 2))
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			now := time.Now()
			for i, a := range m.agents {
				var tgts []probetest.Target
				var res []probetest.Outcome
				m.mu.Lock()
				for j, tg := range m.targets {
					if i == j {
						continue
					}
					tgts = append(tgts, tg)
					o := probetest.Outcome{OK: !m.down[i] && !m.down[j], RTT: 300 * time.Microsecond}
					p := m.lossTo[j]
					if m.linkLoss != nil {
						p += m.linkLoss(i, j)
					}
					if m.linkDelay != nil {
						o.RTT += m.linkDelay(i, j)
					}
					if p > 0 && o.OK {
						for range 3 {
							if rng.Float64() < p {
								o.Lost++
							}
						}
						o.OK = o.Lost < 3
					}
					res = append(res, o)
				}
				m.mu.Unlock()
				_ = exp.ConsumeMetrics(context.Background(), a.Round(now, tgts, res))
			}
		}
	}()
}

func (m *mesh) close() { close(m.stop); <-m.done }

func nodeCondition(t *testing.T, node, typ string) *corev1.NodeCondition {
	n, err := admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	require.NoError(t, err)
	for _, c := range n.Status.Conditions {
		if string(c.Type) == typ {
			return &c
		}
	}
	return nil
}

// One node partitioned among five: only that node gets the condition (quorum of distinct
// observer nodes), no other node is blamed; turning the signal off removes the condition.
func TestNodeConditionByQuorumAndCleanup(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const typ = "netpulse.io/PodNetworkProblem"
	m := newMesh(t, "quorum", 5)
	cfg := testConfig("pnh-quorum")
	cfg.LeaderElection.Enabled = false
	cfg.NodeConditions.Enabled = true
	cfg.NodeConditions.Heartbeat = time.Minute
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(ctx)
	exp := startExporter(t, cfg, "gw-q", tt)
	m.run(exp)
	m.set(4, true)
	bad := "quorum-node-4"
	require.Eventually(t, func() bool {
		c := nodeCondition(t, bad, typ)
		return c != nil && c.Status == corev1.ConditionTrue
	}, 40*time.Second, 200*time.Millisecond, "the partitioned node is never marked")
	c := nodeCondition(t, bad, typ)
	t.Logf("node condition: %s %s: %s", c.Status, c.Reason, c.Message)
	require.Equal(t, "UnreachableFromPeers", c.Reason)
	// No counts or peer lists: they change with every rotation of the observers, and a
	// message change alone must not cost a node-status write.
	require.NotRegexp(t, `[0-9]`, c.Message)
	for i := range 4 {
		c := nodeCondition(t, fmt.Sprintf("quorum-node-%d", i), typ)
		require.True(t, c == nil || c.Status == corev1.ConditionFalse, "node %d blamed: %+v", i, c)
	}
	// The same, as a gauge for alerting (1 True, 0 False, one series per node).
	require.Eventually(t, func() bool {
		m, err := tt.GetMetric("otelcol_pod_network_health_node_problem")
		if err != nil {
			return false
		}
		g, ok := m.Data.(metricdata.Gauge[int64])
		if !ok {
			return false
		}
		byNode := map[string]int64{}
		for _, dp := range g.DataPoints {
			v, _ := dp.Attributes.Value("netpulse.target.node")
			byNode[v.AsString()] = dp.Value
		}
		marked := 0
		for _, v := range byNode {
			marked += int(v)
		}
		return byNode[bad] == 1 && marked == 1
	}, 20*time.Second, 200*time.Millisecond, "node_problem gauge: want 1 for the marked node only")
	// Kubelet-owned conditions are untouched: the node has none but ours.
	n, err := admin.CoreV1().Nodes().Get(ctx, bad, metav1.GetOptions{})
	require.NoError(t, err)
	for _, c := range n.Status.Conditions {
		require.Equal(t, typ, string(c.Type))
	}
	m.close()
	require.NoError(t, exp.Shutdown(ctx))

	// The signal turned off: the next writer removes the stale condition.
	cfg2 := testConfig("pnh-quorum-off")
	cfg2.LeaderElection.Enabled = false
	exp2 := startExporter(t, cfg2, "gw-q2", nil)
	defer func() { require.NoError(t, exp2.Shutdown(ctx)) }()
	require.Eventually(t, func() bool { return nodeCondition(t, bad, typ) == nil }, 20*time.Second, 200*time.Millisecond, "stale node condition not cleaned up")
}

// The opt-in gray node condition (node_conditions.degraded_type) on a real API server: one
// node of five losing 20 % of the echoes towards it is marked PacketLoss (and no other
// node; the outage condition stays off everywhere: it answers most of its echoes); healed,
// the condition turns False once the verdict clears and its hold ends.
func TestGrayNodeCondition(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const outage, degraded = "netpulse.io/PodNetworkProblem", "netpulse.io/PodNetworkDegraded"
	m := newMesh(t, "graycond", 5)
	cfg := testConfig("pnh-graycond")
	cfg.LeaderElection.Enabled = false
	cfg.NodeConditions.Enabled = true
	cfg.NodeConditions.DegradedType = degraded
	cfg.NodeConditions.MinHold = 3 * time.Second
	// 2 s slots: the judgement's 1, 2, 4 ... slot scales at the test's 200 ms rounds.
	cfg.Gray.SlotWidth = 2 * time.Second
	cfg.Gray.Window = 2 * time.Minute
	exp := startExporter(t, cfg, "gw-gc", nil)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	const lossy = 4
	bad := fmt.Sprintf("graycond-node-%d", lossy)
	m.setLoss(lossy, 0.2)
	m.run(exp)
	defer m.close()
	// New agents' and targets' first 30 s are transients the judgement leaves out.
	if !assert.Eventually(t, func() bool {
		c := nodeCondition(t, bad, degraded)
		return c != nil && c.Status == corev1.ConditionTrue
	}, 90*time.Second, 250*time.Millisecond) {
		t.Fatalf("the lossy node is never marked; the objects: %s", grayPairs(t, "graycond"))
	}
	c := nodeCondition(t, bad, degraded)
	t.Logf("gray node condition: %s %s: %s", c.Status, c.Reason, c.Message)
	require.Equal(t, v1alpha1.ReasonPacketLoss, c.Reason)
	for i := range lossy {
		node := fmt.Sprintf("graycond-node-%d", i)
		c := nodeCondition(t, node, degraded)
		require.True(t, c == nil || c.Status == corev1.ConditionFalse, "%s marked: %+v", node, c)
	}
	for i := range lossy + 1 {
		node := fmt.Sprintf("graycond-node-%d", i)
		c := nodeCondition(t, node, outage)
		require.True(t, c == nil || c.Status == corev1.ConditionFalse, "%s has the outage condition during a gray loss: %+v", node, c)
	}
	m.setLoss(lossy, 0)
	require.Eventually(t, func() bool {
		c := nodeCondition(t, bad, degraded)
		return c != nil && c.Status == corev1.ConditionFalse
	}, 60*time.Second, 250*time.Millisecond, "the healed node's gray condition never turns False")
	c = nodeCondition(t, bad, degraded)
	t.Logf("healed: %s %s: %s", c.Status, c.Reason, c.Message)
}

// grayPairs describes the Degraded conditions of a namespace's objects (a failure's context).
func grayPairs(t *testing.T, ns string) string {
	list, err := pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, o := range list.Items {
		c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionDegraded)
		if c != nil {
			fmt.Fprintf(&b, "\n%s: %s %s %q (loss %s)", o.Name, c.Status, c.Reason, c.Message, o.Status.LossRatio)
		}
	}
	return b.String()
}

// A pod that declares the network-readiness gate gets the condition once it is reached
// from another node (alpha feature gate on).
func TestReadinessGate(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	gate := metadata.ExporterPodnetworkhealthReadinessGateFeatureGate
	require.NoError(t, featuregate.GlobalRegistry().Set(gate.ID(), true))
	defer func() { _ = featuregate.GlobalRegistry().Set(gate.ID(), false) }()
	// RBAC for pods/status is opt-in: apply it for this test.
	require.NoError(t, applyReadinessRBAC(ctx))

	m := newMesh(t, "gated", 2)
	ns := "gated"
	gated, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "gated-node-1", ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "netpulse.io/network-ready"}},
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/x:1"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	web := probetest.Target{NS: ns, Pod: gated.Name, UID: string(gated.UID), Node: "gated-node-1", IP: "192.0.2.50"}
	m.targets = append(m.targets, web)

	cfg := testConfig("pnh-gated")
	cfg.LeaderElection.Enabled = false
	cfg.ReadinessGate.Enabled = true
	exp := startExporter(t, cfg, "gw-g", nil)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	m.run(exp) // agent-0 on gated-node-0 reaches web on gated-node-1
	defer m.close()
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == "netpulse.io/network-ready" && c.Status == corev1.ConditionTrue {
				t.Logf("readiness condition: %s: %s", c.Reason, c.Message)
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "the gated pod never got the network-ready condition")
}

// Observers that stop reporting (their pods still exist): their objects read Unknown /
// ObserverSilent and are kept past target_ttl; deleting a source pod garbage-collects its
// objects (owner reference, kube-controller-manager), and nothing re-creates them.
func TestSilentObserversObjectsKeptUntilPodDeleted(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	m := newMesh(t, "ttl", 2)
	cfg := testConfig("pnh-ttl")
	cfg.LeaderElection.Enabled = false
	cfg.TargetTTL = time.Minute
	exp := startExporter(t, cfg, "gw-t", nil)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	m.run(exp)
	list := func() []v1alpha1.PodNetworkHealth {
		l, err := pnhClient.NetpulseV1alpha1().PodNetworkHealths("ttl").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil
		}
		return l.Items
	}
	silent := func(objs []v1alpha1.PodNetworkHealth) bool {
		for _, o := range objs {
			c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReachable)
			if o.Status.Reachability != v1alpha1.ReachabilityUnknown || c == nil || c.Reason != v1alpha1.ReasonObserverSilent {
				return false
			}
		}
		return len(objs) > 0
	}
	require.Eventually(t, func() bool { return len(list()) == 2 }, 20*time.Second, 200*time.Millisecond)
	m.close() // nothing is observed any more
	gone := time.Now()
	// A new writer declares no agent silent in its first verdict.TakeoverGrace (30 s), and
	// this writer started seconds ago: the objects read silent ~30 s after its start.
	require.Eventually(t, func() bool { objs := list(); return len(objs) == 2 && silent(objs) }, 60*time.Second, 200*time.Millisecond,
		"the objects of silent observers never read ObserverSilent")
	t.Logf("FIGURE objects read ObserverSilent %v after the last observation", time.Since(gone).Round(time.Second))
	time.Sleep(time.Until(gone.Add(cfg.TargetTTL + 15*time.Second)))
	objs := list()
	require.Len(t, objs, 2, "kept past target_ttl while their pods exist")
	require.True(t, silent(objs))

	// No kubelet confirms a graceful deletion here: delete at once.
	require.NoError(t, admin.CoreV1().Pods("ttl").Delete(ctx, m.targets[0].Pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	deleted := time.Now()
	require.Eventually(t, func() bool {
		for _, o := range list() {
			if o.Spec.SourcePodRef.Name == m.targets[0].Pod {
				return false
			}
		}
		return true
	}, time.Minute, 500*time.Millisecond, "the deleted pod's object was not garbage-collected")
	t.Logf("FIGURE the deleted source pod's object collected %v after the pod", time.Since(deleted).Round(time.Second))
	time.Sleep(5 * time.Second)
	objs = list()
	require.Len(t, objs, 1, "nothing re-creates the deleted pod's object")
	require.Equal(t, m.targets[1].Pod, objs[0].Spec.SourcePodRef.Name)
}

// node_conditions.degraded_type unset again (issue #37): a gateway that wrote the gray
// condition is replaced by one whose configuration no longer names it; the new one removes
// it from the node that carries it (recognised by its reason and message: the old name is
// not in its configuration), at its first node judgement. The outage condition, and
// another controller's condition with a gray reason, stay.
func TestGrayNodeConditionRemovedWhenUnset(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const outage, degraded, foreign = "netpulse.io/PodNetworkProblem", "netpulse.io/PodNetworkDegraded", "npd.example/NetworkLoss"
	const ns, lossy = "grayoff", 3
	m := newMesh(t, ns, 4)
	t.Cleanup(func() {
		for _, tg := range m.targets {
			_ = admin.CoreV1().Nodes().Delete(context.Background(), tg.Node, metav1.DeleteOptions{})
		}
	})
	bad := m.targets[lossy].Node
	config := func(gray string) *pnhexporter.Config {
		cfg := testConfig("pnh-grayoff")
		cfg.LeaderElection.Enabled = false
		cfg.NodeConditions.Enabled = true
		cfg.NodeConditions.DegradedType = gray
		cfg.Gray.SlotWidth = 2 * time.Second
		cfg.Gray.Window = 2 * time.Minute
		return cfg
	}
	// Another controller's condition on the same node, with a reason the gray one uses.
	n, err := admin.CoreV1().Nodes().Get(ctx, bad, metav1.GetOptions{})
	require.NoError(t, err)
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: foreign, Status: corev1.ConditionTrue,
		Reason: v1alpha1.ReasonPacketLoss, Message: "eth0 drops", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	// And the outage condition as an earlier writer cleared it (a node found fine is never
	// written one: no problem is no news).
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: outage, Status: corev1.ConditionFalse,
		Reason: "ReachableFromPeers", Message: "cleared", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)

	first := startExporter(t, config(degraded), "gw-grayoff-a", nil)
	m.setLoss(lossy, 0.2)
	m.run(first)
	if !assert.Eventually(t, func() bool {
		c := nodeCondition(t, bad, degraded)
		return c != nil && c.Status == corev1.ConditionTrue
	}, 90*time.Second, 250*time.Millisecond) {
		t.Fatalf("the lossy node is never marked; the objects: %s", grayPairs(t, ns))
	}
	m.close()
	require.NoError(t, first.Shutdown(ctx))
	require.NotNil(t, nodeCondition(t, bad, outage), "the outage condition stays through the first gateway")

	second := startExporter(t, config(""), "gw-grayoff-b", nil)
	unset := time.Now()
	require.Eventually(t, func() bool { return nodeCondition(t, bad, degraded) == nil }, 60*time.Second, 200*time.Millisecond,
		"the gray condition stays on the node after degraded_type was unset")
	t.Logf("FIGURE the stale gray condition removed %v after the gateway without degraded_type started", time.Since(unset).Round(100*time.Millisecond))
	require.NotNil(t, nodeCondition(t, bad, outage), "the outage condition stays")
	c := nodeCondition(t, bad, foreign)
	require.NotNil(t, c, "another controller's condition stays")
	require.Equal(t, "eth0 drops", c.Message)
	require.NoError(t, second.Shutdown(ctx))

	// Node conditions turned off: the one list of the nodes that removes the outage
	// condition removes a gray one too (here one as the first gateway wrote it while the
	// node was within thresholds, on another node).
	other := m.targets[0].Node
	n, err = admin.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
	require.NoError(t, err)
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: degraded, Status: corev1.ConditionFalse,
		Reason: "WithinThresholds", Message: "packet loss and latency at this node are within thresholds",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	off := config("")
	off.NodeConditions.Enabled = false
	third := startExporter(t, off, "gw-grayoff-c", nil)
	defer func() { require.NoError(t, third.Shutdown(ctx)) }()
	require.Eventually(t, func() bool {
		return nodeCondition(t, other, degraded) == nil && nodeCondition(t, other, outage) == nil && nodeCondition(t, bad, outage) == nil
	}, 60*time.Second, 200*time.Millisecond, "node conditions off: the outage and gray conditions stay")
	require.NotNil(t, nodeCondition(t, bad, foreign), "another controller's condition stays")
}
