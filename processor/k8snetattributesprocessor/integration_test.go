// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/k8sindex/k8sindextest"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/metadata"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// latestMetrics keeps the last batch a pipeline delivered.
type latestMetrics struct {
	mu   sync.Mutex
	last pmetric.Metrics
	n    int
}

func (l *latestMetrics) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (l *latestMetrics) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	l.mu.Lock()
	l.last, l.n = md, l.n+1
	l.mu.Unlock()
	return nil
}

// destination returns the data point attributes for addr in the last batch.
func (l *latestMetrics) destination(addr string) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return nil
	}
	dps := l.last.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		a := dps.At(i).Attributes()
		if v, ok := a.Get(contract.DestinationAddress); ok && v.Str() == addr {
			return a.AsRaw()
		}
	}
	return nil
}

func (l *latestMetrics) resource() map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return nil
	}
	return l.last.ResourceMetrics().At(0).Resource().Attributes().AsRaw()
}

func integrationPod(name, node, ip string, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec: corev1.PodSpec{
			NodeName: node, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none:1"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

// TestIntegrationTelemetryFollowsPods runs the processor against the real local control
// plane, fed with pod_probe-shaped metrics built by hand (probeMetrics). TODO: the
// pipeline test pod_probe -> k8s_net_attributes -> pod_network_health arrives with the
// pod_probe receiver; it should replace the hand-built metrics with the receiver's output.
//
// The processor runs in a metrics and a traces pipeline (sharing one index) while
// telemetry flows: pods appear, change IP, disappear and hand their IP to a new pod, and
// the output follows.
func TestIntegrationTelemetryFollowsPods(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the local control plane (run without -short)")
	}
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	ctx := context.Background()
	cs, err := cp.Clientset()
	require.NoError(t, err)
	require.NoError(t, kubetest.EnsureNamespace(ctx, cs, "shop")) // with its default service account
	for _, n := range []struct{ name, zone, ip string }{{"node-a", "zone-a", "172.31.0.1"}, {"node-b", "zone-b", "172.31.0.2"}} {
		node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
			Labels: map[string]string{corev1.LabelTopologyZone: n.zone, corev1.LabelTopologyRegion: "region-1"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	yes := true
	rs := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "cart-6b7c8d9f5", UID: "11111111-2222-4333-8444-555555555555", Controller: &yes}
	create := func(p *corev1.Pod) *corev1.Pod {
		got, err := k8sindextest.CreatePod(ctx, cs, p)
		require.NoError(t, err)
		return got
	}
	create(integrationPod("netpulse-agent-abcde", "node-a", "10.210.0.10", nil))
	cart := create(integrationPod("cart-6b7c8d9f5-x1", "node-b", "10.210.1.1", rs))

	// Collector side: the processor authenticates with a kubeconfig, like the
	// k8s_attributes reference in the benchmark; a counting transport sees every request.
	counter := k8sindextest.NewRequestCounter()
	restConfigHook = counter.Wrap
	t.Cleanup(func() { restConfigHook = nil })
	cfg := createDefaultConfig()
	cfg.AuthType, cfg.Kubeconfig = kubeclient.AuthKubeConfig, cp.Kubeconfig
	cfg.WaitForSync, cfg.WaitForSyncTimeout = true, 30*time.Second
	cfg.DeletedPodGrace = time.Second
	require.NoError(t, cfg.Validate())

	f := NewFactory()
	metricsOut := &latestMetrics{}
	mp, err := f.CreateMetrics(ctx, processortest.NewNopSettings(metadata.Type), cfg, metricsOut)
	require.NoError(t, err)
	tracesOut := new(consumertest.TracesSink)
	tp, err := f.CreateTraces(ctx, processortest.NewNopSettings(metadata.Type), cfg, tracesOut)
	require.NoError(t, err)
	began := time.Now()
	require.NoError(t, mp.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, tp.Start(ctx, componenttest.NewNopHost()))
	t.Logf("both processors started (synced) in %v", time.Since(began))
	assert.Equal(t, 1, registry.Len(), "two pipelines, one index")

	// Telemetry flows all along: the agent probes three addresses every 10 ms.
	addrsProbed := []string{"10.210.1.1", "10.210.1.2", "172.31.0.2"}
	var stop atomic.Bool
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		for !stop.Load() {
			if err := mp.ConsumeMetrics(ctx, probeMetrics(map[string]any{contract.K8sPodIP: "10.210.0.10"}, toAny(addrsProbed)...)); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.Eventually(t, cond, 20*time.Second, 10*time.Millisecond, what)
	}
	podAt := func(addr string) any { return metricsOut.destination(addr)["destination.k8s.pod.name"] }

	// 1. The source on the Resource, the target on data points, a node by its address.
	waitFor("cart resolves", func() bool { return podAt("10.210.1.1") == "cart-6b7c8d9f5-x1" })
	assert.Equal(t, "netpulse-agent-abcde", metricsOut.resource()[contract.K8sPodName])
	assert.Equal(t, "zone-a", metricsOut.resource()[contract.CloudZone])
	d := metricsOut.destination("10.210.1.1")
	assert.Equal(t, "cart", d["destination.k8s.deployment.name"])
	assert.Equal(t, "zone-b", d["destination.cloud.availability_zone"])
	assert.Equal(t, string(cart.UID), d["destination.k8s.pod.uid"])
	assert.Equal(t, "node-b", metricsOut.destination("172.31.0.2")["destination.k8s.node.name"])
	assert.Nil(t, podAt("10.210.1.2"), "nobody has this IP yet")

	// 2. The pod changes IP: the new one resolves at once, the old one for the grace period.
	cart.Status.PodIP, cart.Status.PodIPs = "10.210.1.2", []corev1.PodIP{{IP: "10.210.1.2"}}
	cart, err = cs.CoreV1().Pods("shop").UpdateStatus(ctx, cart, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor("new IP resolves", func() bool { return podAt("10.210.1.2") == "cart-6b7c8d9f5-x1" })
	waitFor("old IP stops resolving after the grace period", func() bool { return podAt("10.210.1.1") == nil })

	// 3. The pod is deleted: its IP stops resolving after the grace period.
	zero := int64(0)
	require.NoError(t, cs.CoreV1().Pods("shop").Delete(ctx, cart.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	waitFor("deleted pod stops resolving", func() bool { return podAt("10.210.1.2") == nil })

	// 4. A new pod takes the first IP.
	create(integrationPod("cart-6b7c8d9f5-x2", "node-a", "10.210.1.1", rs))
	waitFor("reused IP resolves to the new pod", func() bool { return podAt("10.210.1.1") == "cart-6b7c8d9f5-x2" })
	assert.Equal(t, "zone-a", metricsOut.destination("10.210.1.1")["destination.cloud.availability_zone"])

	// 5. A host-network pod on node-b: its IP is the node's, which still resolves to the node.
	hp := integrationPod("node-exporter-b", "node-b", "172.31.0.2", nil)
	hp.Spec.HostNetwork = true
	create(hp)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, "node-b", metricsOut.destination("172.31.0.2")["destination.k8s.node.name"])
	assert.Nil(t, podAt("172.31.0.2"))

	stop.Store(true)
	<-senderDone

	// The traces pipeline shares the index.
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.Attributes().PutStr("server.address", "10.210.1.1:8080")
	require.NoError(t, tp.ConsumeTraces(ctx, td))
	got := tracesOut.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()
	assert.Equal(t, "cart-6b7c8d9f5-x2", got["server.k8s.pod.name"])

	require.NoError(t, mp.Shutdown(ctx))
	require.NoError(t, tp.Shutdown(ctx))
	require.NoError(t, tp.Shutdown(ctx))
	assert.Equal(t, 0, registry.Len())

	// API load: one initial sync per resource type for the whole process, then watches.
	t.Logf("API requests: %s", counter)
	require.NoError(t, counter.CheckOneInitialSync("pods"))
	require.NoError(t, counter.CheckOneInitialSync("nodes"))
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
