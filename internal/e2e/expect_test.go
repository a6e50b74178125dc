package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/simcluster"
)

// pair is an ordered pair of nodes: the agent on from probes the agent on to.
type pair struct{ from, to string }

func (p pair) String() string { return p.from + "→" + p.to }

// pathExpect is what the source of a path must observe towards its target.
type pathExpect struct {
	reachable bool
	// errorType, for an unreachable path, is the error.type the source must report ("" =
	// any).
	errorType string
	// stable: every observation since the expectation's window opened must agree (one that
	// does not fails the scenario at once); otherwise the latest observation must.
	stable bool
	// minRounds is how many observations the window must hold (default 1).
	minRounds int
	// minRTT / maxRTT bound the mean round-trip time over the window (0 = unchecked).
	minRTT, maxRTT time.Duration
}

// lossExpect bounds the loss towards a node, over all its observers and address families
// together: once at least minEchoes echoes were sent in the window, lost/sent must lie in
// [min, max]; minLost asks only that some echoes were lost.
type lossExpect struct {
	min, max  float64
	minEchoes int64
	minLost   int64
}

// expectation is the state a scenario expects, in terms of pods and paths only, so every
// checker (the OTLP sink today, PodNetworkHealth objects later) can judge it.
type expectation struct {
	name string
	// start is when the fault was injected (detection times count from here); window is
	// when observations start to count (start, or later for averages that must not mix
	// in rounds from before the fault).
	start, window time.Time
	// agents are the pods the expectation is about (the cluster's current ones).
	agents []simcluster.Agent
	paths  map[pair]pathExpect
	loss   map[string]lossExpect // by target node
}

func (e *env) expect(name string, start time.Time) *expectation {
	return &expectation{name: name, start: start, window: start, agents: e.cl.Agents(),
		paths: map[pair]pathExpect{}, loss: map[string]lossExpect{}}
}

// all sets pe on every ordered pair of agents for which keep is true (nil: every pair).
func (x *expectation) all(pe pathExpect, keep func(p pair) bool) *expectation {
	for _, a := range x.agents {
		for _, b := range x.agents {
			p := pair{a.Node, b.Node}
			if a.Node != b.Node && (keep == nil || keep(p)) {
				x.paths[p] = pe
			}
		}
	}
	return x
}

func involves(node string) func(pair) bool {
	return func(p pair) bool { return p.from == node || p.to == node }
}

func not(f func(pair) bool) func(pair) bool { return func(p pair) bool { return !f(p) } }

func towards(node string) func(pair) bool { return func(p pair) bool { return p.to == node } }

func from(node string) func(pair) bool { return func(p pair) bool { return p.from == node } }

func (x *expectation) agent(node string) (simcluster.Agent, bool) {
	for _, a := range x.agents {
		if a.Node == node {
			return a, true
		}
	}
	return simcluster.Agent{}, false
}

// checker judges an expectation from one vantage point.
type checker interface {
	name() string
	// check reports whether exp holds now; progress says what is still missing. A
	// non-nil error means it cannot hold any more (a stable path flipped, a loss ratio
	// settled outside its bounds): the scenario fails at once.
	check(exp *expectation) (ok bool, progress string, err error)
}

// await polls every checker until each sees exp hold, and logs and returns how long after
// exp.start each did: `E2E <verb> <name>: 3.2s (otlp)`.
func (e *env) await(t *testing.T, verb string, exp *expectation, timeout time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	done := map[string]time.Duration{}
	progress := map[string]string{}
	for {
		for _, c := range e.checkers {
			if _, ok := done[c.name()]; ok {
				continue
			}
			ok, why, err := c.check(exp)
			if err != nil {
				t.Fatalf("%s [%s]: %v", exp.name, c.name(), err)
			}
			if ok {
				d := time.Since(exp.start)
				done[c.name()] = d
				label := verb
				if exp.name != "" {
					label += " " + exp.name
				}
				t.Logf("E2E %s: %.1fs (%s)", label, d.Seconds(), c.name())
			} else {
				progress[c.name()] = why
			}
		}
		if len(done) == len(e.checkers) {
			return slices.Max(slices.Collect(maps.Values(done)))
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, c := range e.checkers {
				if _, ok := done[c.name()]; !ok {
					fmt.Fprintf(&b, "\n  [%s] %s", c.name(), progress[c.name()])
				}
			}
			t.Fatalf("%s: not observed within %v:%s", exp.name, timeout, b.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// otlpChecker judges expectations from the agents' own telemetry, as the OTLP sink
// received it: per path, the ICMP series from the source pod (Resource k8s.pod.uid) to each
// of the target pod's addresses (IPv4 and IPv6).
type otlpChecker struct{ sink *simcluster.OTLPSink }

func (o *otlpChecker) name() string { return "otlp" }

func (o *otlpChecker) series(src simcluster.Agent, addr string) (simcluster.Series, bool) {
	return o.sink.Get(simcluster.SeriesKey{SourceUID: src.UID, Destination: addr, Probe: contract.ProbeTypeICMP})
}

func (o *otlpChecker) check(exp *expectation) (bool, string, error) {
	var pending []string
	paths := slices.SortedFunc(maps.Keys(exp.paths), func(a, b pair) int { return strings.Compare(a.String(), b.String()) })
	for _, p := range paths {
		pe := exp.paths[p]
		src, ok1 := exp.agent(p.from)
		dst, ok2 := exp.agent(p.to)
		if !ok1 || !ok2 {
			return false, "", fmt.Errorf("path %s: no agent pod on one of its nodes", p)
		}
		for _, ip := range dst.IPs {
			label := fmt.Sprintf("%s (%s)", p, ip)
			x, _ := o.series(src, ip.String())
			why, err := judgePath(x, exp.window, pe)
			if err != nil {
				return false, "", fmt.Errorf("%s: %w", label, err)
			}
			if why != "" {
				pending = append(pending, label+": "+why)
			}
		}
	}
	for _, node := range slices.Sorted(maps.Keys(exp.loss)) {
		le := exp.loss[node]
		dst, ok := exp.agent(node)
		if !ok {
			return false, "", fmt.Errorf("loss towards %s: no agent pod there", node)
		}
		var sent, lost int64
		for _, src := range exp.agents {
			if src.Node == node {
				continue
			}
			for _, ip := range dst.IPs {
				x, _ := o.series(src, ip.String())
				s, l := echoesInWindow(x, exp.window)
				sent, lost = sent+s, lost+l
			}
		}
		switch {
		case lost < le.minLost:
			pending = append(pending, fmt.Sprintf("loss towards %s: %d of %d echoes lost so far", node, lost, sent))
		case sent < le.minEchoes:
			pending = append(pending, fmt.Sprintf("loss towards %s: %d echoes so far, want %d", node, sent, le.minEchoes))
		case le.minEchoes > 0:
			ratio := float64(lost) / float64(sent)
			if ratio < le.min || ratio > le.max {
				return false, "", fmt.Errorf("loss towards %s: %.3f over %d echoes, want %.2f-%.2f", node, ratio, sent, le.min, le.max)
			}
		}
	}
	if len(pending) > 0 {
		if len(pending) > 6 {
			pending = append(pending[:6], fmt.Sprintf("... and %d more", len(pending)-6))
		}
		return false, strings.Join(pending, "; "), nil
	}
	return true, "", nil
}

// judgePath returns "" when the series meets pe in the window, what is missing otherwise,
// and an error when a stable expectation was violated.
func judgePath(x simcluster.Series, window time.Time, pe pathExpect) (string, error) {
	rounds := x.Since(window)
	var status []simcluster.Round
	for _, r := range rounds {
		if r.Status >= 0 {
			status = append(status, r)
		}
	}
	if pe.stable {
		for _, r := range status {
			if (r.Status == 1) != pe.reachable {
				return "", fmt.Errorf("status %d at %s, want %s throughout", r.Status, r.Time.Format("15:04:05.000"), reach(pe.reachable))
			}
		}
	}
	minRounds := max(pe.minRounds, 1)
	if len(status) < minRounds {
		return fmt.Sprintf("%d rounds, want %d", len(status), minRounds), nil
	}
	last := status[len(status)-1]
	if (last.Status == 1) != pe.reachable {
		return fmt.Sprintf("status %d, want %s", last.Status, reach(pe.reachable)), nil
	}
	if !pe.reachable && pe.errorType != "" {
		base, _ := x.Before(window)
		if last.Errors[pe.errorType] <= base.Errors[pe.errorType] {
			return fmt.Sprintf("no new error.type=%s (errors %v)", pe.errorType, last.Errors), nil
		}
	}
	if pe.minRTT > 0 || pe.maxRTT > 0 {
		mean, n, ok := meanRTT(x, window)
		if !ok || n < 3 {
			return fmt.Sprintf("%d RTT samples in the window, want 3", n), nil
		}
		if pe.minRTT > 0 && mean < pe.minRTT {
			return fmt.Sprintf("mean RTT %v < %v over %d replies", mean, pe.minRTT, n), nil
		}
		if pe.maxRTT > 0 && mean > pe.maxRTT {
			return fmt.Sprintf("mean RTT %v > %v over %d replies", mean, pe.maxRTT, n), nil
		}
	}
	return "", nil
}

func reach(b bool) string {
	if b {
		return "reachable (1)"
	}
	return "unreachable (0)"
}

// meanRTT is the mean of the RTTs recorded in the window: the difference of the cumulative
// histogram's sum and count between the last round before the window (or the first one in
// it) and the latest round.
func meanRTT(x simcluster.Series, window time.Time) (time.Duration, uint64, bool) {
	var in []simcluster.Round
	for _, r := range x.Since(window) {
		if r.HasRTT {
			in = append(in, r)
		}
	}
	if len(in) == 0 {
		return 0, 0, false
	}
	base, ok := x.Before(window)
	if !ok || !base.HasRTT {
		if len(in) < 2 {
			return 0, 0, false
		}
		base, in = in[0], in[1:]
	}
	last := in[len(in)-1]
	if last.RTTCount < base.RTTCount {
		return 0, 0, false // the agent restarted its series
	}
	n := last.RTTCount - base.RTTCount
	if n == 0 {
		return 0, 0, false
	}
	return time.Duration((last.RTTSum - base.RTTSum) / float64(n) * float64(time.Second)), n, true
}

// echoesInWindow returns the echoes sent and lost in the window (cumulative sums' deltas).
func echoesInWindow(x simcluster.Series, window time.Time) (sent, lost int64) {
	var in []simcluster.Round
	for _, r := range x.Since(window) {
		if r.Sent >= 0 && r.Lost >= 0 {
			in = append(in, r)
		}
	}
	if len(in) == 0 {
		return 0, 0
	}
	base, ok := x.Before(window)
	if !ok || base.Sent < 0 || base.Lost < 0 {
		if len(in) < 2 {
			return 0, 0
		}
		base, in = in[0], in[1:]
	}
	last := in[len(in)-1]
	if last.Sent < base.Sent {
		return 0, 0
	}
	return last.Sent - base.Sent, last.Lost - base.Lost
}
