// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix

import (
	"cmp"
	"slices"

	"github.com/netpulse/netpulse/internal/livematrix"
)

// AddLive puts the gateway's live results (row: an observer node's newest result per
// target node, internal/livematrix) into the matrix: a cell with objects gets its live
// result besides its verdict; a cell without one gets a cell of its own with Verdict None,
// no pairs and the live result. A live result is an observation ("observed N s ago"),
// never a verdict. It returns how many cells only the live results fill.
func (mx *Matrix) AddLive(row func(observer string) []livematrix.Result) int {
	cols := mx.Targets
	if cols == nil {
		cols = mx.Nodes
	}
	colIndex := make(map[string]int, len(cols))
	for i, n := range cols {
		colIndex[n.Name] = i
	}
	at := make(map[[2]int]int, len(mx.Cells))
	for i, c := range mx.Cells {
		at[[2]int{c.O, c.T}] = i
	}
	added := 0
	for o, n := range mx.Nodes {
		for _, r := range row(n.Name) {
			t, ok := colIndex[r.Target]
			if !ok {
				continue
			}
			if i, ok := at[[2]int{o, t}]; ok {
				mx.Cells[i].Live = &r
				continue
			}
			mx.Cells = append(mx.Cells, MatrixCell{O: o, T: t, Verdict: None, Live: &r})
			added++
		}
	}
	if added > 0 {
		slices.SortFunc(mx.Cells, func(a, b MatrixCell) int { return cmp.Or(cmp.Compare(a.O, b.O), cmp.Compare(a.T, b.T)) })
	}
	return added
}
