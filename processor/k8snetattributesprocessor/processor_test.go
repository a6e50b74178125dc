// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/k8sindex"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/metadata"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/metadatatest"
)

// The test cluster: two nodes in two zones, a probing agent pod, a dual-stack target, a
// host-network pod, and a deleted pod still in its grace period.
const (
	agentIP       = "10.64.0.10"
	targetIP4     = "10.64.1.20"
	targetIP6     = "fd00:10::1:20"
	nodeAIP       = "172.16.0.1"
	nodeBIP       = "172.16.0.2"
	deletedIP     = "10.64.1.99"
	unknownIP     = "10.99.0.1"
	statefulIP    = "10.64.0.30"
	labelledAppIP = "10.64.0.40"
)

func testIndex(t *testing.T, labels ...string) *k8sindex.Index {
	t.Helper()
	ix := k8sindex.New(k8sindex.Config{DeletedPodGrace: time.Hour, PodLabels: labels})
	ix.UpsertNode(&k8sindex.NodeRecord{Name: "node-a", Zone: "eu-west-1a", Region: "eu-west-1", IPs: addrs(nodeAIP)})
	ix.UpsertNode(&k8sindex.NodeRecord{Name: "node-b", Zone: "eu-west-1b", Region: "eu-west-1", IPs: addrs(nodeBIP)})
	pods := []*k8sindex.PodRecord{
		{UID: "uid-agent", Name: "netpulse-agent-x7k2p", Namespace: "netpulse", NodeName: "node-a", IPs: addrs(agentIP),
			Workload: k8sindex.Workload{Kind: k8sindex.WorkloadDaemonSet, Name: "netpulse-agent"}},
		{UID: "uid-cart", Name: "cart-7d9f8b6c5d-q4w9z", Namespace: "shop", NodeName: "node-b", IPs: addrs(targetIP4, targetIP6),
			Workload: k8sindex.Workload{Kind: k8sindex.WorkloadDeployment, Name: "cart"}},
		{UID: "uid-db", Name: "db-0", Namespace: "shop", NodeName: "node-a", IPs: addrs(statefulIP),
			Workload: k8sindex.Workload{Kind: k8sindex.WorkloadStatefulSet, Name: "db"}},
		{UID: "uid-gone", Name: "old-batch-abcde", Namespace: "jobs", NodeName: "node-b", IPs: addrs(deletedIP),
			Workload: k8sindex.Workload{Kind: k8sindex.WorkloadCronJob, Name: "old-batch"}},
		{UID: "uid-host", Name: "node-exporter-a", Namespace: "mon", NodeName: "node-a", IPs: addrs(nodeAIP), HostNetwork: true},
		{UID: "uid-web", Name: "web-1", Namespace: "shop", NodeName: "node-b", IPs: addrs(labelledAppIP),
			Labels: []string{"web", ""}},
	}
	for _, p := range pods {
		p.Phase = k8sindex.PhaseRunning
		if labels == nil {
			p.Labels = nil
		}
		ix.UpsertPod(p)
	}
	ix.DeletePod("uid-gone")
	return ix
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func startTestProcessor(t *testing.T, cfg *Config, ix *k8sindex.Index, set processor.Settings) *netAttributesProcessor {
	t.Helper()
	require.NoError(t, cfg.Validate())
	p, err := newProcessor(set, cfg)
	require.NoError(t, err)
	p.acquire = func() (*k8sindex.Handle, error) { return k8sindex.StaticHandle(ix), nil }
	require.NoError(t, p.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.stop(context.Background())) })
	return p
}

func newTestProcessor(t *testing.T, cfg *Config, ix *k8sindex.Index) *netAttributesProcessor {
	return startTestProcessor(t, cfg, ix, processortest.NewNopSettings(metadata.Type))
}

// probeMetrics is what pod_probe emits: the source on the Resource, the target on data
// points, several metric types.
func probeMetrics(resource map[string]any, targets ...any) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	_ = rm.Resource().Attributes().FromRaw(resource)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	status := ms.AppendEmpty()
	status.SetName(contract.MetricStatus)
	g := status.SetEmptyGauge()
	for _, tg := range targets {
		dp := g.DataPoints().AppendEmpty()
		switch v := tg.(type) {
		case string:
			dp.Attributes().PutStr(contract.DestinationAddress, v)
		case map[string]any:
			_ = dp.Attributes().FromRaw(v)
		}
		dp.Attributes().PutStr(contract.ProbeType, contract.ProbeTypeICMP)
		dp.SetIntValue(1)
	}
	return md
}

func dpAttrs(md pmetric.Metrics, i int) map[string]any {
	return md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(i).Attributes().AsRaw()
}

func cartAsDestination(extra map[string]any) map[string]any {
	m := map[string]any{
		"destination.k8s.pod.name":            "cart-7d9f8b6c5d-q4w9z",
		"destination.k8s.namespace.name":      "shop",
		"destination.k8s.pod.uid":             "uid-cart",
		"destination.k8s.node.name":           "node-b",
		"destination.k8s.deployment.name":     "cart",
		"destination.cloud.availability_zone": "eu-west-1b",
		"destination.cloud.region":            "eu-west-1",
		contract.ProbeType:                    contract.ProbeTypeICMP,
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestEnrichSourceAndDestination(t *testing.T) {
	p := newTestProcessor(t, createDefaultConfig(), testIndex(t))
	md := probeMetrics(
		map[string]any{contract.K8sPodIP: agentIP, contract.K8sPodName: "netpulse-agent-x7k2p"},
		targetIP4,                       // 0: bare IPv4
		targetIP4+":8080",               // 1: with a port
		"["+targetIP6+"]:53",            // 2: IPv6 in brackets with a port
		targetIP6,                       // 3: bare IPv6 (the same pod, dual-stack)
		nodeBIP,                         // 4: a node
		nodeAIP,                         // 5: a host-network pod's IP: its node
		unknownIP,                       // 6: not in the index
		"cart.shop.svc.cluster.local",   // 7: hostname: not resolved
		deletedIP,                       // 8: deleted pod, within grace
		map[string]any{"other": "attr"}, // 9: no address at all
		statefulIP,                      // 10: a StatefulSet pod
	)
	n := md.DataPointCount()
	out, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	require.Equal(t, n, out.DataPointCount(), "nothing is dropped")

	assert.Equal(t, map[string]any{
		contract.K8sPodIP:         agentIP,
		contract.K8sPodName:       "netpulse-agent-x7k2p",
		contract.K8sNamespaceName: "netpulse",
		contract.K8sPodUID:        "uid-agent",
		contract.K8sNodeName:      "node-a",
		contract.K8sDaemonSetName: "netpulse-agent",
		contract.CloudZone:        "eu-west-1a",
		contract.CloudRegion:      "eu-west-1",
	}, out.ResourceMetrics().At(0).Resource().Attributes().AsRaw())

	assert.Equal(t, cartAsDestination(map[string]any{contract.DestinationAddress: targetIP4}), dpAttrs(out, 0))
	assert.Equal(t, cartAsDestination(map[string]any{contract.DestinationAddress: targetIP4 + ":8080"}), dpAttrs(out, 1))
	assert.Equal(t, cartAsDestination(map[string]any{contract.DestinationAddress: "[" + targetIP6 + "]:53"}), dpAttrs(out, 2))
	assert.Equal(t, cartAsDestination(map[string]any{contract.DestinationAddress: targetIP6}), dpAttrs(out, 3))
	assert.Equal(t, map[string]any{
		contract.DestinationAddress:           nodeBIP,
		"destination.k8s.node.name":           "node-b",
		"destination.cloud.availability_zone": "eu-west-1b",
		"destination.cloud.region":            "eu-west-1",
		contract.ProbeType:                    contract.ProbeTypeICMP,
	}, dpAttrs(out, 4))
	assert.Equal(t, "node-a", dpAttrs(out, 5)["destination.k8s.node.name"])
	assert.NotContains(t, dpAttrs(out, 5), "destination.k8s.pod.name", "host-network pods share the node's IP")
	assert.Equal(t, map[string]any{contract.DestinationAddress: unknownIP, contract.ProbeType: contract.ProbeTypeICMP}, dpAttrs(out, 6))
	assert.Equal(t, map[string]any{contract.DestinationAddress: "cart.shop.svc.cluster.local", contract.ProbeType: contract.ProbeTypeICMP}, dpAttrs(out, 7))
	assert.Equal(t, "old-batch-abcde", dpAttrs(out, 8)["destination.k8s.pod.name"])
	assert.Equal(t, "old-batch", dpAttrs(out, 8)["destination.k8s.cronjob.name"])
	assert.Equal(t, map[string]any{"other": "attr", contract.ProbeType: contract.ProbeTypeICMP}, dpAttrs(out, 9))
	assert.Equal(t, "db", dpAttrs(out, 10)["destination.k8s.statefulset.name"])
	assert.NotContains(t, dpAttrs(out, 10), "destination.k8s.deployment.name")
}

func TestNeverOverwrites(t *testing.T) {
	p := newTestProcessor(t, createDefaultConfig(), testIndex(t))
	md := probeMetrics(
		// The receiver knows its own pod; only what is missing is added.
		map[string]any{contract.K8sPodIP: agentIP, contract.K8sNamespaceName: "netpulse", contract.CloudZone: "custom-zone"},
		// A pre-set value for the same pod stays.
		map[string]any{contract.DestinationAddress: targetIP4, "destination.cloud.region": "custom-region"},
		// The element names another pod already: nothing is added (no mixed identities).
		map[string]any{contract.DestinationAddress: targetIP4, "destination.k8s.pod.name": "someone-else"},
		map[string]any{contract.DestinationAddress: targetIP4, "destination.k8s.node.name": "node-z"},
	)
	out, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	res := out.ResourceMetrics().At(0).Resource().Attributes().AsRaw()
	assert.Equal(t, "custom-zone", res[contract.CloudZone])
	assert.Equal(t, "netpulse-agent-x7k2p", res[contract.K8sPodName])
	assert.Equal(t, cartAsDestination(map[string]any{contract.DestinationAddress: targetIP4, "destination.cloud.region": "custom-region"}), dpAttrs(out, 0))
	assert.Equal(t, map[string]any{contract.DestinationAddress: targetIP4, "destination.k8s.pod.name": "someone-else", contract.ProbeType: contract.ProbeTypeICMP}, dpAttrs(out, 1))
	assert.Equal(t, map[string]any{contract.DestinationAddress: targetIP4, "destination.k8s.node.name": "node-z", contract.ProbeType: contract.ProbeTypeICMP}, dpAttrs(out, 2))
}

func TestNonStringAddressIsLeftAlone(t *testing.T) {
	p := newTestProcessor(t, createDefaultConfig(), testIndex(t))
	md := probeMetrics(map[string]any{contract.K8sPodIP: int64(42)}, map[string]any{contract.DestinationAddress: []any{targetIP4}})
	want := pmetric.NewMetrics()
	md.CopyTo(want)
	out, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	assert.Equal(t, want, out)
}

func TestAllMetricTypes(t *testing.T) {
	p := newTestProcessor(t, createDefaultConfig(), testIndex(t))
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	ms.AppendEmpty().SetEmptySum().DataPoints().AppendEmpty().Attributes().PutStr(contract.DestinationAddress, targetIP4)
	ms.AppendEmpty().SetEmptyHistogram().DataPoints().AppendEmpty().Attributes().PutStr(contract.DestinationAddress, targetIP4)
	ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints().AppendEmpty().Attributes().PutStr(contract.DestinationAddress, targetIP4)
	ms.AppendEmpty().SetEmptySummary().DataPoints().AppendEmpty().Attributes().PutStr(contract.DestinationAddress, targetIP4)
	ms.AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty().Attributes().PutStr(contract.DestinationAddress, targetIP4)
	ms.AppendEmpty() // an empty metric
	out, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	got := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	attrsOf := []func(pmetric.Metric) pcommon.Map{
		func(m pmetric.Metric) pcommon.Map { return m.Sum().DataPoints().At(0).Attributes() },
		func(m pmetric.Metric) pcommon.Map { return m.Histogram().DataPoints().At(0).Attributes() },
		func(m pmetric.Metric) pcommon.Map { return m.ExponentialHistogram().DataPoints().At(0).Attributes() },
		func(m pmetric.Metric) pcommon.Map { return m.Summary().DataPoints().At(0).Attributes() },
		func(m pmetric.Metric) pcommon.Map { return m.Gauge().DataPoints().At(0).Attributes() },
	}
	for i, f := range attrsOf {
		v, ok := f(got.At(i)).Get("destination.k8s.pod.name")
		require.True(t, ok, "metric %d (%s)", i, got.At(i).Type())
		assert.Equal(t, "cart-7d9f8b6c5d-q4w9z", v.Str())
	}
}

func TestTracesPeerKeys(t *testing.T) {
	p := newTestProcessor(t, createDefaultConfig(), testIndex(t))
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(contract.K8sPodIP, agentIP)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	client := spans.AppendEmpty()
	client.Attributes().PutStr("server.address", targetIP4)
	client.Attributes().PutStr("network.peer.address", targetIP4)
	server := spans.AppendEmpty()
	server.Attributes().PutStr("client.address", "["+targetIP6+"]:50123")
	probe := spans.AppendEmpty()
	probe.Attributes().PutStr(contract.DestinationAddress, statefulIP+":5432")
	plain := spans.AppendEmpty()
	plain.Attributes().PutStr("server.address", "api.example.com")

	out, err := p.processTraces(context.Background(), td)
	require.NoError(t, err)
	assert.Equal(t, "netpulse-agent-x7k2p", out.ResourceSpans().At(0).Resource().Attributes().AsRaw()[contract.K8sPodName])
	got := out.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	c := got.At(0).Attributes().AsRaw()
	assert.Equal(t, "cart-7d9f8b6c5d-q4w9z", c["server.k8s.pod.name"])
	assert.Equal(t, "cart-7d9f8b6c5d-q4w9z", c["network.peer.k8s.pod.name"])
	assert.Equal(t, "eu-west-1b", c["server.cloud.availability_zone"])
	assert.Equal(t, "cart", got.At(1).Attributes().AsRaw()["client.k8s.deployment.name"])
	assert.Equal(t, "db-0", got.At(2).Attributes().AsRaw()["destination.k8s.pod.name"])
	assert.Equal(t, map[string]any{"server.address": "api.example.com"}, got.At(3).Attributes().AsRaw())
}

func TestLogs(t *testing.T) {
	p := newTestProcessor(t, createDefaultConfig(), testIndex(t))
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(contract.K8sPodIP, agentIP)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Attributes().PutStr(contract.DestinationAddress, targetIP4)
	lr.Body().SetStr("probe failed")
	out, err := p.processLogs(context.Background(), ld)
	require.NoError(t, err)
	assert.Equal(t, "node-a", out.ResourceLogs().At(0).Resource().Attributes().AsRaw()[contract.K8sNodeName])
	assert.Equal(t, "shop", out.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().AsRaw()["destination.k8s.namespace.name"])
}

func TestAttributeSubsetAndLabels(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Attributes = []string{AttrPodName, AttrNamespace}
	cfg.PodLabels = []string{"app", "team"}
	p := newTestProcessor(t, cfg, testIndex(t, "app", "team"))
	out, err := p.processMetrics(context.Background(), probeMetrics(map[string]any{}, labelledAppIP, nodeAIP))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		contract.DestinationAddress:      labelledAppIP,
		contract.ProbeType:               contract.ProbeTypeICMP,
		"destination.k8s.pod.name":       "web-1",
		"destination.k8s.namespace.name": "shop",
		"destination.k8s.pod.label.app":  "web",
	}, dpAttrs(out, 0), "labels the pod lacks are not written")
	assert.Equal(t, map[string]any{contract.DestinationAddress: nodeAIP, contract.ProbeType: contract.ProbeTypeICMP}, dpAttrs(out, 1),
		"a node has none of the selected attributes")
}

func TestCustomRule(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Rules = []RuleConfig{{From: SourceDataPoint, Attribute: "peer", Prefix: "peer."}}
	p := newTestProcessor(t, cfg, testIndex(t))
	out, err := p.processMetrics(context.Background(), probeMetrics(map[string]any{contract.K8sPodIP: agentIP}, map[string]any{"peer": statefulIP}))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{contract.K8sPodIP: agentIP}, out.ResourceMetrics().At(0).Resource().Attributes().AsRaw(), "no resource rule configured")
	assert.Equal(t, "db-0", dpAttrs(out, 0)["peer.k8s.pod.name"])
}

func TestNotStartedPassesThrough(t *testing.T) {
	p, err := newProcessor(processortest.NewNopSettings(metadata.Type), createDefaultConfig())
	require.NoError(t, err)
	md := probeMetrics(map[string]any{contract.K8sPodIP: agentIP}, targetIP4)
	want := pmetric.NewMetrics()
	md.CopyTo(want)
	out, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	assert.Equal(t, want, out)
	// Shutdown without Start, twice.
	require.NoError(t, p.stop(context.Background()))
	require.NoError(t, p.stop(context.Background()))
	// Start after Shutdown does nothing.
	require.NoError(t, p.start(context.Background(), componenttest.NewNopHost()))
	assert.Nil(t, p.handle.Load())
}

func TestShutdownTwiceAfterStart(t *testing.T) {
	p, err := newProcessor(processortest.NewNopSettings(metadata.Type), createDefaultConfig())
	require.NoError(t, err)
	p.acquire = func() (*k8sindex.Handle, error) { return k8sindex.StaticHandle(testIndex(t)), nil }
	require.NoError(t, p.start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.stop(context.Background()))
	require.NoError(t, p.stop(context.Background()))
}

func TestInternalTelemetry(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	p := startTestProcessor(t, createDefaultConfig(), testIndex(t), metadatatest.NewSettings(tt))
	md := probeMetrics(map[string]any{contract.K8sPodIP: agentIP},
		targetIP4, targetIP4, nodeBIP, deletedIP, unknownIP, "host.example",
		map[string]any{contract.DestinationAddress: targetIP4, "destination.k8s.pod.name": "other"})
	_, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)

	set := func(kv ...string) attribute.Set {
		attrs := []attribute.KeyValue{attribute.String("otelcol.signal", "metrics")}
		for i := 0; i < len(kv); i += 2 {
			attrs = append(attrs, attribute.String(kv[i], kv[i+1]))
		}
		return attribute.NewSet(attrs...)
	}
	metadatatest.AssertEqualK8sNetAttributesAddressesEnriched(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: set("source", "resource", "kind", "pod"), Value: 1},
		{Attributes: set("source", "datapoint", "kind", "pod"), Value: 2},
		{Attributes: set("source", "datapoint", "kind", "node"), Value: 1},
		{Attributes: set("source", "datapoint", "kind", "deleted_pod"), Value: 1},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualK8sNetAttributesAddressesUnresolved(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: set("source", "datapoint", "reason", "not_found"), Value: 1},
		{Attributes: set("source", "datapoint", "reason", "not_an_ip"), Value: 1},
		{Attributes: set("source", "datapoint", "reason", "conflict"), Value: 1},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualK8sNetAttributesIndexPods(t, tt, []metricdata.DataPoint[int64]{{Value: 4}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualK8sNetAttributesIndexNodes(t, tt, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}

func TestConcurrentBatches(t *testing.T) {
	ix := testIndex(t)
	p := newTestProcessor(t, createDefaultConfig(), ix)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			r := &k8sindex.PodRecord{UID: "uid-churn", Name: "churn", Namespace: "x", IPs: addrs("10.64.9.9"), Phase: k8sindex.PhaseRunning}
			ix.UpsertPod(r)
			ix.DeletePod("uid-churn")
		}
	}()
	for i := 0; i < 200; i++ {
		out, err := p.processMetrics(context.Background(), probeMetrics(map[string]any{contract.K8sPodIP: agentIP}, targetIP4, "10.64.9.9"))
		require.NoError(t, err)
		require.Equal(t, "cart-7d9f8b6c5d-q4w9z", dpAttrs(out, 0)["destination.k8s.pod.name"])
	}
	<-done
}

func benchSettings() processor.Settings { return processortest.NewNopSettings(metadata.Type) }

// A destination pod that is terminating or was deleted is marked leaving (the gateway's
// node judgement does not blame its node for a pod going away); only the index decides:
// whatever a sender put under that key is removed.
func TestLeavingDestinationPods(t *testing.T) {
	ix := testIndex(t)
	ix.UpsertPod(&k8sindex.PodRecord{UID: "uid-draining", Name: "cart-draining", Namespace: "shop", NodeName: "node-b",
		IPs: addrs("10.64.1.77"), Phase: k8sindex.PhaseRunning, Terminating: true})
	p := newTestProcessor(t, createDefaultConfig(), ix)
	forged := func(addr string) map[string]any {
		return map[string]any{contract.DestinationAddress: addr, contract.DestinationPodLeaving: true}
	}
	md := probeMetrics(
		map[string]any{contract.K8sPodIP: agentIP},
		"10.64.1.77",         // 0: terminating
		deletedIP,            // 1: deleted, within grace
		targetIP4,            // 2: live
		forged(targetIP4),    // 3: live, the sender claims it leaves
		forged(unknownIP),    // 4: unknown, the sender claims it leaves
		forged("10.64.1.77"), // 5: terminating, the sender says so too
		map[string]any{contract.DestinationPodLeaving: true}, // 6: no address at all
	)
	out, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	assert.Equal(t, true, dpAttrs(out, 0)[contract.DestinationPodLeaving])
	assert.Equal(t, true, dpAttrs(out, 1)[contract.DestinationPodLeaving])
	for _, i := range []int{2, 3, 4, 6} {
		assert.NotContains(t, dpAttrs(out, i), contract.DestinationPodLeaving, "data point %d", i)
	}
	assert.Equal(t, true, dpAttrs(out, 5)[contract.DestinationPodLeaving])
}

// A destination the cluster reports as going away or down carries the disruption that
// explains failures towards it (the gateway blames no network for them), in precedence
// order; only the index decides: a sender's value is removed.
func TestDestinationDisruptions(t *testing.T) {
	ix := testIndex(t)
	ix.UpsertNode(&k8sindex.NodeRecord{Name: "node-cordoned", Cordoned: true, IPs: addrs("10.0.9.1")})
	ix.UpsertNode(&k8sindex.NodeRecord{Name: "node-down", NotReady: true, Cordoned: true, IPs: addrs("10.0.9.2")})
	for _, r := range []*k8sindex.PodRecord{
		{UID: "uid-t", Name: "leaving", Namespace: "shop", NodeName: "node-down", IPs: addrs("10.64.7.1"), Phase: k8sindex.PhaseRunning, Terminating: true},
		{UID: "uid-d", Name: "on-down", Namespace: "shop", NodeName: "node-down", IPs: addrs("10.64.7.2"), Phase: k8sindex.PhaseRunning, Ready: true},
		{UID: "uid-c", Name: "on-cordoned", Namespace: "shop", NodeName: "node-cordoned", IPs: addrs("10.64.7.3"), Phase: k8sindex.PhaseRunning, Ready: true},
		{UID: "uid-p", Name: "pending", Namespace: "shop", NodeName: "node-b", IPs: addrs("10.64.7.4"), Phase: k8sindex.PhasePending},
		{UID: "uid-n", Name: "not-ready", Namespace: "shop", NodeName: "node-b", IPs: addrs("10.64.7.5"), Phase: k8sindex.PhaseRunning},
	} {
		ix.UpsertPod(r)
	}
	p := newTestProcessor(t, createDefaultConfig(), ix)
	forged := func(addr string) map[string]any {
		return map[string]any{contract.DestinationAddress: addr, contract.DestinationDisruption: contract.DisruptionNodeDraining}
	}
	md := probeMetrics(map[string]any{contract.K8sPodIP: agentIP},
		"10.64.7.1", "10.64.7.2", "10.64.7.3", "10.64.7.4", "10.0.9.1", "10.0.9.2",
		"10.64.7.5",       // 6: Running, not Ready: not excused (the readiness gate's own pods)
		forged(targetIP4), // 7: live and healthy, the sender claims a drain
		forged(unknownIP), // 8: unknown
	)
	out, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	for i, want := range []string{
		contract.DisruptionPodTerminating, contract.DisruptionNodeNotReady, contract.DisruptionNodeDraining,
		contract.DisruptionNotReady, contract.DisruptionNodeDraining, contract.DisruptionNodeNotReady,
	} {
		assert.Equal(t, want, dpAttrs(out, i)[contract.DestinationDisruption], "data point %d", i)
	}
	for _, i := range []int{6, 7, 8} {
		assert.NotContains(t, dpAttrs(out, i), contract.DestinationDisruption, "data point %d", i)
	}
}
