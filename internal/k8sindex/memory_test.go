// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8sindex

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/k8sindex/k8sindextest"
)

// HeapBudgetPerPod is the memory bar: heap bytes per cached pod.
const HeapBudgetPerPod = 300

// heavy reports whether the opt-in heavy measurements run: NETPULSE_BENCH=1 or -bench.
func heavy() bool {
	if os.Getenv("NETPULSE_BENCH") == "1" {
		return true
	}
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// measureHeapPerPod feeds a generated cluster of pods pods (10 per node) through the
// watcher's store exactly as an initial watch-list sync does: each decoded *corev1.Pod goes
// through the store's transform (the object is dropped right away), then the records
// replace the store's content. Nodes are loaded too; the figure is the index's whole heap
// divided by the number of cached pods.
func measureHeapPerPod(t testing.TB, pods int) (perPod float64, st Stats) {
	spec := k8sindextest.Spec{Nodes: max(pods/10, 1), Pods: pods, Namespaces: 50, DualStackEvery: 10, HostNetworkEvery: 50}
	before := heapInUse()
	ix := New(Config{DeletedPodGrace: 0})
	ps := &podStore{ix: ix, synced: make(chan struct{})}
	ns := &nodeStore{ix: ix, synced: make(chan struct{})}
	var nodes []any
	for n := range k8sindextest.NodesOf(spec) {
		r, _ := ns.Transformer()(n)
		nodes = append(nodes, r)
	}
	require.NoError(t, ns.Replace(nodes, "1"))
	nodes = nil
	records := make([]any, 0, pods)
	for p := range k8sindextest.PodsOf(spec) {
		r, _ := ps.Transformer()(p)
		records = append(records, r)
	}
	require.NoError(t, ps.Replace(records, "1"))
	records = nil
	after := heapInUse()
	st = ix.Stats()
	runtime.KeepAlive(ix)
	// Per cached pod: host-network pods (every 50th here) own no IP and are not kept, but
	// their share of the heap (none) is charged to the others.
	return float64(after-before) / float64(st.Pods), st
}

func TestHeapPerPod(t *testing.T) {
	sizes := []int{10_000}
	if heavy() {
		sizes = append(sizes, 50_000)
	}
	for _, n := range sizes {
		perPod, st := measureHeapPerPod(t, n)
		t.Logf("%d pods (%d cached, %d IPs, %d nodes, %d workloads): %.0f B heap per cached pod", n, st.Pods, st.PodIPs, st.Nodes, st.Workloads, perPod)
		require.LessOrEqualf(t, perPod, float64(HeapBudgetPerPod), "heap per cached pod at %d pods", n)
		if heavy() {
			fmt.Printf("BENCH heap_per_pod_%dk_generated ours=%.0fB reference=%dB ratio=%.2f\n", n/1000, perPod, HeapBudgetPerPod, perPod/HeapBudgetPerPod)
			if n == 50_000 {
				fmt.Printf("BENCH heap_150k_pods_extrapolated_from_50k ours=%.1fMB reference=%.1fMB ratio=%.2f\n",
					perPod*150_000/1e6, float64(HeapBudgetPerPod)*150_000/1e6, perPod/HeapBudgetPerPod)
			}
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	ix := New(Config{})
	spec := k8sindextest.Spec{Nodes: 1000, Pods: 10_000, Namespaces: 20, DualStackEvery: 10}
	var addrs []netip.Addr
	for p := range k8sindextest.PodsOf(spec) {
		r := PodRecordFromPod(p, nil)
		ix.UpsertPod(&r)
		addrs = append(addrs, r.IPs...)
	}
	for n := range k8sindextest.NodesOf(spec) {
		r := NodeRecordFromNode(n)
		ix.UpsertNode(&r)
	}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	b.Run("locked", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok := ix.Lookup(addrs[i%len(addrs)]); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
	b.Run("reader", func(b *testing.B) {
		var id Identity
		ix.Read(func(r *Reader) {
			i := 0
			for b.Loop() {
				if !r.LookupInto(addrs[i%len(addrs)], &id) {
					b.Fatal("miss")
				}
				i++
			}
		})
	})
}
