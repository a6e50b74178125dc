// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package pipelinetest proves the telemetry contract between netpulse's components:
// pod_probe -> k8s_net_attributes -> pod_network_health, in one process, against the real
// local control plane, with the agent and gateway identities from deploy/rbac; and, beside
// it, the gateway's export path (explicit_buckets as gateway.yaml configures it).
package pipelinetest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/goleak"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	pnh "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/kubeclient"
	explicitbuckets "github.com/netpulse/netpulse/processor/explicitbucketsprocessor"
	k8snet "github.com/netpulse/netpulse/processor/k8snetattributesprocessor"
	"github.com/netpulse/netpulse/receiver/podprobereceiver"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*loggingT).flushDaemon"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

func kubeconfigFor(t *testing.T, cp *kubetest.ControlPlane, sa string) kubeclient.Config {
	t.Helper()
	cfg, err := cp.ServiceAccountConfig(context.Background(), "netpulse", sa)
	require.NoError(t, err)
	path := t.TempDir() + "/" + sa + ".kubeconfig"
	require.NoError(t, kubetest.WriteKubeconfig(cfg, path))
	return kubeclient.Config{AuthType: kubeclient.AuthKubeConfig, Kubeconfig: path, QPS: 20, Burst: 40}
}

func TestContractPodProbeToPodNetworkHealth(t *testing.T) {
	cp := kubetest.StartForTest(t, kubetest.Options{})
	ctx := context.Background()
	require.NoError(t, kubetest.Apply(ctx, cp.Config, kubetest.DeployPath("crds"), kubetest.DeployPath("agent-gateway", "namespace.yaml"), kubetest.DeployPath("rbac")))
	admin, err := cp.Clientset()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := admin.CoreV1().ServiceAccounts("netpulse").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)

	// Three simulated nodes in two zones, an agent pod on each with a loopback pod IP, so
	// every probe is real and stays on this host.
	var pods []*corev1.Pod
	for i := range 3 {
		node := fmt.Sprintf("node-%d", i)
		_, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{
			"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%2), "topology.kubernetes.io/region": "region-1",
		}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		pod, err := admin.CoreV1().Pods("netpulse").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("netpulse-agent-%d", i), Namespace: "netpulse",
				Labels: map[string]string{"app.kubernetes.io/name": "netpulse-agent"}},
			Spec: restrictedSpec(node),
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		ip := fmt.Sprintf("127.0.10.%d", i+1)
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}}}
		pod, err = admin.CoreV1().Pods("netpulse").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		require.NoError(t, err)
		pods = append(pods, pod)
	}
	self := pods[0]

	// Gateway side: pod_network_health after k8s_net_attributes, with a tap to check the
	// enriched data points.
	expCfg := pnh.NewFactory().CreateDefaultConfig().(*pnh.Config)
	expCfg.Config = kubeconfigFor(t, cp, "netpulse-gateway")
	expCfg.LeaderElection.Enabled = false
	exp, err := pnh.NewFactory().CreateMetrics(ctx, exportertest.NewNopSettings(pnh.NewFactory().Type()), expCfg)
	require.NoError(t, err)
	tap := new(consumertest.MetricsSink)
	var tapMu sync.Mutex
	next, err := consumer.NewMetrics(func(ctx context.Context, md pmetric.Metrics) error {
		tapMu.Lock()
		c := pmetric.NewMetrics()
		md.CopyTo(c)
		_ = tap.ConsumeMetrics(ctx, c)
		tapMu.Unlock()
		return exp.ConsumeMetrics(ctx, md)
	})
	require.NoError(t, err)
	procCfg := k8snet.NewFactory().CreateDefaultConfig().(*k8snet.Config)
	procCfg.Config = kubeconfigFor(t, cp, "netpulse-gateway")
	procCfg.WaitForSync = true
	procCfg.WaitForSyncTimeout = 30 * time.Second
	proc, err := k8snet.NewFactory().CreateMetrics(ctx, processortest.NewNopSettings(k8snet.NewFactory().Type()), procCfg, next)
	require.NoError(t, err)

	// The gateway's export path, beside it: the same points through explicit_buckets as
	// configured in gateway.yaml (the receiver's exponential histogram as classic buckets
	// for Prometheus); pod_network_health keeps getting the exponential one.
	ebFactory := explicitbuckets.NewFactory()
	ebCfg := ebFactory.CreateDefaultConfig().(*explicitbuckets.Config)
	gw, err := os.ReadFile(kubetest.DeployPath("agent-gateway", "config", "gateway.yaml"))
	require.NoError(t, err)
	var gwDoc struct {
		Processors map[string]map[string]any `yaml:"processors"`
	}
	require.NoError(t, yaml.Unmarshal(gw, &gwDoc))
	require.NoError(t, confmap.NewFromStringMap(gwDoc.Processors["explicit_buckets"]).Unmarshal(ebCfg))
	require.NoError(t, ebCfg.Validate())
	exported := new(consumertest.MetricsSink)
	var exportMu sync.Mutex
	lockedExport, err := consumer.NewMetrics(func(ctx context.Context, md pmetric.Metrics) error {
		exportMu.Lock()
		defer exportMu.Unlock()
		return exported.ConsumeMetrics(ctx, md)
	})
	require.NoError(t, err)
	conv, err := ebFactory.CreateMetrics(ctx, processortest.NewNopSettings(ebFactory.Type()), ebCfg, lockedExport)
	require.NoError(t, err)
	fanout, err := consumer.NewMetrics(func(ctx context.Context, md pmetric.Metrics) error {
		c := pmetric.NewMetrics()
		md.CopyTo(c)
		if err := conv.ConsumeMetrics(ctx, c); err != nil {
			return err
		}
		return proc.ConsumeMetrics(ctx, md)
	})
	require.NoError(t, err)

	// Agent side: pod_probe with the agent's least-privilege identity.
	rcvCfg := podprobereceiver.NewFactory().CreateDefaultConfig().(*podprobereceiver.Config)
	rcvCfg.Config = kubeconfigFor(t, cp, "netpulse-agent")
	rcvCfg.Interval = 300 * time.Millisecond
	rcvCfg.Timeout = 250 * time.Millisecond
	rcvCfg.ICMP.Count = 2
	rcvCfg.ICMP.EchoInterval = 10 * time.Millisecond
	rcvCfg.K = 2
	rcvCfg.AllowLoopback = true
	rcvCfg.Peers.Namespace = "netpulse"
	rcvCfg.Peers.ReadyGracePeriod = 0
	rcvCfg.Source = podprobereceiver.SourceConfig{PodName: self.Name, PodUID: string(self.UID), Namespace: "netpulse", NodeName: "node-0", PodIPs: "127.0.10.1"}
	require.NoError(t, rcvCfg.Validate())
	rcv, err := podprobereceiver.NewFactory().CreateMetrics(ctx, receivertest.NewNopSettings(podprobereceiver.NewFactory().Type()), rcvCfg, fanout)
	require.NoError(t, err)

	host := componenttest.NewNopHost()
	require.NoError(t, exp.Start(ctx, host))
	require.NoError(t, proc.Start(ctx, host))
	require.NoError(t, conv.Start(ctx, host))
	require.NoError(t, rcv.Start(ctx, host))
	defer func() {
		require.NoError(t, rcv.Shutdown(ctx))
		require.NoError(t, conv.Shutdown(ctx))
		require.NoError(t, proc.Shutdown(ctx))
		require.NoError(t, exp.Shutdown(ctx))
	}()

	// The contract, as the gateway sees it after enrichment.
	want := map[string]*corev1.Pod{"127.0.10.2": pods[1], "127.0.10.3": pods[2]}
	require.Eventually(t, func() bool {
		tapMu.Lock()
		defer tapMu.Unlock()
		seen := map[string]bool{}
		for _, md := range tap.AllMetrics() {
			rms := md.ResourceMetrics()
			for i := 0; i < rms.Len(); i++ {
				res := rms.At(i).Resource().Attributes()
				if v, _ := res.Get(contract.K8sPodUID); v.Str() != string(self.UID) {
					continue
				}
				sms := rms.At(i).ScopeMetrics()
				for j := 0; j < sms.Len(); j++ {
					ms := sms.At(j).Metrics()
					for k := 0; k < ms.Len(); k++ {
						if ms.At(k).Name() != contract.MetricStatus {
							continue
						}
						dps := ms.At(k).Gauge().DataPoints()
						for d := 0; d < dps.Len(); d++ {
							a := dps.At(d).Attributes()
							addr, _ := a.Get(contract.DestinationAddress)
							p := want[addr.Str()]
							if p == nil {
								continue
							}
							get := func(k string) string { v, _ := a.Get(k); return v.Str() }
							if get(contract.DestinationPrefix+contract.K8sPodName) == p.Name &&
								get(contract.DestinationPrefix+contract.K8sPodUID) == string(p.UID) &&
								get(contract.DestinationPrefix+contract.K8sNamespaceName) == "netpulse" &&
								get(contract.DestinationPrefix+contract.K8sNodeName) == p.Spec.NodeName &&
								get(contract.DestinationPrefix+contract.CloudZone) != "" &&
								get(contract.DestinationPrefix+contract.K8sDaemonSetName) == "" && // no owner in this test
								get(contract.ProbeType) == "icmp" && get(contract.NetworkType) == "ipv4" &&
								dps.At(d).IntValue() == 1 {
								seen[addr.Str()] = true
							}
						}
					}
				}
			}
		}
		return len(seen) == len(want)
	}, 30*time.Second, 200*time.Millisecond, "enriched contract fields for both peers")

	// ... and what pod_network_health made of it in the API.
	pnhClient, err := versioned.NewForConfig(cp.Config)
	require.NoError(t, err)
	for _, p := range pods[1:] {
		name := v1alpha1.ObjectName("netpulse", self.Name, "Pod", "netpulse", p.Name, "")
		var obj *v1alpha1.PodNetworkHealth
		require.Eventually(t, func() bool {
			obj, err = pnhClient.NetpulseV1alpha1().PodNetworkHealths("netpulse").Get(ctx, name, metav1.GetOptions{})
			return err == nil && obj.Status.Reachability == v1alpha1.Reachable && obj.Status.Latency != nil
		}, 30*time.Second, 200*time.Millisecond, "PodNetworkHealth %s", name)
		require.Equal(t, p.UID, obj.Spec.TargetPodRef.UID)
		require.Equal(t, self.UID, obj.Spec.SourcePodRef.UID)
		require.Equal(t, "node-0", obj.Status.ObservedFromNode)
		require.Equal(t, v1alpha1.ProbeTypeICMP, obj.Status.Probes[0].Type)
		require.Positive(t, obj.Status.Probes[0].Sent)
		p50, err := obj.Status.Latency.P50.Duration()
		require.NoError(t, err)
		require.Less(t, p50, 50*time.Millisecond, "loopback RTT")
	}

	// The export path's RTT histogram: classic buckets with the gateway's bounds, holding
	// exactly the samples of the exponential histogram pod_network_health decoded (same
	// stream, same round: same count and sum).
	type roundKey struct {
		addr string
		ts   pcommon.Timestamp
	}
	expo := map[roundKey]pmetric.ExponentialHistogramDataPoint{}
	tapMu.Lock()
	for _, md := range tap.AllMetrics() {
		forDuration(md, func(m pmetric.Metric) {
			require.Equal(t, pmetric.MetricTypeExponentialHistogram, m.Type(), "pod_network_health gets the exponential histogram")
			for i := 0; i < m.ExponentialHistogram().DataPoints().Len(); i++ {
				dp := m.ExponentialHistogram().DataPoints().At(i)
				addr, _ := dp.Attributes().Get(contract.DestinationAddress)
				expo[roundKey{addr.Str(), dp.Timestamp()}] = dp
			}
		})
	}
	tapMu.Unlock()
	exportMu.Lock()
	defer exportMu.Unlock()
	matched := map[string]int{}
	for _, md := range exported.AllMetrics() {
		forDuration(md, func(m pmetric.Metric) {
			require.Equal(t, pmetric.MetricTypeHistogram, m.Type(), "the export path gets classic buckets")
			for i := 0; i < m.Histogram().DataPoints().Len(); i++ {
				dp := m.Histogram().DataPoints().At(i)
				require.Equal(t, ebCfg.Bounds(), dp.ExplicitBounds().AsRaw())
				var total uint64
				for _, c := range dp.BucketCounts().AsRaw() {
					total += c
				}
				require.Equal(t, dp.Count(), total)
				addr, _ := dp.Attributes().Get(contract.DestinationAddress)
				e, ok := expo[roundKey{addr.Str(), dp.Timestamp()}]
				if !ok || want[addr.Str()] == nil {
					continue
				}
				require.Equal(t, e.Count(), dp.Count(), "round %v of %s", dp.Timestamp(), addr.Str())
				require.Equal(t, e.Sum(), dp.Sum())
				matched[addr.Str()]++
			}
		})
	}
	require.Len(t, matched, len(want), "both peers' RTT histograms on the export path: %v", matched)
}

// forDuration calls f for every netpulse.probe.duration metric of md.
func forDuration(md pmetric.Metrics, f func(pmetric.Metric)) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Name() == contract.MetricDuration {
					f(ms.At(k))
				}
			}
		}
	}
}

// restrictedSpec passes the namespace's Pod Security "restricted" admission, as the
// DaemonSet's pods do.
func restrictedSpec(node string) corev1.PodSpec {
	yes, no := true, false
	return corev1.PodSpec{
		NodeName: node,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   &yes,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name: "c", Image: "example.invalid/x:1",
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no,
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
	}
}
