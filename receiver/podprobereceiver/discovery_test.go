// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// makeReadyPod creates a pod on node and plays the kubelet: Running, Ready, with ip.
func makeReadyPod(t *testing.T, cs kubernetes.Interface, ns, name, node, ip string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Image: "example.invalid/agent:1", Ports: ports,
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  ip,
		PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute)),
		}},
	}
	pod, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	return pod
}

// Peers come from a label-selected pod informer against a real API server, with the
// agent's least-privilege identity: targets follow pods as they appear and disappear.
// Pod IPs are loopback addresses (127.0.10.x) so every probe is real and stays on this host.
func TestPeerDiscoveryFollowsPods(t *testing.T) {
	cp := kubetest.StartForTest(t, kubetest.Options{})
	ctx := context.Background()
	admin, err := cp.Clientset()
	require.NoError(t, err)
	ns := "netpulse"
	require.NoError(t, kubetest.EnsureNamespace(ctx, admin, ns))
	require.Eventually(t, func() bool {
		_, err := admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)

	// The agent may only read pods in its namespace and nodes.
	saCfg, err := cp.ServiceAccountConfig(ctx, ns, "agent")
	require.NoError(t, err)
	require.NoError(t, cp.Grant(ctx, ns, "agent", false, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}))
	require.NoError(t, cp.Grant(ctx, ns, "agent", true, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}))
	kubeconfig := t.TempDir() + "/agent.kubeconfig"
	require.NoError(t, kubetest.WriteKubeconfig(saCfg, kubeconfig))

	labels := map[string]string{"app.kubernetes.io/name": "netpulse-agent"}
	self := makeReadyPod(t, admin, ns, "agent-0", "node-0", "127.0.10.1", labels)
	for i := 1; i < 4; i++ {
		makeReadyPod(t, admin, ns, fmt.Sprintf("agent-%d", i), fmt.Sprintf("node-%d", i), fmt.Sprintf("127.0.10.%d", i+1), labels)
	}
	// Not a peer: another app's pod in the same namespace.
	makeReadyPod(t, admin, ns, "other", "node-1", "127.0.10.99", map[string]string{"app": "other"})

	// A selector target with a named port, served on loopback.
	l, err := net.Listen("tcp", "127.0.10.50:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	makeReadyPod(t, admin, ns, "checkout", "node-2", "127.0.10.50", map[string]string{"app": "checkout"},
		corev1.ContainerPort{Name: "http", ContainerPort: port})

	cfg := createDefaultConfig().(*Config)
	cfg.Config = kubeclient.Config{AuthType: kubeclient.AuthKubeConfig, Kubeconfig: kubeconfig, QPS: 5, Burst: 10}
	cfg.Interval = 300 * time.Millisecond
	cfg.Timeout = 200 * time.Millisecond
	cfg.K = 3 // with 4 agents every agent probes every other one each round
	cfg.AllowLoopback = true
	cfg.ICMP.Count = 1
	cfg.Peers.ReadyGracePeriod = 0
	cfg.Peers.Namespace = ns
	cfg.Selectors = []SelectorConfig{{Namespace: ns, LabelSelector: "app=checkout", Port: "http", Probes: []string{"tcp"}, Observers: 4}}
	cfg.Source = SourceConfig{PodName: self.Name, PodUID: string(self.UID), Namespace: ns, NodeName: "node-0", PodIPs: "127.0.10.1"}
	require.NoError(t, cfg.Validate())

	sink := &addressSink{}
	rcv, err := NewFactory().CreateMetrics(ctx, receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, rcv.Shutdown(ctx)) }()

	want := []string{"icmp 127.0.10.2", "icmp 127.0.10.3", "icmp 127.0.10.4", fmt.Sprintf("tcp 127.0.10.50:%d", port)}
	require.Eventually(t, func() bool { return slices.Equal(sink.lastRound(), want) }, 20*time.Second, 100*time.Millisecond,
		"targets %v, want %v", sink.lastRound(), want)
	require.True(t, sink.allSucceeded(), "loopback targets answer")

	// A peer going away stops being probed.
	zero := int64(0)
	require.NoError(t, admin.CoreV1().Pods(ns).Delete(ctx, "agent-2", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	want = []string{"icmp 127.0.10.2", "icmp 127.0.10.4", fmt.Sprintf("tcp 127.0.10.50:%d", port)}
	require.Eventually(t, func() bool { return slices.Equal(sink.lastRound(), want) }, 20*time.Second, 100*time.Millisecond,
		"targets %v, want %v", sink.lastRound(), want)

	// A peer that is not Ready is not a target; once Ready again, it is.
	p1, err := admin.CoreV1().Pods(ns).Get(ctx, "agent-1", metav1.GetOptions{})
	require.NoError(t, err)
	p1.Status.Conditions[0].Status = corev1.ConditionFalse
	_, err = admin.CoreV1().Pods(ns).UpdateStatus(ctx, p1, metav1.UpdateOptions{})
	require.NoError(t, err)
	want = []string{"icmp 127.0.10.4", fmt.Sprintf("tcp 127.0.10.50:%d", port)}
	require.Eventually(t, func() bool { return slices.Equal(sink.lastRound(), want) }, 20*time.Second, 100*time.Millisecond,
		"targets %v, want %v", sink.lastRound(), want)
}

// addressSink records, per ConsumeMetrics call, which (probe, address[:port]) were probed.
type addressSink struct {
	consumertest.MetricsSink
	mu     sync.Mutex
	rounds [][]string
	ok     []bool
}

func (s *addressSink) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	var round []string
	allOK := true
	for _, p := range flatten([]pmetric.Metrics{md}) {
		if p.metric != contract.MetricStatus {
			continue
		}
		key := fmt.Sprintf("%s %s", p.attrs[contract.ProbeType], p.attrs[contract.DestinationAddress])
		if port, ok := p.attrs[contract.DestinationPort]; ok {
			key += fmt.Sprintf(":%d", port)
		}
		round = append(round, key)
		allOK = allOK && p.value == 1
	}
	slices.Sort(round)
	s.mu.Lock()
	s.rounds = append(s.rounds, round)
	s.ok = append(s.ok, allOK)
	s.mu.Unlock()
	return s.MetricsSink.ConsumeMetrics(ctx, md)
}

func (s *addressSink) lastRound() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rounds) == 0 {
		return nil
	}
	return s.rounds[len(s.rounds)-1]
}

func (s *addressSink) allSucceeded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ok) > 0 && s.ok[len(s.ok)-1]
}
