// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor

import (
	"context"
	"net/netip"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/k8sindex"
	"github.com/netpulse/netpulse/internal/k8sindex/k8sindextest"
)

// benchSpec is the benchmark cluster: 10,000 pods on 1,000 nodes.
var benchSpec = k8sindextest.Spec{Nodes: 1000, Pods: 10_000, Namespaces: 20, DualStackEvery: 10, HostNetworkEvery: 50}

// probeBatch builds what a gateway receives from pod_probe agents: resources resources
// (one per probing pod, k8s.pod.ip on the Resource) each with 5 metrics of
// pointsPerResource/5 data points, one per probed target (destination.address).
func probeBatch(podIPs []netip.Addr, resources, pointsPerResource int) pmetric.Metrics {
	const metricsPerResource = 5
	names := []string{contract.MetricStatus, contract.MetricDuration, contract.MetricPacketsSent, contract.MetricPacketsLost, contract.MetricLossRatio}
	targetsPerResource := pointsPerResource / metricsPerResource
	md := pmetric.NewMetrics()
	for r := 0; r < resources; r++ {
		rm := md.ResourceMetrics().AppendEmpty()
		src := podIPs[(r*7919)%len(podIPs)]
		rm.Resource().Attributes().PutStr(contract.K8sPodIP, src.String())
		rm.Resource().Attributes().PutStr("service.name", "netpulse-agent")
		ms := rm.ScopeMetrics().AppendEmpty()
		ms.Scope().SetName("github.com/netpulse/netpulse/receiver/podprobereceiver")
		for m := 0; m < metricsPerResource; m++ {
			met := ms.Metrics().AppendEmpty()
			met.SetName(names[m])
			g := met.SetEmptyGauge()
			for k := 0; k < targetsPerResource; k++ {
				dst := podIPs[(r*targetsPerResource+k)*104729%len(podIPs)]
				dp := g.DataPoints().AppendEmpty()
				dp.Attributes().PutStr(contract.DestinationAddress, dst.String())
				if dst.Is4() {
					dp.Attributes().PutStr(contract.NetworkType, "ipv4")
				} else {
					dp.Attributes().PutStr(contract.NetworkType, "ipv6")
				}
				dp.Attributes().PutStr(contract.ProbeType, contract.ProbeTypeICMP)
				dp.SetDoubleValue(0.0012)
			}
		}
	}
	return md
}

func staticBenchIndex(b *testing.B) (*k8sindex.Index, []netip.Addr) {
	ix := k8sindex.New(k8sindex.Config{})
	var ips []netip.Addr
	for p := range k8sindextest.PodsOf(benchSpec) {
		r := k8sindex.PodRecordFromPod(p, nil)
		ix.UpsertPod(&r)
		if r.OwnsIPs() {
			ips = append(ips, r.IPs[0])
		}
	}
	for n := range k8sindextest.NodesOf(benchSpec) {
		r := k8sindex.NodeRecordFromNode(n)
		ix.UpsertNode(&r)
	}
	return ix, ips
}

// BenchmarkProcessMetrics is the processor alone on a static index (no API server): one
// op is one batch of 100 resources x 100 data points.
func BenchmarkProcessMetrics(b *testing.B) {
	ix, ips := staticBenchIndex(b)
	p := newTestProcessorB(b, createDefaultConfig(), ix)
	batch := probeBatch(ips, 100, 100)
	const pool = 16
	copies := make([]pmetric.Metrics, pool)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if i%pool == 0 {
			b.StopTimer()
			for j := range copies {
				copies[j] = pmetric.NewMetrics()
				batch.CopyTo(copies[j])
			}
			b.StartTimer()
		}
		if _, err := p.processMetrics(context.Background(), copies[i%pool]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*batch.DataPointCount()), "ns/datapoint")
}

func newTestProcessorB(b *testing.B, cfg *Config, ix *k8sindex.Index) *netAttributesProcessor {
	p, err := newProcessor(benchSettings(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	p.acquire = func() (*k8sindex.Handle, error) { return k8sindex.StaticHandle(ix), nil }
	if err := p.start(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.stop(context.Background()) })
	return p
}

// BenchmarkWriteFloor is the pdata write floor on the same batch: 7 PutStr per data
// point, no parsing, no lookup.
func BenchmarkWriteFloor(b *testing.B) {
	_, ips := staticBenchIndex(b)
	batch := probeBatch(ips, 100, 100)
	const pool = 16
	copies := make([]pmetric.Metrics, pool)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if i%pool == 0 {
			b.StopTimer()
			for j := range copies {
				copies[j] = pmetric.NewMetrics()
				batch.CopyTo(copies[j])
			}
			b.StartTimer()
		}
		_ = writeFloor{}.ConsumeMetrics(context.Background(), copies[i%pool])
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*batch.DataPointCount()), "ns/datapoint")
}
