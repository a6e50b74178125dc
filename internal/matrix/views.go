// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix

import (
	"fmt"
	"slices"
	"time"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// The views below are what the web view serves as JSON (and what the plugin prints):
// small, flat, and with nothing a reader of the PodNetworkHealth objects and of the
// nodes' netpulse condition could not see.

// Counts is a number of pairs per verdict.
type Counts map[Verdict]int

// Summary is the cluster at a glance: the zone x zone view. Its size grows with the
// number of zones squared and with the nodes that have a problem (capped), never with
// the number of nodes or pairs.
type Summary struct {
	Generated time.Time `json:"generated"`
	Nodes     int       `json:"nodes"`
	Pairs     int       `json:"pairs"`
	Counts    Counts    `json:"counts"`
	Unplaced  int       `json:"unplaced"`
	External  int       `json:"external"`
	Zones     []Zone    `json:"zones"`
	// Cells: one per (observer zone, target zone) with at least one pair.
	Cells []ZoneCell `json:"cells"`
	// Problems: nodes whose netpulse condition is not False (True first), at most
	// MaxProblems; ProblemsTotal counts them all.
	Problems      []ProblemNode `json:"problems"`
	ProblemsTotal int           `json:"problemsTotal"`
}

// MaxProblems bounds Summary.Problems.
const MaxProblems = 50

// ZoneCell aggregates the pairs from the nodes of one zone to the nodes of another.
type ZoneCell struct {
	From    string  `json:"from"`
	To      string  `json:"to"`
	Verdict Verdict `json:"verdict"`
	Counts  Counts  `json:"counts"`
	// NodePairs is the number of (observer node, target node) cells with pairs.
	NodePairs int     `json:"nodePairs"`
	P50       string  `json:"p50,omitempty"`
	Loss      float64 `json:"loss"`
	p50       time.Duration
}

// ProblemNode is a node whose condition is True or Unknown.
type ProblemNode struct {
	Name      string     `json:"name"`
	Zone      string     `json:"zone,omitempty"`
	Condition *Condition `json:"condition"`
}

// Summary builds the zone x zone view.
func (m *Model) Summary() Summary {
	s := Summary{Generated: m.Now, Nodes: len(m.Nodes), Pairs: len(m.Pairs), Counts: Counts{},
		Unplaced: m.Unplaced, External: m.External, Zones: m.Zones}
	for v, n := range m.Counts {
		s.Counts[v] = n
	}
	zoneOf := make([]int, len(m.Nodes))
	for zi, z := range m.Zones {
		for i := z.First; i < z.First+z.Count; i++ {
			zoneOf[i] = zi
		}
	}
	nz := len(m.Zones)
	cells := make([]*ZoneCell, nz*nz)
	for ci := range m.Cells {
		c := &m.Cells[ci]
		fz, tz := zoneOf[c.Row], zoneOf[c.Col]
		zc := cells[fz*nz+tz]
		if zc == nil {
			zc = &ZoneCell{From: m.Zones[fz].Name, To: m.Zones[tz].Name, Counts: Counts{}}
			cells[fz*nz+tz] = zc
		}
		zc.NodePairs++
		zc.Verdict = zc.Verdict.Worse(c.Verdict)
		for _, pi := range c.Pairs {
			zc.Counts[m.Pairs[pi].Verdict]++
		}
		if c.P50 != "" && (zc.P50 == "" || c.p50 > zc.p50) {
			zc.P50, zc.p50 = c.P50, c.p50
		}
		if c.HasLoss && c.Loss > zc.Loss {
			zc.Loss = c.Loss
		}
	}
	for _, zc := range cells {
		if zc != nil {
			s.Cells = append(s.Cells, *zc)
		}
	}
	var problems []ProblemNode
	for _, n := range m.Nodes {
		if n.Condition != nil && n.Condition.Status != "False" {
			problems = append(problems, ProblemNode{Name: n.Name, Zone: n.Zone, Condition: n.Condition})
		}
	}
	slices.SortStableFunc(problems, func(a, b ProblemNode) int {
		if a.Condition.Problem() != b.Condition.Problem() {
			if a.Condition.Problem() {
				return -1
			}
			return 1
		}
		return 0
	})
	s.ProblemsTotal = len(problems)
	s.Problems = problems[:min(len(problems), MaxProblems)]
	if s.Problems == nil {
		s.Problems = []ProblemNode{}
	}
	return s
}

// Matrix is a node x node view: rows are observer nodes, columns target nodes, both the
// same Nodes, grouped in Zones. Cells are sparse: a missing (row, column) has no object.
type Matrix struct {
	Generated time.Time    `json:"generated"`
	Nodes     []Node       `json:"nodes"`
	Zones     []Zone       `json:"zones"`
	Cells     []MatrixCell `json:"cells"`
}

// MatrixCell is one cell of a Matrix: O and T index Matrix.Nodes.
type MatrixCell struct {
	O       int     `json:"o"`
	T       int     `json:"t"`
	Verdict Verdict `json:"v"`
	P50     string  `json:"p50,omitempty"`
	Loss    float64 `json:"loss"`
	HasLoss bool    `json:"hasLoss,omitempty"`
	// Pairs is the number of objects in the cell.
	Pairs int `json:"n"`
}

// ErrTooLarge is returned by Matrix when the selection has more nodes than allowed.
type ErrTooLarge struct{ Nodes, Max int }

func (e ErrTooLarge) Error() string {
	return fmt.Sprintf("%d nodes selected, at most %d fit in a node matrix: select zones", e.Nodes, e.Max)
}

// Matrix builds the node x node view of the nodes in zones (every node when zones is
// empty), refusing more than maxNodes of them (0: no limit). Unknown zone names select
// nothing; "" selects the nodes without a zone.
func (m *Model) Matrix(zones []string, maxNodes int) (Matrix, error) {
	out := Matrix{Generated: m.Now, Nodes: []Node{}, Zones: []Zone{}, Cells: []MatrixCell{}}
	newIndex := make([]int, len(m.Nodes))
	for i := range newIndex {
		newIndex[i] = -1
	}
	for _, z := range m.Zones {
		if len(zones) > 0 && !slices.Contains(zones, z.Name) {
			continue
		}
		nz := Zone{Name: z.Name, First: len(out.Nodes), Count: z.Count, ProblemNodes: z.ProblemNodes}
		for i := z.First; i < z.First+z.Count; i++ {
			newIndex[i] = len(out.Nodes)
			out.Nodes = append(out.Nodes, m.Nodes[i])
		}
		out.Zones = append(out.Zones, nz)
	}
	if maxNodes > 0 && len(out.Nodes) > maxNodes {
		return Matrix{}, ErrTooLarge{Nodes: len(out.Nodes), Max: maxNodes}
	}
	for ci := range m.Cells {
		c := &m.Cells[ci]
		r, t := newIndex[c.Row], newIndex[c.Col]
		if r < 0 || t < 0 {
			continue
		}
		out.Cells = append(out.Cells, MatrixCell{O: r, T: t, Verdict: c.Verdict, P50: c.P50, Loss: c.Loss,
			HasLoss: c.HasLoss, Pairs: len(c.Pairs)})
	}
	return out, nil
}

// PairDetail is one object of a drill-down: the flattened pair, and its spec and status
// as the API holds them (per-probe results, outage history, conditions).
type PairDetail struct {
	Pair
	Spec   v1alpha1.PodNetworkHealthSpec   `json:"spec"`
	Status v1alpha1.PodNetworkHealthStatus `json:"status"`
}

// Detail is the drill-down of a pair.
func (p *Pair) Detail() PairDetail {
	d := PairDetail{Pair: *p}
	if p.obj != nil {
		d.Spec, d.Status = p.obj.Spec, p.obj.Status
	}
	return d
}

// PairsBetween lists the pairs observed from node observer towards targets on node
// target (the drill-down of one cell).
func (m *Model) PairsBetween(observer, target string) []PairDetail {
	c := m.Cell(observer, target)
	if c == nil {
		return []PairDetail{}
	}
	out := make([]PairDetail, 0, len(c.Pairs))
	for _, pi := range c.Pairs {
		out = append(out, m.Pairs[pi].Detail())
	}
	return out
}
