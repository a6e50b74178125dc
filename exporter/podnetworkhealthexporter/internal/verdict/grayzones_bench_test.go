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

// What the zone pairs' loss judgement costs: an hour of a healthy cluster of 1,000 nodes
// (as BenchmarkGrayState) without zone labels, in 3 zones and in 30, with the engine's heap
// and time. Run: go test -run '^$' -bench BenchmarkGrayZones -benchtime 1x
// ./exporter/podnetworkhealthexporter/internal/verdict/
func BenchmarkGrayZones(b *testing.B) {
	for _, zones := range []int{0, 3, 30} {
		b.Run(fmt.Sprintf("nodes=1000/zones=%d", zones), func(b *testing.B) {
			for range b.N {
				heap, took := grayZonesHour(1000, zones)
				b.ReportMetric(float64(heap)/1000, "heap-B/node")
				b.ReportMetric(took.Seconds(), "s/hour")
			}
		})
	}
}

// grayZonesHour is grayHour with node i in zone i mod zones (no zone when zones is 0).
func grayZonesHour(n, zones int) (heap uint64, took time.Duration) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e := New(Config{})
	srcs, tgts := make([]observation.Source, n), make([]observation.Target, n)
	for i := range n {
		srcs[i] = observation.Source{Namespace: "netpulse", Name: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-%d", i), Node: fmt.Sprintf("node-%d", i)}
		tgts[i] = observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-%d", i),
			Node: fmt.Sprintf("node-%d", i), Address: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)}
		if zones > 0 {
			tgts[i].Zone = fmt.Sprintf("zone-%d", i%zones)
		}
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
				o := observation.Observation{Source: srcs[i], Target: tgts[d], ProbeType: "icmp", Timestamp: at, Stable: j == 0, Success: true, Sent: 3}
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
