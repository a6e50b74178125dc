// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/viewserver"
)

// DefaultMaxNodes is how many nodes `matrix` draws as a node matrix before it shows the
// zone summary instead.
const DefaultMaxNodes = 40

func (o *options) matrixCommand() *cobra.Command {
	var zones []string
	var maxNodes int
	var forceZones bool
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "the node x node connectivity matrix (rows observe, columns are targets), or the zone summary of a large cluster",
		Example: `  kubectl netpulse matrix
  kubectl netpulse matrix --zone eu-west-1a --zone eu-west-1b
  kubectl netpulse matrix --zones            # zone x zone summary whatever the size`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			col, err := o.colour()
			if err != nil {
				return err
			}
			m, err := o.load(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			p := painter{on: col}
			if forceZones || (len(zones) == 0 && len(m.Nodes) > maxNodes) {
				writeZones(w, p, m, maxNodes)
				return nil
			}
			mx, err := m.Matrix(zones, 0)
			if err != nil {
				return err
			}
			if len(mx.Nodes) > maxNodes && maxNodes > 0 {
				return fmt.Errorf("%d nodes selected, more than --max-nodes %d: select fewer zones", len(mx.Nodes), maxNodes)
			}
			writeMatrix(w, p, m, mx)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&zones, "zone", nil, "draw only the nodes of this zone (repeatable)")
	cmd.Flags().IntVar(&maxNodes, "max-nodes", DefaultMaxNodes, "draw a node matrix up to this many nodes; above, the zone summary")
	cmd.Flags().BoolVar(&forceZones, "zones", false, "draw the zone x zone summary")
	return cmd
}

func (o *options) whyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "why <node|pod|zone|observer,target>",
		Short: "explain why a node, a pod target or a zone is judged as it is: observers, failing probes, since when, the quorum or zone decision, packet loss and latency with their figures and the side blamed; or one matrix cell's objects",
		Example: `  kubectl netpulse why node-2
  kubectl netpulse why node/node-2
  kubectl netpulse why zone/eu-west-1a
  kubectl netpulse why pod/netpulse-agent-7xk2p -n netpulse
  kubectl netpulse why netpulse/netpulse-agent-7xk2p
  kubectl netpulse why node-1,node-2       # the cell: objects observed from node-1 towards node-2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			col, err := o.colour()
			if err != nil {
				return err
			}
			m, err := o.load(cmd.Context())
			if err != nil {
				return err
			}
			if obs, tgt, ok := strings.Cut(strings.TrimPrefix(args[0], "pair/"), ","); ok {
				return writeCell(cmd.OutOrStdout(), painter{on: col}, m, obs, tgt)
			}
			e, err := o.resolve(m, args[0])
			if err != nil {
				return err
			}
			writeWhy(cmd.OutOrStdout(), painter{on: col}, e)
			return nil
		},
	}
	return cmd
}

// resolve finds the target: node/NAME, pod/NAME, NAMESPACE/NAME, or NAME (a node when
// one is called so, else a pod target of that name).
func (o *options) resolve(m *matrix.Model, arg string) (matrix.Explanation, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		kind, name = "", arg
	}
	switch kind {
	case "zone", "zones":
		if e, ok := m.WhyZone(name); ok {
			return e, nil
		}
		return matrix.Explanation{}, fmt.Errorf("zone %q: no node is in it, and no ZoneNetworkHealth names it", name)
	case "node", "nodes", "no":
		if e, ok := m.WhyNode(name); ok {
			return e, nil
		}
		return matrix.Explanation{}, fmt.Errorf("node %q: no such node, and no PodNetworkHealth object names it", name)
	case "", "pod", "pods", "po":
		if kind == "" {
			if e, ok := m.WhyNode(name); ok {
				return e, nil
			}
		}
		cands := m.PodTargets(o.namespace(), name)
		switch len(cands) {
		case 0:
			return matrix.Explanation{}, fmt.Errorf("%q: no node of that name, and no PodNetworkHealth object targets a pod of that name%s", name, o.inNamespace())
		case 1:
			ns, n, _ := strings.Cut(cands[0], "/")
			e, _ := m.WhyPod(ns, n)
			return e, nil
		default:
			return matrix.Explanation{}, fmt.Errorf("pod %q is a target in several namespaces (%s): use -n or NAMESPACE/NAME", name, strings.Join(cands, ", "))
		}
	default:
		// NAMESPACE/NAME of a pod target.
		if e, ok := m.WhyPod(kind, name); ok {
			return e, nil
		}
		return matrix.Explanation{}, fmt.Errorf("pod %s/%s: no PodNetworkHealth object targets it", kind, name)
	}
}

func (o *options) inNamespace() string {
	if ns := o.namespace(); ns != "" {
		return " in namespace " + ns
	}
	return ""
}

func (o *options) topCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "top",
		Short: "the worst pairs by loss, then by RTT p50",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			col, err := o.colour()
			if err != nil {
				return err
			}
			if limit < 1 {
				return fmt.Errorf("--limit: %d: want at least 1", limit)
			}
			m, err := o.load(cmd.Context())
			if err != nil {
				return err
			}
			writeTop(cmd.OutOrStdout(), painter{on: col}, m, m.Top(limit))
			return nil
		},
	}
	cmd.Flags().IntVarP(&limit, "limit", "l", 20, "how many pairs")
	return cmd
}

// ServeNoLive is what `serve`'s page and API say of the live cells.
const ServeNoLive = "objects only: kubectl netpulse serve reads the API, not the leader gateway's memory, so cells without an object stay empty; the gateway's netpulse_view (kubectl -n netpulse port-forward to the leader) shows the live results"

func (o *options) serveCommand() *cobra.Command {
	var addr string
	var refresh time.Duration
	var maxNodes int
	var allowedHosts []string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "serve the web view on this machine (the netpulse_view page, read with your kubeconfig) until interrupted",
		Long: `serve runs the same read-only page and JSON API as the gateway's netpulse_view extension, on
this machine, with your own credentials: informers (one LIST, then WATCH) on PodNetworkHealth
objects, nodes and the agent pods. It binds loopback by default; it has no authentication of
its own, so do not bind it to a public address. It answers only to requests that name it by
IP address, localhost or an --allowed-host name (others get 421): a web page that re-points
its own name at this address (DNS rebinding) cannot read it.

It shows objects only: the live cells (the newest result of every probe, rotating ones
included) are in the leader gateway's memory, which this machine cannot read; open the
gateway's netpulse_view through kubectl port-forward for them (docs/view.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.restConfig()
			if err != nil {
				return err
			}
			cfg.Timeout = 0 // watches are long requests
			src, err := viewserver.NewSource(cfg, viewserver.SourceOptions{Namespace: o.namespace(), ConditionType: o.conditionType, PodSelector: o.podSelector})
			if err != nil {
				return err
			}
			h, err := viewserver.NewHandler(src, viewserver.HandlerOptions{RefreshInterval: refresh, MaxMatrixNodes: maxNodes,
				AllowedHosts: allowedHosts, NoLive: ServeNoLive})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			src.Start()
			defer src.Shutdown()
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			fmt.Fprintf(cmd.OutOrStdout(), "netpulse view: http://%s/ (read-only; Ctrl-C stops)\n", ln.Addr())
			select {
			case <-ctx.Done():
			case err := <-errc:
				return err
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "address", "localhost:8089", "host:port to listen on")
	cmd.Flags().DurationVar(&refresh, "refresh", viewserver.DefaultRefreshInterval, "how often the page polls")
	cmd.Flags().IntVar(&maxNodes, "max-matrix-nodes", viewserver.DefaultMaxMatrixNodes, "largest node matrix; larger clusters open on the zone view")
	cmd.Flags().StringSliceVar(&allowedHosts, "allowed-host", nil, `host names (or "*.domain") the page answers to besides IP addresses and localhost; other Host headers get 421 (DNS-rebinding defence)`)
	return cmd
}

// ---- output ----------------------------------------------------------------------------

// painter writes ANSI colours when on.
type painter struct{ on bool }

const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[1;31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiOrange = "\x1b[38;5;208m"
	ansiGrey   = "\x1b[35m"
	ansiDim    = "\x1b[2m"
	ansiBold   = "\x1b[1m"
)

func (p painter) paint(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return code + s + ansiReset
}

// glyph is one cell: + Reachable, ~ Degraded, ? Unknown, X Unreachable, . no object.
func glyph(v matrix.Verdict) string {
	switch v {
	case matrix.Reachable:
		return "+"
	case matrix.Degraded:
		return "~"
	case matrix.Unknown:
		return "?"
	case matrix.Unreachable:
		return "X"
	}
	return "."
}

func (p painter) verdict(v matrix.Verdict, loss float64, s string) string {
	switch v {
	case matrix.Reachable:
		if loss > 0 {
			return p.paint(ansiYellow, s)
		}
		return p.paint(ansiGreen, s)
	case matrix.Degraded:
		return p.paint(ansiOrange, s)
	case matrix.Unknown:
		return p.paint(ansiGrey, s)
	case matrix.Unreachable:
		return p.paint(ansiRed, s)
	}
	return p.paint(ansiDim, s)
}

func countsText(c map[matrix.Verdict]int) string {
	var parts []string
	for i := len(matrix.Verdicts) - 1; i >= 0; i-- {
		if n := c[matrix.Verdicts[i]]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, matrix.Verdicts[i]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func header(m *matrix.Model) string {
	s := fmt.Sprintf("%d nodes in %d zones, %d pairs (%s)", len(m.Nodes), len(m.Zones), len(m.Pairs), countsText(m.Counts))
	if m.Unplaced > 0 {
		s += fmt.Sprintf(", %d unplaced", m.Unplaced)
	}
	if m.External > 0 {
		s += fmt.Sprintf(", %d external", m.External)
	}
	return s
}

func condShort(c *matrix.Condition) string {
	if c == nil {
		return "-"
	}
	return c.Status
}

func zoneName(z string) string {
	if z == "" {
		return "(none)"
	}
	return z
}

const legend = "+ Reachable  ~ Degraded (PacketLoss, HighLatency, MTUBlackHole or AddressFamilyUnreachable: why OBSERVER,TARGET names it)  ? Unknown  X Unreachable  . no object (not probed as a stable pair: no verdict)  - self"

func writeMatrix(w writer, p painter, m *matrix.Model, mx matrix.Matrix) {
	fmt.Fprintf(w, "netpulse: %s\n", header(m))
	fmt.Fprintf(w, "rows observe, columns are targets (numbered as the rows)\n\n")
	n := len(mx.Nodes)
	colW := len(fmt.Sprint(n)) + 1
	zoneW, nameW := len("ZONE"), len("NODE")
	for _, nd := range mx.Nodes {
		zoneW = max(zoneW, len(zoneName(nd.Zone)))
		nameW = max(nameW, len(nd.Name))
	}
	idxW := len(fmt.Sprint(n))
	grid := make([]map[int]matrix.MatrixCell, n)
	for _, c := range mx.Cells {
		if grid[c.O] == nil {
			grid[c.O] = map[int]matrix.MatrixCell{}
		}
		grid[c.O][c.T] = c
	}
	lead := fmt.Sprintf("%-*s  %*s  %-*s  %-7s", zoneW, "ZONE", idxW, "#", nameW, "NODE", "COND")
	var hdr strings.Builder
	hdr.WriteString(lead)
	for i := range n {
		fmt.Fprintf(&hdr, "%*d", colW, i+1)
	}
	fmt.Fprintln(w, hdr.String())
	prevZone := "\x00"
	for r, nd := range mx.Nodes {
		z := ""
		if nd.Zone != prevZone {
			z, prevZone = zoneName(nd.Zone), nd.Zone
		}
		cond := fmt.Sprintf("%-7s", condShort(nd.Condition))
		name := fmt.Sprintf("%-*s", nameW, nd.Name)
		if nd.Condition.Problem() {
			cond, name = p.paint(ansiRed, cond), p.paint(ansiRed, name)
		}
		var row strings.Builder
		fmt.Fprintf(&row, "%-*s  %*d  %s  %s", zoneW, z, idxW, r+1, name, cond)
		for c := range n {
			pad := strings.Repeat(" ", colW-1)
			switch cell, ok := grid[r][c]; {
			case c == r:
				row.WriteString(pad + p.paint(ansiDim, "-"))
			case !ok:
				row.WriteString(pad + p.paint(ansiDim, "."))
			default:
				row.WriteString(pad + p.verdict(cell.Verdict, cell.Loss, glyph(cell.Verdict)))
			}
		}
		if c := nd.Condition; c != nil && c.Status != "False" {
			row.WriteString("  " + p.paint(ansiRed, c.Reason))
		}
		fmt.Fprintln(w, strings.TrimRight(row.String(), " "))
	}
	fmt.Fprintf(w, "\n%s\n", legend)
	writeDegradedCells(w, p, mx)
	writeGrayNodes(w, p, m)
	writeGrayZonePairs(w, p, m)
	writeProblems(w, p, m)
}

// maxDegradedCells bounds the degraded cells the matrix names.
const maxDegradedCells = 10

// writeDegradedCells names the reasons of the matrix's Degraded cells (~).
func writeDegradedCells(w writer, p painter, mx matrix.Matrix) {
	cols := mx.Targets
	if cols == nil {
		cols = mx.Nodes
	}
	var lines []string
	n := 0
	for _, c := range mx.Cells {
		if c.Verdict != matrix.Degraded {
			continue
		}
		n++
		if len(lines) < maxDegradedCells {
			lines = append(lines, fmt.Sprintf("  %s -> %s: %s", mx.Nodes[c.O].Name, cols[c.T].Name, matrix.DegradedText(c.Degraded, c.ZoneLoss)))
		}
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "degraded cells (~, %d; kubectl netpulse why OBSERVER,TARGET gives the figures):\n", n)
	for _, l := range lines {
		fmt.Fprintln(w, p.paint(ansiOrange, l))
	}
	if n > len(lines) {
		fmt.Fprintf(w, "  ... and %d more\n", n-len(lines))
	}
}

// writeGrayNodes lists the nodes blamed for packet loss or high latency, with the side.
func writeGrayNodes(w writer, p painter, m *matrix.Model) {
	nodes := m.GrayNodes()
	if len(nodes) == 0 {
		return
	}
	fmt.Fprintf(w, "gray verdicts (%d nodes blamed for packet loss or high latency; target: most of its observers see it, observer: it sees it towards most of its targets):\n", len(nodes))
	for i, n := range nodes {
		if i == maxDegradedCells {
			fmt.Fprintf(w, "  ... and %d more\n", len(nodes)-i)
			break
		}
		fmt.Fprintln(w, p.paint(ansiOrange, fmt.Sprintf("  %s: %s (%d pairs)", n.Name, strings.Join(n.Reasons, ", "), n.Pairs)))
	}
}

// writeGrayZonePairs lists the zone pairs the pairs' objects blame packet loss on: a lossy
// link between the zones, for which no node is blamed.
func writeGrayZonePairs(w writer, p painter, m *matrix.Model) {
	zps := m.GrayZonePairs("")
	if len(zps) == 0 {
		return
	}
	s := "s"
	if len(zps) == 1 {
		s = ""
	}
	fmt.Fprintf(w, "gray verdicts between zones (%d zone pair%s: a lossy link between the zones, no node blamed; kubectl netpulse why zone/NAME gives the figures):\n", len(zps), s)
	for i, z := range zps {
		if i == maxDegradedCells {
			fmt.Fprintf(w, "  ... and %d more\n", len(zps)-i)
			break
		}
		fmt.Fprintln(w, p.paint(ansiOrange, fmt.Sprintf("  %s -> %s: %s (%d pairs, worst %s)", z.From, z.To, z.Reason, z.Pairs, z.Figures)))
	}
}

// writeCell is the drill-down of one matrix cell: its objects with their verdicts,
// reasons, Degraded reasons and messages, and figures.
func writeCell(w writer, p painter, m *matrix.Model, observer, target string) error {
	for _, n := range []string{observer, target} {
		if _, ok := m.NodeIndex(n); !ok {
			return fmt.Errorf("node %q: no such node, and no PodNetworkHealth object names it", n)
		}
	}
	pairs := m.PairsBetween(observer, target)
	head := fmt.Sprintf("cell %s -> %s: ", observer, target)
	c := m.Cell(observer, target)
	if c == nil {
		fmt.Fprintln(w, head+"no object (not probed as a stable pair, not failing): no verdict")
		return nil
	}
	head += fmt.Sprintf("%s, %d object(s)", c.Verdict, len(pairs))
	if len(c.Degraded) > 0 {
		head += " (degraded: " + matrix.DegradedText(c.Degraded, c.ZoneLoss) + ")"
	}
	fmt.Fprintln(w, p.verdict(c.Verdict, c.Loss, head))
	for _, pr := range pairs {
		fmt.Fprintf(w, "\n  %s/%s: %s -> %s %s\n", pr.Namespace, pr.Name, pr.SourcePod, strings.ToLower(pr.TargetKind), pr.Target)
		line := "verdict: " + string(pr.Verdict)
		if pr.Reason != "" {
			line += "; Reachable condition " + pr.Reason
			if pr.Message != "" {
				line += ": " + pr.Message
			}
		}
		fmt.Fprintln(w, "    "+p.verdict(pr.Verdict, pr.Loss, line))
		if pr.DegradedReason != "" {
			line := "degraded: " + pr.GrayText()
			if !pr.DegradedSince.IsZero() {
				line += " since " + m.When(pr.DegradedSince)
			}
			fmt.Fprintln(w, "    "+p.paint(ansiOrange, line))
			if pr.DegradedMessage != "" {
				fmt.Fprintln(w, "      "+pr.DegradedMessage)
			}
		}
		fmt.Fprintf(w, "    RTT p50 %s, p99 %s, loss %s, window %s", dash(pr.P50), dash(pr.P99), lossText(pr.Pair), dash(string(pr.Status.Window)))
		if !pr.OutageSince.IsZero() {
			fmt.Fprintf(w, ", outage since %s", m.When(pr.OutageSince))
		}
		fmt.Fprintln(w)
	}
	return nil
}

func writeZones(w writer, p painter, m *matrix.Model, maxNodes int) {
	s := m.Summary()
	fmt.Fprintf(w, "netpulse: %s\n", header(m))
	fmt.Fprintf(w, "zone summary (observer zone -> target zone; cell: worst verdict, pairs, unreachable pairs); --zone NAME draws a zone's nodes (up to %d)\n\n", maxNodes)
	cells := map[[2]string]matrix.ZoneCell{}
	for _, c := range s.Cells {
		cells[[2]string{c.From, c.To}] = c
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var hdr strings.Builder
	hdr.WriteString("FROM \\ TO")
	for _, z := range s.Zones {
		fmt.Fprintf(&hdr, "\t%s (%d)", zoneName(z.Name), z.Count)
	}
	fmt.Fprintln(tw, hdr.String())
	for _, f := range s.Zones {
		var row strings.Builder
		name := fmt.Sprintf("%s (%d)", zoneName(f.Name), f.Count)
		row.WriteString(name)
		for _, t := range s.Zones {
			c, ok := cells[[2]string{f.Name, t.Name}]
			if !ok {
				row.WriteString("\t.")
				continue
			}
			total := 0
			for _, n := range c.Counts {
				total += n
			}
			txt := fmt.Sprintf("%s %d", glyph(c.Verdict), total)
			if u := c.Counts[matrix.Unreachable]; u > 0 {
				txt += fmt.Sprintf(" (%d X)", u)
			}
			if c.ZonePair != nil && c.ZonePair.Verdict == matrix.Unreachable {
				txt += " CUT" // the gateway's zone pair verdict (ZoneNetworkHealth)
			}
			// Plain text: tabwriter would count colour codes as width.
			row.WriteString("\t" + txt)
		}
		fmt.Fprintln(tw, row.String())
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%s\n", legend)
	writeZonePairs(w, p, m)
	writeGrayZonePairs(w, p, m)
	writeProblems(w, p, m)
}

// writeZonePairs lists the zone pairs the gateway judged (ZoneNetworkHealth objects):
// CUT in the table is one of them.
func writeZonePairs(w writer, p painter, m *matrix.Model) {
	if len(m.ZonePairs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nzone pairs judged by the gateway (kubectl netpulse why zone/NAME):")
	for _, z := range m.ZonePairs {
		line := fmt.Sprintf("  %s -> %s: %s (%s), %d of %d node pairs fail", z.From, z.To, z.Verdict, z.Reason, z.FailingPairs, z.NodePairs)
		if !z.Since.IsZero() {
			line += " since " + m.When(z.Since)
		}
		if z.DegradedReason != "" {
			line += "; Degraded " + z.DegradedReason + ": " + z.DegradedMessage
		}
		fmt.Fprintln(w, p.verdict(z.Verdict, 0, line))
	}
}

func writeProblems(w writer, p painter, m *matrix.Model) {
	s := m.Summary()
	if s.ProblemsTotal == 0 {
		fmt.Fprintln(w, "node problems: none (every node's netpulse condition is False or not written)")
		return
	}
	fmt.Fprintf(w, "node problems (%d):\n", s.ProblemsTotal)
	for _, pn := range s.Problems {
		c := pn.Condition
		line := fmt.Sprintf("  %s (zone %s): %s=%s %s", pn.Name, zoneName(pn.Zone), c.Type, c.Status, c.Reason)
		if !c.Since.IsZero() && !m.Now.Before(c.Since) {
			line += " for " + matrix.Age(m.Now.Sub(c.Since))
		}
		if c.Problem() {
			line = p.paint(ansiRed, line)
		}
		fmt.Fprintln(w, line)
	}
	if s.ProblemsTotal > len(s.Problems) {
		fmt.Fprintf(w, "  ... and %d more\n", s.ProblemsTotal-len(s.Problems))
	}
	fmt.Fprintln(w, "kubectl netpulse why <node> explains one.")
}

func writeWhy(w writer, p painter, e matrix.Explanation) {
	for i, l := range e.Lines {
		if i == 0 {
			fmt.Fprintln(w, p.verdict(e.Verdict, 0, l))
			continue
		}
		fmt.Fprintln(w, "  "+l)
	}
	if len(e.Pairs) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OBSERVER\tSOURCE POD\tTARGET\tREACHABLE\tRTT P50\tLOSS\tOUTAGE SINCE\tREASON")
	writePairRows(tw, e.Pairs)
	_ = tw.Flush()
	if len(e.ObservedGray) == 0 {
		return
	}
	fmt.Fprintf(w, "\npairs it observes with a gray verdict:\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OBSERVER\tSOURCE POD\tTARGET\tREACHABLE\tRTT P50\tLOSS\tOUTAGE SINCE\tREASON")
	writePairRows(tw, e.ObservedGray)
	_ = tw.Flush()
}

// writePairRows writes up to 20 pairs; REASON is the Degraded reason with the side a gray
// verdict blames when the pair is Degraded, else the Reachable condition's reason.
func writePairRows(tw writer, pairs []matrix.Pair) {
	const maxRows = 20
	for i, pr := range pairs {
		if i == maxRows {
			fmt.Fprintf(tw, "... %d more\t\t\t\t\t\t\t\n", len(pairs)-maxRows)
			break
		}
		since := ""
		if !pr.OutageSince.IsZero() {
			since = pr.OutageSince.UTC().Format(time.RFC3339)
		}
		reason := pr.Reason
		if pr.DegradedReason != "" && pr.Verdict == matrix.Degraded {
			reason = pr.GrayText()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(pr.ObserverNode), pr.Namespace+"/"+pr.SourcePod, pr.Target,
			pr.Verdict, dash(pr.P50), lossText(pr), dash(since), dash(reason))
	}
}

func writeTop(w writer, p painter, m *matrix.Model, pairs []matrix.Pair) {
	fmt.Fprintf(w, "netpulse: %s; the %d worst by loss, then RTT p50\n\n", header(m), len(pairs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tOBSERVER\tTARGET\tTARGET NODE\tREACHABLE\tLOSS\tRTT P50\tRTT P99\tOUTAGE SINCE")
	for _, pr := range pairs {
		since := ""
		if !pr.OutageSince.IsZero() {
			since = matrix.Age(m.Now.Sub(pr.OutageSince))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", pr.Namespace, pr.Name, dash(pr.ObserverNode), pr.Target,
			dash(pr.TargetNode), pr.Verdict, lossText(pr), dash(pr.P50), dash(pr.P99), dash(since))
	}
	_ = tw.Flush()
}

func lossText(p matrix.Pair) string {
	if !p.HasLoss {
		return "-"
	}
	return string(v1alpha1.RatioFromFloat(p.Loss))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type writer = interface {
	Write([]byte) (int, error)
}
