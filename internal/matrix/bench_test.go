// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix_test

import (
	"encoding/json"
	"testing"

	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

// bench1000 is 1,000 nodes in 10 zones, one agent each with M=2 stable peers on a
// hash-ordered ring (2,000 stable pairs, crossing zones at random), one node partitioned
// (its failing rotating pairs too): what the web view rebuilds after informer events.
func bench1000() matrix.Input {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 1000, Zones: 10, Stable: 2, Scatter: true, Partitioned: "node-500", Now: now})
	in := matrix.Input{Objects: f.Objects, Now: now}
	for _, n := range f.Nodes {
		in.Nodes = append(in.Nodes, matrix.NodeFrom(n, ""))
	}
	for _, p := range f.Pods {
		in.Pods = append(in.Pods, matrix.PodFrom(p))
	}
	return in
}

// BenchmarkBuild1000: the model (pairs, nodes, cells) at 1,000 nodes.
func BenchmarkBuild1000(b *testing.B) {
	in := bench1000()
	b.ReportAllocs()
	for b.Loop() {
		matrix.Build(in)
	}
}

// BenchmarkSummary1000: the zone x zone view and its JSON (what the page polls).
func BenchmarkSummary1000(b *testing.B) {
	m := matrix.Build(bench1000())
	var size int
	b.ReportAllocs()
	for b.Loop() {
		buf, err := json.Marshal(m.Summary())
		if err != nil {
			b.Fatal(err)
		}
		size = len(buf)
	}
	b.ReportMetric(float64(size), "json-bytes")
}

// BenchmarkZoneMatrix1000: one zone's node x node matrix (100 nodes) and its JSON.
func BenchmarkZoneMatrix1000(b *testing.B) {
	m := matrix.Build(bench1000())
	var size int
	b.ReportAllocs()
	for b.Loop() {
		mx, err := m.Matrix([]string{"zone-c"}, 200)
		if err != nil {
			b.Fatal(err)
		}
		buf, err := json.Marshal(mx)
		if err != nil {
			b.Fatal(err)
		}
		size = len(buf)
	}
	b.ReportMetric(float64(size), "json-bytes")
}

// BenchmarkWhyAndTop1000: a node's explanation and the 20 worst pairs.
func BenchmarkWhyAndTop1000(b *testing.B) {
	m := matrix.Build(bench1000())
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := m.WhyNode("node-500"); !ok {
			b.Fatal("no node-500")
		}
		m.Top(20)
	}
}
