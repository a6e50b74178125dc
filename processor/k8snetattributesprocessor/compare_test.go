// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/k8sattributesprocessor"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/k8sindex/k8sindextest"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/metadata"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// heapBudgetPerPod is the memory bar: heap bytes per cached pod.
const heapBudgetPerPod = 300

// heavy reports whether the opt-in heavy comparison runs: NETPULSE_BENCH=1 or -bench.
func heavy() bool {
	if os.Getenv("NETPULSE_BENCH") == "1" {
		return true
	}
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// k8sAttributesReference is contrib's k8s_attributes v0.159.0, configured for the same
// identity on the Resource (pod name, UID, namespace, node, workload names, node zone and
// region labels), associating the pod by the Resource's k8s.pod.ip, with a kubeconfig.
func k8sAttributesReference(t *testing.T, kubeconfig string) processor.Metrics {
	t.Setenv("KUBECONFIG", kubeconfig)
	f := k8sattributesprocessor.NewFactory()
	cfg := f.CreateDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{
		"auth_type":                 "kubeConfig",
		"wait_for_metadata":         true,
		"wait_for_metadata_timeout": "5m",
		"extract": map[string]any{
			"metadata": []any{"k8s.pod.name", "k8s.pod.uid", "k8s.namespace.name", "k8s.node.name",
				"k8s.deployment.name", "k8s.statefulset.name", "k8s.daemonset.name", "k8s.job.name", "k8s.cronjob.name"},
			"labels": []any{
				map[string]any{"tag_name": contract.CloudZone, "key": "topology.kubernetes.io/zone", "from": "node"},
				map[string]any{"tag_name": contract.CloudRegion, "key": "topology.kubernetes.io/region", "from": "node"},
			},
		},
		"pod_association": []any{map[string]any{"sources": []any{map[string]any{"from": "resource_attribute", "name": contract.K8sPodIP}}}},
	}).Unmarshal(cfg))
	p, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(component.MustNewType("k8s_attributes")), cfg, consumertest.NewNop())
	require.NoError(t, err)
	return p
}

// writeFloor is the least any per-data-point enrichment costs with the public pdata API:
// the same 7 attribute writes per data point as ours, with no parsing and no lookup.
type writeFloor struct{}

func (writeFloor) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	keys := [...]string{"destination.k8s.pod.name", "destination.k8s.namespace.name", "destination.k8s.pod.uid",
		"destination.k8s.node.name", "destination.k8s.deployment.name", "destination.cloud.availability_zone", "destination.cloud.region"}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			dps := ms.At(j).Gauge().DataPoints()
			for k := 0; k < dps.Len(); k++ {
				a := dps.At(k).Attributes()
				a.EnsureCapacity(a.Len() + len(keys))
				for _, key := range keys {
					a.PutStr(key, "value-of-some-length")
				}
			}
		}
	}
	return nil
}

type metricsConsumer interface {
	ConsumeMetrics(context.Context, pmetric.Metrics) error
}

// TestBenchmarkAgainstK8sAttributes is the opt-in heavy benchmark (see docs/processor.md):
// NETPULSE_BENCH=1 go test -run TestBenchmarkAgainstK8sAttributes -v -timeout 30m ./processor/k8snetattributesprocessor/
func TestBenchmarkAgainstK8sAttributes(t *testing.T) {
	if !heavy() {
		t.Skip("opt-in heavy benchmark: set NETPULSE_BENCH=1 (or run with -bench); loads 10,000 pods on 1,000 nodes into the local control plane")
	}
	ctx := context.Background()
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	cl := k8sindextest.Generate(benchSpec)
	began := time.Now()
	require.NoError(t, cl.Load(ctx, cp.Config, k8sindextest.LoadOptions{Workers: 48, Progress: func(done, total int) {
		if done%2000 == 0 {
			t.Logf("loaded %d/%d objects in %v", done, total, time.Since(began).Round(time.Second))
		}
	}}))
	t.Logf("loaded %d nodes and %d pods in %v", len(cl.Nodes), len(cl.Pods), time.Since(began).Round(time.Second))
	ips := cl.PodIPs()
	cl = nil // the generated objects are not part of either processor's footprint

	// Ours first, alone, to measure its heap from a real watch.
	counter := k8sindextest.NewRequestCounter()
	restConfigHook = counter.Wrap
	t.Cleanup(func() { restConfigHook = nil })
	cfg := createDefaultConfig()
	cfg.AuthType, cfg.Kubeconfig = kubeclient.AuthKubeConfig, cp.Kubeconfig
	cfg.WaitForSync, cfg.WaitForSyncTimeout = true, 5*time.Minute
	heapBefore := liveHeap()
	ours, err := NewFactory().CreateMetrics(ctx, processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	began = time.Now()
	require.NoError(t, ours.Start(ctx, componenttest.NewNopHost()))
	oursSync := time.Since(began)
	t.Cleanup(func() { require.NoError(t, ours.Shutdown(ctx)) })
	heapAfter := liveHeap()
	probe, err := newProcessor(processortest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	h, err := registry.Acquire(probe.key, probe.restConfig, nil)
	require.NoError(t, err)
	st := h.Index().Stats()
	h.Release()
	perPod := float64(heapAfter-heapBefore) / float64(st.Pods)
	t.Logf("ours: synced in %v; index %+v; heap %d B for %d pods (%d cached) = %.0f B per cached pod (index, watcher and client included)",
		oursSync, st, heapAfter-heapBefore, benchSpec.Pods, st.Pods, perPod)
	require.Equal(t, benchSpec.Pods-benchSpec.Pods/benchSpec.HostNetworkEvery, st.Pods, "every pod that owns an IP is indexed")
	require.Equal(t, benchSpec.Nodes, st.Nodes)
	syncLists, syncWatchLists := counter.Count("pods", k8sindextest.KindList), counter.Count("pods", k8sindextest.KindWatchList)

	// The reference.
	ref := k8sAttributesReference(t, cp.Kubeconfig)
	began = time.Now()
	require.NoError(t, ref.Start(ctx, componenttest.NewNopHost()))
	t.Logf("k8s_attributes: synced in %v", time.Since(began))
	t.Cleanup(func() { require.NoError(t, ref.Shutdown(ctx)) })

	batch := probeBatch(ips, 100, 100)
	points := batch.DataPointCount()

	// Both enrich what they should.
	check := pmetric.NewMetrics()
	batch.CopyTo(check)
	require.NoError(t, ref.ConsumeMetrics(ctx, check))
	refRes := check.ResourceMetrics().At(0).Resource().Attributes().AsRaw()
	require.NotEmpty(t, refRes[contract.K8sPodName], "k8s_attributes enriched the Resource: %v", refRes)
	require.NotEmpty(t, refRes[contract.CloudZone], "k8s_attributes enriched the Resource: %v", refRes)
	check = pmetric.NewMetrics()
	batch.CopyTo(check)
	require.NoError(t, ours.ConsumeMetrics(ctx, check))
	ourRes := check.ResourceMetrics().At(0).Resource().Attributes().AsRaw()
	for _, k := range []string{contract.K8sPodName, contract.K8sPodUID, contract.K8sNamespaceName, contract.K8sNodeName, contract.CloudZone} {
		require.Equal(t, refRes[k], ourRes[k], "same source identity as the reference for %s", k)
	}
	enriched := 0
	for i := 0; i < check.ResourceMetrics().Len(); i++ {
		ms := check.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			dps := ms.At(j).Gauge().DataPoints()
			for k := 0; k < dps.Len(); k++ {
				if _, ok := dps.At(k).Attributes().Get("destination.k8s.pod.name"); ok {
					enriched++
				}
			}
		}
	}
	require.Equal(t, points, enriched, "every data point's destination is enriched")

	minimalCfg := *cfg
	minimalCfg.Attributes = []string{AttrPodName, AttrNamespace}
	minimal, err := NewFactory().CreateMetrics(ctx, processortest.NewNopSettings(metadata.Type), &minimalCfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, minimal.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, minimal.Shutdown(ctx)) })

	// Interleaved rounds on pre-made copies of the same batch; process CPU time (all
	// threads, GC included) per round; the median round counts.
	contenders := []struct {
		name string
		c    metricsConsumer
	}{{"ours", ours}, {"reference", ref}, {"floor", writeFloor{}}, {"minimal", minimal}}
	const rounds, perRound = 9, 10
	rates := map[string][]float64{}
	copies := make([]pmetric.Metrics, perRound)
	for r := 0; r < rounds; r++ {
		for _, c := range contenders {
			for i := range copies {
				copies[i] = pmetric.NewMetrics()
				batch.CopyTo(copies[i])
			}
			runtime.GC()
			cpu0 := processCPU()
			for i := range copies {
				require.NoError(t, c.c.ConsumeMetrics(ctx, copies[i]))
			}
			cpu := processCPU() - cpu0
			rates[c.name] = append(rates[c.name], float64(perRound*points)/cpu.Seconds())
		}
	}
	median := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, c := range contenders {
		t.Logf("%-9s data points per CPU-second by round: %.0f", c.name, rates[c.name])
	}
	oursRate, refRate := median(rates["ours"]), median(rates["reference"])

	// API load during the run: nothing but the initial sync and the watches.
	require.NoError(t, counter.CheckOneInitialSync("pods"))
	require.NoError(t, counter.CheckOneInitialSync("nodes"))
	require.Equal(t, syncLists, counter.Count("pods", k8sindextest.KindList), "no relist during the run")
	require.Equal(t, syncWatchLists, counter.Count("pods", k8sindextest.KindWatchList), "no relist during the run")
	t.Logf("API requests of the process's k8s_net_attributes index (3 processors): %s", counter)

	fmt.Printf("BENCH k8s_net_attributes_dp_per_core_s ours=%.0fdp/s reference=%.0fdp/s ratio=%.2f\n", oursRate, refRate, oursRate/refRate)
	// Per address resolved and written: ours resolves the source on each Resource and the
	// destination on every data point (101 addresses per 100 points here); the reference
	// resolves one address per Resource.
	oursAddrs := oursRate * float64(points+batch.ResourceMetrics().Len()) / float64(points)
	refAddrs := refRate * float64(batch.ResourceMetrics().Len()) / float64(points)
	fmt.Printf("BENCH k8s_net_attributes_enrichments_per_core_s ours=%.0faddr/s reference=%.0faddr/s ratio=%.2f\n", oursAddrs, refAddrs, oursAddrs/refAddrs)
	fmt.Printf("BENCH k8s_net_attributes_minimal_attrs_dp_per_core_s ours=%.0fdp/s reference=%.0fdp/s ratio=%.2f\n", median(rates["minimal"]), refRate, median(rates["minimal"])/refRate)
	fmt.Printf("BENCH pdata_7_attr_write_floor_dp_per_core_s ours=%.0fdp/s reference=%.0fdp/s ratio=%.2f\n", median(rates["floor"]), refRate, median(rates["floor"])/refRate)
	fmt.Printf("BENCH heap_per_pod_10k_apiserver ours=%.0fB reference=%dB ratio=%.2f\n", perPod, heapBudgetPerPod, perPod/heapBudgetPerPod)
	fmt.Printf("BENCH heap_150k_pods_extrapolated_from_10k ours=%.1fMB reference=%.1fMB ratio=%.2f\n", perPod*150_000/1e6, float64(heapBudgetPerPod)*150_000/1e6, perPod/heapBudgetPerPod)
	fmt.Printf("BENCH api_initial_list_requests_per_resource ours=%dreq reference=1req ratio=%.2f\n", syncLists, float64(syncLists))
	require.LessOrEqual(t, perPod, float64(heapBudgetPerPod), "heap per cached pod")
}
