// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/extension/k8stokenauthextension/k8stokenauthtest"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/receiver/podprobereceiver"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/syntheticagent"
)

// shape is what the gateway's cost depends on in a batch, as a sorted list of lines:
// the Resource's keys, the scope, each metric's name, description, unit, type and
// temporality, and per metric and pair kind (stable or rotating) the points' attribute
// keys and types, value type and where their StartTimestamp comes from (the receiver's
// start, or the point's own series), and the number of points of each.
func shape(md pmetric.Metrics) []string {
	var lines []string
	add := func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }
	keys := func(m pcommon.Map) string {
		var ks []string
		m.Range(func(k string, v pcommon.Value) bool {
			ks = append(ks, k+":"+v.Type().String())
			return true
		})
		return strings.Join(ks, ",")
	}
	add("resource_metrics %d", md.ResourceMetrics().Len())
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		add("resource %s", keys(rm.Resource().Attributes()))
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			sm := rm.ScopeMetrics().At(j)
			add("scope %s version_set=%v", sm.Scope().Name(), sm.Scope().Version() != "")
			// The receiver's start: the earliest StartTimestamp of the sums and gauges.
			var recvStart pcommon.Timestamp
			for k := 0; k < sm.Metrics().Len(); k++ {
				forPoints(sm.Metrics().At(k), func(_ pcommon.Map, start, _ pcommon.Timestamp, _ string) {
					if sm.Metrics().At(k).Type() != pmetric.MetricTypeExponentialHistogram && (recvStart == 0 || start < recvStart) {
						recvStart = start
					}
				})
			}
			var order []string
			for k := 0; k < sm.Metrics().Len(); k++ {
				m := sm.Metrics().At(k)
				order = append(order, m.Name())
				temp, mono := "", false
				switch m.Type() {
				case pmetric.MetricTypeSum:
					temp, mono = m.Sum().AggregationTemporality().String(), m.Sum().IsMonotonic()
				case pmetric.MetricTypeExponentialHistogram:
					temp = m.ExponentialHistogram().AggregationTemporality().String()
				}
				add("metric %s type=%s unit=%q temporality=%s monotonic=%v desc=%q", m.Name(), m.Type(), m.Unit(), temp, mono, m.Description())
				counts := map[string]int{}
				forPoints(m, func(attrs pcommon.Map, start, ts pcommon.Timestamp, value string) {
					stable, _ := attrs.Get(contract.PairStable)
					from := "own"
					if start == recvStart {
						from = "receiver"
					}
					if start > ts {
						from = "after-timestamp"
					}
					counts[fmt.Sprintf("point %s stable=%v attrs=%s value=%s start=%s", m.Name(), stable.Bool(), keys(attrs), value, from)]++
				})
				for l, n := range counts {
					add("%s x%d", l, n)
				}
			}
			add("metric order %s", strings.Join(order, " "))
		}
	}
	slices.Sort(lines)
	return lines
}

func forPoints(m pmetric.Metric, f func(attrs pcommon.Map, start, ts pcommon.Timestamp, value string)) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		for i := 0; i < m.Gauge().DataPoints().Len(); i++ {
			dp := m.Gauge().DataPoints().At(i)
			f(dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), dp.ValueType().String())
		}
	case pmetric.MetricTypeSum:
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			dp := m.Sum().DataPoints().At(i)
			f(dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), dp.ValueType().String())
		}
	case pmetric.MetricTypeExponentialHistogram:
		for i := 0; i < m.ExponentialHistogram().DataPoints().Len(); i++ {
			dp := m.ExponentialHistogram().DataPoints().At(i)
			f(dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), fmt.Sprintf("exphist(sum=%v,min=%v,max=%v,count>0=%v)", dp.HasSum(), dp.HasMin(), dp.HasMax(), dp.Count() > 0))
		}
	default:
		f(pcommon.NewMap(), 0, 0, "unexpected "+m.Type().String())
	}
}

func ips(idx []int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = fmt.Sprintf("127.0.20.%d", j+1)
	}
	return out
}

// TestAgentShapeMatchesPodProbe runs the real pod_probe receiver with the shipped probing
// settings (k 3, stable_peers 1, ICMP with 3 echoes 100 ms apart) against eight agent pods
// with loopback IPs on the local control plane, and checks that a round of the synthetic agent has the
// same shape as the receiver's own round (after its third, so that its start time lies in
// the past as on a running agent).
func TestAgentShapeMatchesPodProbe(t *testing.T) {
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	ctx := context.Background()
	require.NoError(t, kubetest.Apply(ctx, cp.Config, kubetest.DeployPath("crds"), kubetest.DeployPath("agent-gateway", "namespace.yaml"),
		kubetest.DeployPath("rbac", "agent.yaml")))
	admin, err := cp.Clientset()
	require.NoError(t, err)
	// More peers than k + stable_peers, so that the planner rotates.
	const agents = 8
	var pods []*corev1.Pod
	for i := range agents {
		node := fmt.Sprintf("node-%d", i)
		_, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
		require.NoError(t, err)
		pod, err := admin.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("netpulse-agent-%d", i), Namespace: namespace,
				Labels: map[string]string{"app.kubernetes.io/name": "netpulse-agent"}},
			Spec: k8stokenauthtest.RestrictedPodSpec(agentServiceAccount, node),
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		ip := fmt.Sprintf("127.0.20.%d", i+1)
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}}}
		pod, err = admin.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		require.NoError(t, err)
		pods = append(pods, pod)
	}
	self := pods[0]
	saCfg, err := cp.ServiceAccountConfig(ctx, namespace, agentServiceAccount)
	require.NoError(t, err)
	kc := t.TempDir() + "/agent.kubeconfig"
	require.NoError(t, kubetest.WriteKubeconfig(saCfg, kc))

	f := podprobereceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*podprobereceiver.Config)
	cfg.Config = kubeclient.Config{AuthType: kubeclient.AuthKubeConfig, Kubeconfig: kc, QPS: 20, Burst: 40}
	// The shipped agent.yaml's probing, on a 1 s round so the test is short.
	require.Equal(t, syntheticagent.ShippedK, cfg.K)
	require.Equal(t, syntheticagent.ShippedStablePeers, cfg.StablePeers)
	cfg.ICMP.Count, cfg.ICMP.EchoInterval = syntheticagent.ShippedICMPCount, syntheticagent.ShippedEchoInterval
	cfg.Interval, cfg.Timeout = time.Second, 500*time.Millisecond
	cfg.AllowLoopback = true
	cfg.AddressFamilies = []string{"ipv4"}
	cfg.Peers.Namespace = namespace
	cfg.Peers.ReadyGracePeriod = 0
	cfg.Source = podprobereceiver.SourceConfig{PodName: self.Name, PodUID: string(self.UID), Namespace: namespace, NodeName: "node-0", PodIPs: "127.0.20.1"}
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.MetricsSink)
	set := receivertest.NewNopSettings(f.Type())
	set.BuildInfo.Version = syntheticagent.AgentVersion
	rcv, err := f.CreateMetrics(ctx, set, cfg, sink)
	require.NoError(t, err)
	started := time.Now()
	require.NoError(t, rcv.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, rcv.Shutdown(ctx)) }()

	full := func(md pmetric.Metrics) bool {
		return md.DataPointCount() == 6*(syntheticagent.ShippedK+syntheticagent.ShippedStablePeers)
	}
	require.Eventually(t, func() bool {
		n := 0
		for _, md := range sink.AllMetrics() {
			if full(md) {
				n++
			}
		}
		return n >= 3
	}, 60*time.Second, 100*time.Millisecond, "three full rounds of pod_probe")
	var real pmetric.Metrics
	for _, md := range sink.AllMetrics() {
		if full(md) {
			real = md
		}
	}

	a := syntheticagent.NewAgent(self.Name, string(self.UID), namespace, "node-0", "127.0.20.1", started, 1)
	var ours pmetric.Metrics
	for r := range 3 {
		stable, rotating := syntheticagent.Plan(0, agents, r)
		ours = a.Round(started.Add(time.Duration(r+1)*time.Second), ips(stable), ips(rotating))
	}
	require.Equal(t, shape(real), shape(ours))
}
