// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

// The sampled scenarios run on a cluster where a full mesh is impossible
// (NETPULSE_E2E_NODES=16 in `make test`'s second pass): each agent probes its one stable
// ring successor and k=3 rotating peers a round, 4 of 15 peers. They prove, end to end
// with the unchanged deploy/ configs, what the scale model promises: the object set is the
// stable pairs (N objects, not N·(N-1)), every target still gets a verdict from all its
// observers, a dead target is judged within a few rounds, gateway series stay O(N), and
// silence reads as silence.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/livematrix"
	"github.com/netpulse/netpulse/internal/viewserver"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// stablePeers is M, the pod_probe receiver's stable_peers default (agent.yaml keeps it).
const stablePeers = 1

// requireSampled returns the shared cluster when it is large enough that probing is
// sampled (k + M < N - 1); otherwise the test is skipped with how to run it.
func requireSampled(t *testing.T) *env {
	t.Helper()
	e := requireEnv(t)
	if nodes < 8 {
		t.Skipf("a sampled scenario needs %s >= 8 (this run has %d nodes, a full mesh); `make test` runs it with 16", nodesEnv, nodes)
	}
	return e
}

// ring is the stable pairs as the object set shows them: from node -> to node.
type ring map[string]string

func (r ring) pred(node string) string {
	for from, to := range r {
		if to == node {
			return from
		}
	}
	return ""
}

// sampledHealthy waits until the mesh is healthy as sampling shows it, and every target
// and observer reads 1 in the gateway's telemetry. The first time (a fresh cluster) the
// object set must be exactly the stable pairs - every agent the source of M objects and
// the target of M, all Reachable with latency - and that ring is remembered; later
// baselines accept objects that earlier scenarios' failures left (kept
// failing_pair_retention for their outage history, bounded by (M+1)·N) as long as every
// object reads Reachable and every stable pair has one.
func (e *env) sampledHealthy(t *testing.T, name string, start time.Time, timeout time.Duration) ring {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var why string
	for {
		r, w, err := e.readRing(start, e.ring)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w == "" {
			exp := e.expect(name, start)
			exp.targetsOthers = true
			for _, a := range exp.agents {
				exp.observerReporting[a.Node] = true
			}
			ok, w2, err := gatewayChecker{}.check(exp)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if ok {
				t.Logf("E2E healthy %s: %.1fs (%d stable pairs for %d agents; every target judged Reachable by the gateway)", name, time.Since(start).Seconds(), len(r), len(exp.agents))
				e.ring = r
				return r
			}
			w = w2
		}
		why = w
		if time.Now().After(deadline) {
			t.Fatalf("%s: not healthy within %v: %s", name, timeout, why)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readRing reads the object set: "" and the ring when it is healthy (see sampledHealthy;
// known is the ring remembered, nil on a fresh cluster), else what is missing.
func (e *env) readRing(start time.Time, known ring) (ring, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	objs, err := e.api.objects(ctx)
	if err != nil {
		return nil, "list: " + err.Error(), nil
	}
	agents := e.cl.Agents()
	byPod := map[string]simcluster.Agent{}
	for _, a := range agents {
		byPod[a.Pod] = a
	}
	r := ring{}
	asTarget := map[string]int{}
	var problems []string
	if bound := sampledBound(len(agents)); len(objs) > bound {
		return nil, "", fmt.Errorf("%d objects, more than the bound (M+1)·N = %d", len(objs), bound)
	}
	for _, o := range objs {
		src, ok1 := byPod[o.Spec.SourcePodRef.Name]
		if o.Spec.TargetPodRef == nil {
			problems = append(problems, o.Name+": not a pod target")
			continue
		}
		dst, ok2 := byPod[o.Spec.TargetPodRef.Name]
		if !ok1 || !ok2 {
			problems = append(problems, o.Name+": names a pod that is not a current agent")
			continue
		}
		pe := pathExpect{reachable: true, maxP50: healthyRTT}
		if known != nil {
			pe.maxP50 = 0 // a kept object's figures may predate the baseline
		}
		if why, err := judgeObject(o, src, dst, &expectation{start: start, outageSince: start}, pe); err != nil {
			return nil, "", fmt.Errorf("%s: %w", o.Name, err)
		} else if why != "" {
			problems = append(problems, fmt.Sprintf("%s→%s: %s", src.Node, dst.Node, why))
		}
		if known != nil {
			if known[src.Node] == dst.Node {
				r[src.Node] = dst.Node
			}
			continue
		}
		if _, dup := r[src.Node]; dup {
			problems = append(problems, fmt.Sprintf("%s is the source of more than %d object", src.Node, stablePeers))
		}
		r[src.Node] = dst.Node
		asTarget[dst.Node]++
	}
	for _, a := range agents {
		if _, ok := r[a.Node]; !ok {
			problems = append(problems, a.Node+": no object for its stable pair")
		}
		if known == nil && asTarget[a.Node] != stablePeers {
			problems = append(problems, fmt.Sprintf("%s is the target of %d objects", a.Node, asTarget[a.Node]))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		if len(problems) > 6 {
			problems = append(problems[:6], fmt.Sprintf("... and %d more", len(problems)-6))
		}
		return nil, strings.Join(problems, "; "), nil
	}
	return r, "", nil
}

// ring sets pe on every stable pair for which keep is true.
func (x *expectation) ring(r ring, pe pathExpect, keep func(pair) bool) *expectation {
	for from, to := range r {
		p := pair{from, to}
		if keep == nil || keep(p) {
			x.paths[p] = pe
		}
	}
	return x
}

// sampledBound is the object bound of the engine: (M+1)·N (stable pairs plus at most
// max(16, N) followed failing pairs).
func sampledBound(n int) int { return stablePeers*n + max(16, n) }

// TestSampledHealthy: 16 agents, 4 of 15 peers a round. The gateway converges on exactly
// N objects (the stable pairs; a mesh would be N·(N-1) = 240), judges every target
// Reachable from all its observers, exports per-pair series for the stable pairs only, and
// in steady state spends almost nothing of its write budget.
func TestSampledHealthy(t *testing.T) {
	e := requireSampled(t)
	e.ring = nil // this scenario asserts the exact object set of a fresh cluster
	r := e.sampledHealthy(t, "sampled", e.agentsStarted, convergeTimeout)
	n := len(e.cl.Agents())
	if len(r) != stablePeers*n {
		t.Fatalf("%d objects, want %d", len(r), stablePeers*n)
	}
	t.Logf("E2E sampled objects: %d for %d agents (a full mesh would write %d)", len(r), n, n*(n-1))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Series at the gateway's prometheus exporter: per-pair series only for stable pairs.
	exported, err := scrape(ctx, gatewayExportURL)
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[string]bool{}
	for _, s := range exported {
		if strings.HasPrefix(s.name, "netpulse_") && s.labels["destination_address"] != "" {
			pairs[s.labels["k8s_pod_name"]+"→"+s.labels["destination_address"]] = true
		}
	}
	// M·N·families stable pairs; the prometheus exporter keeps a series 5 minutes after its
	// last point (metric_expiration), so the stable pairs of a ring that moved while the
	// agents joined are still there: at most as many again.
	families := len(e.cl.Agents()[0].IPs)
	seriesBound := (stablePeers + 1) * n * families
	if len(pairs) < stablePeers*n*families || len(pairs) > seriesBound {
		t.Errorf("the gateway exports %d (source pod, destination address) pairs, want %d..%d", len(pairs), stablePeers*n*families, seriesBound)
	}
	t.Logf("E2E sampled exported series: %d netpulse series over %d (source, destination) pairs (M·N·families = %d, bound %d; unfiltered the rotation reaches %d pairs)",
		len(family(exported, "netpulse_")), len(pairs), stablePeers*n*families, seriesBound, n*(n-1)*families)

	// Steady-state writes: the API writes of the next 20 s.
	writes := func() float64 {
		all, err := scrape(ctx, gatewayTelemetryURL)
		if err != nil {
			t.Fatal(err)
		}
		return sum(family(all, metricAPIWrites))
	}
	// Loss in the same window: a healthy cluster reads healthy. The exported stable-pair
	// echo counters by address family, and the kernel's neighbour-table overflows (the cause
	// of false IPv6 loss once N simulated nodes share one kernel's NDP table; see
	// simcluster's sizeNeighbourTables).
	echoes := func() map[string]echoCounter {
		all, err := scrape(ctx, gatewayExportURL)
		if err != nil {
			t.Fatal(err)
		}
		return echoCounts(all)
	}
	full4a, full6a, err := simcluster.NeighbourTableFulls()
	if err != nil {
		t.Fatal(err)
	}
	e0 := echoes()
	w0, t0 := writes(), time.Now()
	time.Sleep(20 * time.Second)
	w1, t1 := writes(), time.Now()
	e1 := echoes()
	full4b, full6b, err := simcluster.NeighbourTableFulls()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("E2E sampled kernel neighbour-table overflows in the window: IPv4 %d, IPv6 %d", full4b-full4a, full6b-full6a)
	if full4b != full4a || full6b != full6a {
		t.Errorf("the kernel's neighbour tables overflowed during a healthy window (IPv4 %d, IPv6 %d times): packets were dropped for lack of an entry",
			full4b-full4a, full6b-full6a)
	}
	delta := echoDelta(e0, e1)
	for _, fam := range []string{"ipv4", "ipv6"} {
		sent, lost := delta[fam][0], delta[fam][1]
		t.Logf("E2E sampled healthy loss %s: %.0f of %.0f echoes on the stable pairs in %.0fs", fam, lost, sent, t1.Sub(t0).Seconds())
		// Below 1 %: an echo may time out on a starved CI machine; a systematic cause
		// (the 6-60 % of an overflowing neighbour table) may not.
		if sent == 0 || lost > 0.01*sent {
			t.Errorf("healthy cluster, %s: %.0f of %.0f echoes lost", fam, lost, sent)
		}
	}
	rate := (w1 - w0) / t1.Sub(t0).Seconds()
	t.Logf("E2E sampled steady writes: %.0f API writes in %.0fs (%.2f/s; budget qps 5/s); %.0f since the gateway started",
		w1-w0, t1.Sub(t0).Seconds(), rate, w1)
	if rate > 5 {
		t.Errorf("%.2f API writes/s in a healthy steady state, above the 5/s budget", rate)
	}
	if _, w, err := e.readRing(e.agentsStarted, nil); err != nil || w != "" {
		t.Errorf("the object set moved in steady state: %v %s", err, w)
	}
}

// TestSampledLiveMatrix: the gateway's connectivity view fills the matrix from every
// observation, not only from the N stable-pair objects: within a few rotations (k=3 of 15
// peers a round: 5 rounds, 5 s) every one of the N·(N-1) cells has an object or the
// newest probe result the leader received, and in a healthy cluster every such result
// answered and is recent.
func TestSampledLiveMatrix(t *testing.T) {
	e := requireSampled(t)
	e.sampledHealthy(t, "live-baseline", time.Now(), convergeTimeout)
	n := len(e.cl.Agents())
	url := "http://" + net.JoinHostPort(simcluster.HostIPv4.String(), "8089") + "/api/v1/matrix"
	var mx viewserver.MatrixResponse
	deadline := time.Now().Add(30 * time.Second)
	for {
		mx = viewserver.MatrixResponse{}
		err := getViewJSON(url, &mx)
		if err == nil && mx.Live.State == livematrix.StateLive && len(mx.Cells) == n*(n-1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view's matrix is not dense 30 s after a healthy baseline: %d of %d cells, %d live only, live state %q (%s), err %v",
				len(mx.Cells), n*(n-1), mx.LiveCells, mx.Live.State, mx.Live.Message, err)
		}
		time.Sleep(time.Second)
	}
	objects := 0
	for _, c := range mx.Cells {
		o, tg := mx.Nodes[c.O].Name, mx.Nodes[c.T].Name
		if c.Pairs > 0 {
			objects++
		}
		if c.Live == nil {
			if c.Pairs == 0 {
				t.Errorf("%s -> %s: a cell without an object nor a live result", o, tg)
			}
			continue
		}
		if !c.Live.Reachable || c.Live.AgeSeconds > 60 {
			t.Errorf("%s -> %s: live result %+v in a healthy cluster", o, tg, *c.Live)
		}
	}
	if mx.LiveCells < n*(n-1)-(stablePeers+1)*n {
		t.Errorf("%d cells filled by live results only, want at least %d", mx.LiveCells, n*(n-1)-(stablePeers+1)*n)
	}
	t.Logf("E2E sampled live matrix: %d of %d cells filled (%d with objects, %d by live results only; the store holds %d cells of %d observers)",
		len(mx.Cells), n*(n-1), objects, mx.LiveCells, mx.Live.Cells, mx.Live.Rows)
}

// getViewJSON GETs url and decodes its JSON answer (an error for any status but 200).
func getViewJSON(url string, into any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %.200s", url, resp.Status, body)
	}
	return json.Unmarshal(body, into)
}

// TestSampledPartition: one node of 16 is cut off. Its target verdict turns Unreachable at
// the gateway within a few rounds although only 4 observers probe it each round, the one
// object towards it (its stable pair) reads Unreachable with an ongoing outage, its own
// object reads ObserverUnhealthy, the node condition marks it and nothing else, no other
// target is ever judged Unreachable, and the objects stay within (M+1)·N. Healing restores
// all of it and ends the outage.
func TestSampledPartition(t *testing.T) {
	e := requireSampled(t)
	r := e.sampledHealthy(t, "baseline", time.Now(), convergeTimeout)
	node := fmt.Sprintf("node-%d", nodes/2)
	e.healOnCleanup(t, node)
	bound := sampledBound(nodes)
	e.api.resetMaxObjects()

	start := time.Now()
	if err := e.cl.Partition(node); err != nil {
		t.Fatal(err)
	}
	towardsNode := pair{r.pred(node), node}
	exp := e.expect("sampled-partition", start).
		ring(r, pathExpect{reachable: true, stable: true}, func(p pair) bool { return p.from != node && p.to != node })
	exp.paths[towardsNode] = pathExpect{reachable: false, ongoingOutage: true}
	exp.paths[pair{node, r[node]}] = pathExpect{observerUnhealthy: true, ongoingOutage: true}
	exp.maxObjects = bound
	exp.targetsOthers = true
	exp.targetReachable[node] = false
	exp.nodeProblem[node] = true
	exp.nodeProblemOthers = true
	exp.events = []eventExpect{{towardsNode, v1alpha1.EventOutageDetected}}

	// The per-target verdict alone first: that is the "two rounds at any size" figure.
	verdict := e.expect("sampled-partition (target verdict)", start)
	verdict.targetsOthers, verdict.targetReachable[node] = true, false
	d := e.await(t, "target verdict", verdict, detectTimeout)
	t.Logf("E2E sampled dead target: judged Unreachable %.1fs after the cut = %.1f probe intervals (rounds %v, plus agent and gateway batching of 1s each)",
		d.Seconds(), d.Seconds()/probeInterval.Seconds(), probeInterval)
	e.await(t, "detect", exp, detectTimeout)
	t.Logf("E2E sampled partition: at most %d objects during the fault (bound (M+1)·N = %d; a mesh has %d)", e.api.resetMaxObjects(), bound, nodes*(nodes-1))

	healed := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	rec := e.expect("sampled-partition", healed).
		ring(r, pathExpect{reachable: true}, nil)
	rec.paths[towardsNode] = pathExpect{reachable: true, endedOutage: true}
	rec.outageSince = start
	rec.maxObjects = bound
	rec.targetsOthers = true
	rec.targetReachable[node] = true
	rec.nodeProblem[node] = false
	rec.nodeProblemOthers = true
	rec.events = []eventExpect{{towardsNode, v1alpha1.EventRestored}}
	e.await(t, "recover", rec, recoverTimeout)
}

// TestSampledSilentAgent: the agent on one node stops reaching the gateway while its pod
// stays Ready and its network works (nft drops its OTLP export). Its object reads
// Unknown / ObserverSilent within a few rounds, the gateway's observer_reporting gauge
// reads 0 for it, no target - not even its own pod, which still answers - is judged
// Unreachable, and the object is kept beyond target_ttl (it is not deleted while its pod
// exists). When it reports again its object reads Reachable.
func TestSampledSilentAgent(t *testing.T) {
	e := requireSampled(t)
	r := e.sampledHealthy(t, "baseline", time.Now(), convergeTimeout)
	node := fmt.Sprintf("node-%d", nodes/2+2)
	e.healOnCleanup(t, node)
	agent, ok := e.cl.Agent(node)
	if !ok {
		t.Fatalf("no agent on %s", node)
	}

	start := time.Now()
	if err := e.cl.Mute(node); err != nil {
		t.Fatal(err)
	}
	own := pair{node, r[node]}
	exp := e.expect("sampled-silent", start).
		ring(r, pathExpect{reachable: true, stable: true}, func(p pair) bool { return p != own })
	exp.paths[own] = pathExpect{observerSilent: true, mustExist: true}
	exp.maxObjects = sampledBound(nodes)
	exp.targetsOthers = true
	exp.observerReporting[node] = false
	exp.nodeProblemOthers = true
	d := e.await(t, "detect", exp, detectTimeout)
	t.Logf("E2E sampled silent agent %s: its object reads ObserverSilent %.1fs after it fell silent = %.1f probe intervals", agent.Pod, d.Seconds(), d.Seconds()/probeInterval.Seconds())
	if a, _ := e.cl.Agent(node); !a.Ready || a.UID != agent.UID {
		t.Fatalf("the agent pod on %s changed (ready %v, uid %s) - the scenario is about a pod that stays", node, a.Ready, a.UID)
	}
	// Past target_ttl (the e2e gateway's is 1m), the object is still there and still says so.
	e.hold(t, "beyond target_ttl", exp, targetTTL+15*time.Second)

	back := time.Now()
	if err := e.cl.Heal(node); err != nil {
		t.Fatal(err)
	}
	rec := e.expect("sampled-silent", back).ring(r, pathExpect{reachable: true}, nil)
	rec.targetsOthers = true
	for _, a := range rec.agents {
		rec.observerReporting[a.Node] = true
	}
	e.await(t, "recover", rec, recoverTimeout)
}

// echoCounter is one exported ICMP echo counter series (sent or lost) and its network.type.
type echoCounter struct {
	family string
	lost   bool // else sent
	v      float64
}

// echoCounts returns the stable pairs' exported echo counters by series (name and labels).
func echoCounts(all []promSample) map[string]echoCounter {
	out := map[string]echoCounter{}
	for i, prefix := range []string{"netpulse_probe_packets_sent", "netpulse_probe_packets_lost"} {
		for _, s := range family(all, prefix) {
			keys := make([]string, 0, len(s.labels))
			for k, v := range s.labels {
				keys = append(keys, k+"="+v)
			}
			slices.Sort(keys)
			out[s.name+"{"+strings.Join(keys, ",")+"}"] = echoCounter{s.labels["network_type"], i == 1, s.value}
		}
	}
	return out
}

// echoDelta sums what each series present in both scrapes gained between them, as
// [sent, lost] by address family.
func echoDelta(before, after map[string]echoCounter) map[string][2]float64 {
	out := map[string][2]float64{}
	for k, a := range after {
		b, ok := before[k]
		if !ok || a.v < b.v {
			continue // new series, or a restarted counter
		}
		c := out[a.family]
		if a.lost {
			c[1] += a.v - b.v
		} else {
			c[0] += a.v - b.v
		}
		out[a.family] = c
	}
	return out
}
