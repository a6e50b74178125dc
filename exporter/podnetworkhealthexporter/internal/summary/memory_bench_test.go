// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package summary

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/netpulse/netpulse/internal/contract"
)

// TestDecoderMemoryBench (make bench, NETPULSE_BENCH=1): the decoder's retained memory per
// source at the admission's limit - 16 stable targets, each with its sent, lost, duration
// and two error streams - for 1,000 sources, against one source whose 20,000 invented
// stable targets reach it without admission (the flood). This measures the
// per-source memory ceiling docs/security.md states.
func TestDecoderMemoryBench(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") == "" {
		t.Skip("a benchmark: make bench (NETPULSE_BENCH=1)")
	}
	retained := func(sources, targets int) uint64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d := NewDecoder(DecoderConfig{FirstSightMaxAge: time.Minute, MaxPerRound: 10, MinRoundInterval: time.Second})
		for s := range sources {
			a := newFakeAgent()
			a.res[contract.K8sPodUID] = fmt.Sprintf("uid-%d", s)
			a.res[contract.K8sPodName] = fmt.Sprintf("agent-%d", s)
			for round := range 2 {
				now := t0.Add(time.Duration(round) * time.Second)
				var probes []probe
				for i := range targets {
					p := probe{addr: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), typ: "icmp", kind: "pod", stable: true, sent: 3, lost: 1,
						rtts: []float64{1e-3, 2e-3}, success: round == 0, errType: []string{"timeout", "unreachable"}[round]}
					probes = append(probes, p)
				}
				d.Decode(a.round(now, probes...), now)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(d)
		return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
	}
	perSource := retained(1000, 16)
	flood := retained(1, 20000)
	fmt.Printf("BENCH decoder_heap_bytes_1000_sources_at_limit ours=%d reference=%d ratio=%.2f\n", perSource, flood, float64(flood)/float64(perSource))
	fmt.Printf("BENCH decoder_heap_bytes_per_source_at_limit ours=%d reference=%d ratio=%.0f\n", perSource/1000, flood, float64(flood)/float64(perSource/1000))
}
