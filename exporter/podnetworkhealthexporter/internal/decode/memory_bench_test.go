// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"go.opentelemetry.io/collector/pdata/pmetric"

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
		// The reference flood reaches a decoder without the per-source stream bound (as
		// before it had one); the sources at the limit fit within it anyway.
		d := NewDecoder(DecoderConfig{FirstSightMaxAge: time.Minute, MaxPerRound: 10, MinRoundInterval: time.Second, StableTargetsPerSource: -1})
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

// TestDecoderMemoryBenchHostile (make bench, NETPULSE_BENCH=1): the decoder's retained
// memory for one source sending the item-2 input - 10 requests of 5,000 cumulative
// pod-target points without a StartTimestamp, each with a fresh destination.port or
// netpulse.target.endpoint - rotating (as the issue sent them) and marked stable (the worst
// case: each would be a stream), against (1) the same input on a decoder without the
// per-source bound and without the rotating rule (the gateway before #28; measured with
// the stable input, which that decoder remembered the same way) and (2) one real source at
// the admission's limit (the per-source figure docs/security.md states).
func TestDecoderMemoryBenchHostile(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") == "" {
		t.Skip("a benchmark: make bench (NETPULSE_BENCH=1)")
	}
	retained := func(cfg DecoderConfig, feed func(d *Decoder)) (uint64, int) {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d := NewDecoder(cfg)
		feed(d)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(d)
		return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc), d.Streams()
	}
	cfg := DecoderConfig{FirstSightMaxAge: time.Minute, MaxPerRound: 10, MinRoundInterval: time.Second, MaxFutureSkew: observation.FutureSkew(time.Second)}
	hostile := func(stable, endpoint bool) func(d *Decoder) {
		return func(d *Decoder) {
			now := t0
			for req := range 10 {
				now = now.Add(time.Second)
				d.Decode(hostileRequest("liar", req, 5000, now, stable, endpoint), now)
			}
		}
	}
	honest := func(d *Decoder) {
		a := newFakeAgent()
		for round := range 2 {
			now := t0.Add(time.Duration(round) * time.Second)
			var probes []probe
			for i := range 16 {
				probes = append(probes, probe{addr: fmt.Sprintf("10.0.0.%d", i+1), typ: "icmp", kind: "pod", stable: true, sent: 3, lost: 1,
					rtts: []float64{1e-3, 2e-3}, success: round == 0, errType: []string{"timeout", "unreachable"}[round]})
			}
			d.Decode(a.round(now, probes...), now)
		}
	}
	var worst uint64
	for _, c := range []struct {
		name             string
		stable, endpoint bool
	}{{"rotating_port", false, false}, {"rotating_endpoint", false, true}, {"stable_port", true, false}, {"stable_endpoint", true, true}} {
		b, streams := retained(cfg, hostile(c.stable, c.endpoint))
		t.Logf("%s: %d bytes, %d streams", c.name, b, streams)
		worst = max(worst, b)
	}
	// The worst a source can do within the bounds: every point also a duration histogram
	// of the most buckets accepted, each with a fresh port.
	b, streams := retained(cfg, func(d *Decoder) {
		now := t0
		for req := range 10 {
			now = now.Add(time.Second)
			md := hostileRequest("liar", req, 5000, now, true, false)
			ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
			m := ms.AppendEmpty()
			m.SetName(contract.MetricDuration)
			eh := m.SetEmptyExponentialHistogram()
			eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			sums := ms.At(0).Sum().DataPoints()
			for i := range sums.Len() {
				h := eh.DataPoints().AppendEmpty()
				sums.At(i).Attributes().CopyTo(h.Attributes())
				h.SetTimestamp(sums.At(i).Timestamp())
				h.SetScale(8)
				h.Positive().SetOffset(-3000)
				for range maxAcceptedBuckets {
					h.Positive().BucketCounts().Append(1)
				}
				h.SetCount(maxAcceptedBuckets)
			}
			d.Decode(md, now)
		}
	})
	t.Logf("stable_port_with_histograms: %d bytes, %d streams", b, streams)
	worst = max(worst, b)
	unbounded := cfg
	unbounded.StableTargetsPerSource = -1
	before, beforeStreams := retained(unbounded, hostile(true, false))
	real, realStreams := retained(cfg, honest)
	t.Logf("before the bound: %d bytes, %d streams; a real source at the limit: %d bytes, %d streams", before, beforeStreams, real, realStreams)
	fmt.Printf("BENCH decoder_heap_bytes_per_source_item2_flood ours=%d reference=%d ratio=%.0f\n", worst, before, float64(before)/float64(max(worst, 1)))
	fmt.Printf("BENCH decoder_heap_bytes_per_source_item2_vs_real_at_limit ours=%d reference=%d ratio=%.2f\n", worst, real, float64(worst)/float64(max(real, 1)))
}
