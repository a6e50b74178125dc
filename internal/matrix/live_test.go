// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/livematrix"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

func TestAddLive(t *testing.T) {
	// 4 nodes in 2 zones (zone-a: node-1, node-3; zone-b: node-2, node-4), 1 stable peer:
	// objects node-1 -> node-2, node-2 -> node-3, node-3 -> node-4, node-4 -> node-1.
	m := build(matrixtest.Cluster(matrixtest.Options{Nodes: 4, Zones: 2, Stable: 1, Now: now}), true)
	res := func(target string, ok bool) livematrix.Result {
		return livematrix.Result{Target: target, At: now.Add(-3 * time.Second), AgeSeconds: 3, Reachable: ok}
	}
	rows := map[string][]livematrix.Result{
		"node-1": {res("node-2", true), res("node-3", true), res("node-4", false), res("node-99", true)},
		"node-4": {res("node-3", true)},
	}
	row := func(o string) []livematrix.Result { return rows[o] }

	mx, err := m.Matrix(nil, 0)
	require.NoError(t, err)
	require.Len(t, mx.Cells, 4)
	assert.Equal(t, 3, mx.AddLive(row), "node-1 -> node-3, node-4 and node-4 -> node-3; node-99 is no column")
	name := func(i int) string { return mx.Nodes[i].Name }
	type cell struct {
		o, t string
		v    matrix.Verdict
		n    int
		live bool
	}
	var got []cell
	for i, c := range mx.Cells {
		if i > 0 {
			prev := mx.Cells[i-1]
			require.True(t, prev.O < c.O || (prev.O == c.O && prev.T < c.T), "ordered by row, then column")
		}
		got = append(got, cell{name(c.O), name(c.T), c.Verdict, c.Pairs, c.Live != nil})
	}
	assert.ElementsMatch(t, []cell{
		{"node-1", "node-2", matrix.Reachable, 1, true}, // the object's verdict, the live result beside it
		{"node-1", "node-3", matrix.None, 0, true},      // live only: no verdict
		{"node-1", "node-4", matrix.None, 0, true},
		{"node-2", "node-3", matrix.Reachable, 1, false},
		{"node-3", "node-4", matrix.Reachable, 1, false},
		{"node-4", "node-1", matrix.Reachable, 1, false},
		{"node-4", "node-3", matrix.None, 0, true},
	}, got)

	// A cross matrix: rows zone-a, columns zone-b.
	cx, err := m.CrossMatrix([]string{"zone-a"}, []string{"zone-b"}, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, cx.AddLive(row), "node-1 -> node-4 only (node-1 -> node-2 has its object)")
	live := map[string]bool{}
	for _, c := range cx.Cells {
		live[cx.Nodes[c.O].Name+">"+cx.Targets[c.T].Name] = c.Live != nil
	}
	assert.Equal(t, map[string]bool{"node-1>node-2": true, "node-1>node-4": true, "node-3>node-4": false}, live)
}
