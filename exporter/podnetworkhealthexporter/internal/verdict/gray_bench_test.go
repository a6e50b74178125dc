// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// What the gray judgement costs at scale: the engine's live heap after an hour of rounds
// of N agents (K+M = 4 targets each, 3 echoes, 10 s rounds) and the time of that hour's
// Observe and Judge, with the judgement and without it (the reference, same run). Run: go test -run '^$' -bench BenchmarkGrayState
// -benchtime 1x ./exporter/podnetworkhealthexporter/internal/verdict/ (hack/bench.d/80-gray.sh).
func BenchmarkGrayState(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, off := range []bool{false, true} {
			name := fmt.Sprintf("nodes=%d/gray=%v", n, !off)
			b.Run(name, func(b *testing.B) {
				for range b.N {
					heap, took := grayHour(n, off)
					b.ReportMetric(float64(heap)/float64(n), "heap-B/node")
					b.ReportMetric(took.Seconds(), "s/hour")
				}
			})
		}
	}
}

// grayHour feeds an engine an hour of a healthy cluster of n nodes (one agent pod each,
// the target of 4 observers a round) and returns the heap it holds and the time it took.
func grayHour(n int, off bool) (heap uint64, took time.Duration) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e := New(Config{Gray: GrayConfig{Off: off}})
	src := func(i int) observation.Source {
		return observation.Source{Namespace: "netpulse", Name: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-%d", i), Node: fmt.Sprintf("node-%d", i)}
	}
	tgt := func(i int) observation.Target {
		return observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-%d", i),
			Node: fmt.Sprintf("node-%d", i), Address: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)}
	}
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	obs := make([]observation.Observation, 0, 4*n)
	for r := range 360 {
		at := t0.Add(time.Duration(r) * 10 * time.Second)
		obs = obs[:0]
		for i := range n {
			for j := range 4 {
				d := (i + 1 + (r*4+j)%(n-1)) % n
				if j == 0 {
					d = (i + 1) % n
				}
				if d == i {
					continue
				}
				o := observation.Observation{Source: src(i), Target: tgt(d), ProbeType: "icmp", Timestamp: at, Stable: j == 0, Success: true, Sent: 3}
				o.RTT = observation.NewHistogram(8)
				o.RTT.Record(0.0002)
				obs = append(obs, o)
			}
		}
		e.Observe(obs, at)
		e.Judge(at.Add(time.Second))
	}
	took = time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(e)
	return after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc), took
}
