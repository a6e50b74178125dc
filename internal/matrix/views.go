// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix

import (
	"fmt"
	"slices"
	"time"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/livematrix"
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
	// Degraded lists the distinct Degraded reasons of its objects, hard failures first (as
	// a node cell's).
	Degraded []string `json:"degraded,omitempty"`
	// ZoneLoss is the zone pair a PacketLoss of its objects is blamed on (a lossy link
	// between the zones, no node), when it is.
	ZoneLoss *ZoneLink `json:"zoneLoss,omitempty"`
	// ZonePair is the exporter's verdict on the zone pair, when it wrote one (a cut pair,
	// or one that recovered recently): the cell's verdict is the worse of it and the
	// objects'.
	ZonePair *ZonePair `json:"zonePair,omitempty"`
	p50      time.Duration
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
		for _, r := range c.Degraded {
			if !slices.Contains(zc.Degraded, r) {
				zc.Degraded = append(zc.Degraded, r)
			}
		}
		if zc.ZoneLoss == nil {
			zc.ZoneLoss = c.ZoneLoss
		}
	}
	zoneIndex := make(map[string]int, nz)
	for zi, z := range m.Zones {
		zoneIndex[z.Name] = zi
	}
	for i := range m.ZonePairs {
		zp := &m.ZonePairs[i]
		fz, ok1 := zoneIndex[zp.From]
		tz, ok2 := zoneIndex[zp.To]
		if !ok1 || !ok2 {
			continue // a zone without nodes any more
		}
		zc := cells[fz*nz+tz]
		if zc == nil {
			zc = &ZoneCell{From: zp.From, To: zp.To, Counts: Counts{}}
			cells[fz*nz+tz] = zc
		}
		zc.ZonePair = zp
		zc.Verdict = zc.Verdict.Worse(zp.Verdict)
	}
	for _, zc := range cells {
		if zc != nil {
			sortDegraded(zc.Degraded)
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

// Matrix is a node x node view: rows are observer nodes (Nodes, grouped in Zones),
// columns target nodes — the same Nodes, unless Targets is set (a cross matrix between
// zones: Targets grouped in TargetZones). Cells are sparse: a missing (row, column) has no
// object.
type Matrix struct {
	Generated   time.Time    `json:"generated"`
	Nodes       []Node       `json:"nodes"`
	Zones       []Zone       `json:"zones"`
	Targets     []Node       `json:"targets,omitempty"`
	TargetZones []Zone       `json:"targetZones,omitempty"`
	Cells       []MatrixCell `json:"cells"`
}

// MatrixCell is one cell of a Matrix: O indexes Matrix.Nodes, T Matrix.Targets when set,
// else Matrix.Nodes.
type MatrixCell struct {
	O       int     `json:"o"`
	T       int     `json:"t"`
	Verdict Verdict `json:"v"`
	P50     string  `json:"p50,omitempty"`
	Loss    float64 `json:"loss"`
	HasLoss bool    `json:"hasLoss,omitempty"`
	// Degraded lists the distinct Degraded reasons of the cell's objects, hard failures
	// first (AddressFamilyUnreachable, MTUBlackHole, PacketLoss, HighLatency): the view
	// colours a Degraded cell by the first.
	Degraded []string `json:"dr,omitempty"`
	// ZoneLoss is the zone pair the cell's PacketLoss is blamed on (a lossy link between
	// the zones, no node), when it is.
	ZoneLoss *ZoneLink `json:"zl,omitempty"`
	// Pairs is the number of objects in the cell (0 in a cell only a live result fills:
	// Verdict is then None).
	Pairs int `json:"n"`
	// Live is the observer node's newest probe result towards the target node, as the
	// gateway holding the writer Lease received it (AddLive; nil when none or not known).
	Live *livematrix.Result `json:"live,omitempty"`
}

// ErrTooLarge is returned by Matrix when the selection has more nodes than allowed.
type ErrTooLarge struct{ Nodes, Max int }

func (e ErrTooLarge) Error() string {
	return fmt.Sprintf("%d nodes selected, at most %d fit in a node matrix: select zones", e.Nodes, e.Max)
}

// selectZones returns the nodes of zones (every node when zones is empty), their zones,
// and for every model node its index among them (-1: not selected).
func (m *Model) selectZones(zones []string) ([]Node, []Zone, []int) {
	nodes, zs := []Node{}, []Zone{}
	index := make([]int, len(m.Nodes))
	for i := range index {
		index[i] = -1
	}
	for _, z := range m.Zones {
		if len(zones) > 0 && !slices.Contains(zones, z.Name) {
			continue
		}
		zs = append(zs, Zone{Name: z.Name, First: len(nodes), Count: z.Count, ProblemNodes: z.ProblemNodes})
		for i := z.First; i < z.First+z.Count; i++ {
			index[i] = len(nodes)
			nodes = append(nodes, m.Nodes[i])
		}
	}
	return nodes, zs, index
}

// Matrix builds the node x node view of the nodes in zones (every node when zones is
// empty), refusing more than maxNodes of them (0: no limit). Unknown zone names select
// nothing; "" selects the nodes without a zone.
func (m *Model) Matrix(zones []string, maxNodes int) (Matrix, error) {
	nodes, zs, index := m.selectZones(zones)
	if maxNodes > 0 && len(nodes) > maxNodes {
		return Matrix{}, ErrTooLarge{Nodes: len(nodes), Max: maxNodes}
	}
	return m.cells(Matrix{Generated: m.Now, Nodes: nodes, Zones: zs}, index, index), nil
}

// CrossMatrix builds the view from the nodes of zones from (rows) to the nodes of zones
// to (columns): the drill-down of one zone x zone cell, which stays within maxNodes per
// axis where the square matrix of both zones would not.
func (m *Model) CrossMatrix(from, to []string, maxNodes int) (Matrix, error) {
	rows, rz, ri := m.selectZones(from)
	cols, cz, ci := m.selectZones(to)
	if maxNodes > 0 && max(len(rows), len(cols)) > maxNodes {
		return Matrix{}, ErrTooLarge{Nodes: max(len(rows), len(cols)), Max: maxNodes}
	}
	return m.cells(Matrix{Generated: m.Now, Nodes: rows, Zones: rz, Targets: cols, TargetZones: cz}, ri, ci), nil
}

func (m *Model) cells(out Matrix, rowIndex, colIndex []int) Matrix {
	out.Cells = []MatrixCell{}
	for ci := range m.Cells {
		c := &m.Cells[ci]
		r, t := rowIndex[c.Row], colIndex[c.Col]
		if r < 0 || t < 0 {
			continue
		}
		out.Cells = append(out.Cells, MatrixCell{O: r, T: t, Verdict: c.Verdict, P50: c.P50, Loss: c.Loss,
			HasLoss: c.HasLoss, Degraded: c.Degraded, ZoneLoss: c.ZoneLoss, Pairs: len(c.Pairs)})
	}
	return out
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
