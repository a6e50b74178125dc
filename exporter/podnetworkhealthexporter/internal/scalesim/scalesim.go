// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package scalesim drives the gateway's real decision code (decode, verdict, plan, writequeue)
// with the real sampling planner over simulated hours at cluster sizes no test machine can
// host, and measures what the scale model bounds: live objects, API writes per second,
// the time from a dead target to Unreachable, gateway memory and exported series. Time is
// simulated; nothing sleeps. `make bench` prints its figures (BENCH lines), and a small
// configuration runs in `make test`.
package scalesim // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/scalesim"

import (
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/decode"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/planner"
)

// Config describes one simulated cluster. Zero fields take the shipped defaults.
type Config struct {
	N     int
	Zones int // default 3
	// K rotating and M stable peers per source per round (defaults 3 and 1, as shipped).
	K, M int
	// ProbeBudget (probes/s, default 1000) and BaseInterval (default 10s) as in agent.yaml.
	ProbeBudget  float64
	BaseInterval time.Duration
	// Duration simulated (default 2h); the target dies at FaultAt (default Duration/2) and
	// stays dead.
	Duration, FaultAt time.Duration
	// Delivery is the delay from a probe round to the gateway's Observe: the probe timeout
	// plus the agent's batch timeout (default 2s + 1s).
	Delivery time.Duration
	// WritesPerSecond is the API write budget (default 5, burst 10).
	WritesPerSecond float64
	// Engine overrides the engine configuration (zero: the exporter's defaults).
	Engine verdict.Config
	// PairSeries and TargetSeries: series the gateway exports per stable pair and per
	// target family (defaults 27 and 2; see docs/telemetry-contract.md: status, loss ratio,
	// jitter, sent, lost, and the duration histogram in classic buckets - explicit_buckets'
	// 19 bounds, so 20 bucket series, sum and count; the two per-target gauges).
	PairSeries, TargetSeries int
}

func (c Config) withDefaults() Config {
	if c.Zones <= 0 {
		c.Zones = 3
	}
	if c.K <= 0 {
		c.K = 3
	}
	if c.M < 0 {
		c.M = 0
	} else if c.M == 0 {
		c.M = 1
	}
	if c.ProbeBudget <= 0 {
		c.ProbeBudget = 1000
	}
	if c.BaseInterval <= 0 {
		c.BaseInterval = 10 * time.Second
	}
	if c.Duration <= 0 {
		c.Duration = 2 * time.Hour
	}
	if c.FaultAt <= 0 {
		c.FaultAt = c.Duration / 2
	}
	if c.Delivery <= 0 {
		c.Delivery = 3 * time.Second
	}
	if c.WritesPerSecond <= 0 {
		c.WritesPerSecond = 5
	}
	if c.PairSeries <= 0 {
		c.PairSeries = 5 + (19 + 1) + 2
	}
	if c.TargetSeries <= 0 {
		c.TargetSeries = 2
	}
	return c
}

// Result holds the measured figures.
type Result struct {
	N        int
	Interval time.Duration
	Rounds   int
	// Observations fed to the engine.
	Observations int
	// Objects live at the end; ObjectsMax the most at any time.
	Objects, ObjectsMax int
	// Writes: API requests made (a create is two: create and status update); per second
	// over the whole run, and the most pending at any time (queue backlog).
	Writes        int
	WritesPerSec  float64
	MaxBacklog    int
	PendingAtEnd  int
	WritesByPrio  [writequeue.NumPriorities]int
	Heartbeat     time.Duration // heartbeat interval in force at the end
	EventsEmitted int
	// DeadTargetIntervals: probe intervals from the fault to the target's Unreachable
	// verdict in the engine; DeadPairWrittenIntervals: to the stable pair's Unreachable
	// object being written through the budget.
	DeadTargetIntervals, DeadPairWrittenIntervals float64
	// FalseUnreachable counts targets other than the dead one judged Unreachable, and
	// NodesMarked the nodes marked at the end besides the dead target's.
	FalseUnreachable, OtherNodesMarked int
	// HeapMiB: live heap after GC held by the gateway state (engine, decoder of the stable
	// streams, write queue), measured as the difference to before it was built.
	HeapMiB float64
	// Series: what the gateway exports (stable pairs seen in the last 5 minutes and the
	// per-target series); ReferenceSeries: the pair-per-series model (every pair probed in
	// the last 5 minutes, the Prometheus exporter's metric_expiration).
	Series, ReferenceSeries int
	// PairsSeenInTTL and PairsSeenTotal: distinct pairs probed in the last target_ttl and
	// over the whole run (the object and stream counts of the pair-per-object model).
	PairsSeenInTTL, PairsSeenTotal int
}

type member struct {
	id   string
	src  observation.Source
	tgt  observation.Target
	node string
}

type delivery struct {
	at  time.Time
	obs []observation.Observation
}

// write is what the simulated writer holds per key.
type write struct {
	requests int
	verdict  observation.Verdict
	pair     observation.PairKey
}

// Run simulates one cluster.
func Run(cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	members := make([]member, cfg.N)
	pm := make([]planner.Member, cfg.N)
	index := map[string]int{}
	for i := range members {
		id := fmt.Sprintf("uid-%05d", i)
		node := fmt.Sprintf("node-%05d", i)
		zone := fmt.Sprintf("zone-%d", i%cfg.Zones)
		members[i] = member{
			id:   id,
			node: node,
			src:  observation.Source{Namespace: "netpulse", Name: "agent-" + id[4:], UID: id, Node: node},
			tgt: observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: "agent-" + id[4:], UID: id, Node: node, Zone: zone,
				Address: fmt.Sprintf("10.%d.%d.%d", i/65536, (i/256)%256, i%256)},
		}
		pm[i] = planner.Member{ID: id, Node: node, Zone: zone}
		index[id] = i
	}
	probePlan, err := planner.New(pm, planner.Config{K: cfg.K, Stable: cfg.M, ProbeBudget: cfg.ProbeBudget, BaseInterval: cfg.BaseInterval})
	if err != nil {
		return Result{}, err
	}
	iv := probePlan.Interval()
	res := Result{N: cfg.N, Interval: iv}

	ecfg := cfg.Engine
	ecfg.WritesPerSecond = cfg.WritesPerSecond
	e := plan.New(ecfg)
	q := writequeue.New[write]()
	budget := writequeue.NewBudget(cfg.WritesPerSecond, 10)
	nodes := map[string]*verdict.NodeCondition{}
	for _, m := range members {
		nodes[m.node] = nil
	}

	// Sources fire at round*iv + jitter: process them in jitter order.
	order := make([]int, cfg.N)
	for i := range order {
		order[i] = i
	}
	jitter := make([]time.Duration, cfg.N)
	for i, m := range members {
		jitter[i] = probePlan.Jitter(m.id)
	}
	slices.SortFunc(order, func(a, b int) int { return int(jitter[a] - jitter[b]) })

	dead := cfg.N / 3
	faultAt := t0.Add(cfg.FaultAt)
	deadTarget := verdict.TargetKeyOf(&observation.Observation{Target: members[dead].tgt})
	var deadPairs []observation.PairKey // stable pairs towards the dead target
	rtt := observation.NewHistogram(8)
	rtt.RecordN(0.00025, 3)

	type pairID struct{ s, t int32 }
	lastProbed := map[pairID]time.Time{}
	var pending []delivery
	pendingHead := 0
	end := t0.Add(cfg.Duration)
	nextTick := t0.Add(time.Second)
	tick := 0
	seq := 0
	targetUnreachableAt, pairWrittenAt := time.Time{}, time.Time{}
	owed := 0 // requests of a popped write still to be paid from the budget

	// step runs the gateway up to now: deliveries, reconciles each second, node
	// judgement every 5 s, the writer draining the queue within the budget.
	step := func(now time.Time) {
		for !nextTick.After(now) {
			at := nextTick
			for pendingHead < len(pending) && !pending[pendingHead].at.After(at) {
				d := pending[pendingHead]
				pending[pendingHead] = delivery{}
				pendingHead++
				res.Observations += len(d.obs)
				e.Observe(d.obs, d.at)
			}
			r := e.Reconcile(at)
			res.Heartbeat = r.Heartbeat
			for _, w := range r.Objects {
				key := "pnh/" + w.Key.String()
				reqs := 1
				if w.Reason == plan.ReasonInitial {
					reqs = 2
				}
				q.Set(key, writequeue.Priority(w.Priority), write{requests: reqs, verdict: w.Summary.Verdict, pair: w.Key}, at)
			}
			for range r.Events {
				seq++
				q.Set(fmt.Sprintf("event/%d", seq), writequeue.Event, write{requests: 1}, at)
				res.EventsEmitted++
			}
			for _, c := range r.TargetChanges {
				if c.Verdict != observation.VerdictUnreachable {
					continue
				}
				if c.Key == deadTarget {
					if targetUnreachableAt.IsZero() && !at.Before(faultAt) {
						targetUnreachableAt = at
					}
				} else {
					res.FalseUnreachable++
				}
			}
			if tick%5 == 0 {
				d := e.ReconcileNodes(at, nodes, verdict.NodeConfig{})
				for _, w := range d.Writes {
					q.Set("node/"+w.Node, writequeue.Priority(w.Priority), write{requests: 1}, at)
					c := w.Condition
					nodes[w.Node] = &c
				}
			}
			res.MaxBacklog = max(res.MaxBacklog, q.Len())
			// The writer: as many requests as the budget allows this second; the second
			// request of a create (its status update) is paid before the next item.
			for owed > 0 {
				if ok, _ := budget.Take(at); !ok {
					break
				}
				owed--
			}
			for owed == 0 {
				if q.Len() == 0 {
					break
				}
				if ok, _ := budget.Take(at); !ok {
					break
				}
				key, p, w, ok := q.Pop(at)
				if !ok {
					break
				}
				q.Done(key)
				res.Writes += w.requests
				res.WritesByPrio[p]++
				owed = w.requests - 1
				if w.verdict == observation.VerdictUnreachable && pairWrittenAt.IsZero() && slices.Contains(deadPairs, w.pair) {
					pairWrittenAt = at
				}
			}
			res.ObjectsMax = max(res.ObjectsMax, e.Objects())
			nextTick = nextTick.Add(time.Second)
			tick++
		}
	}

	var bufObs []observation.Observation
	for round := probePlan.Round(t0); ; round++ {
		roundStart := time.Unix(0, int64(round)*int64(iv))
		if roundStart.After(end) {
			break
		}
		res.Rounds++
		for _, i := range order {
			at := roundStart.Add(jitter[i])
			if at.Before(t0) || at.After(end) {
				continue
			}
			step(at)
			src := members[i]
			targets := probePlan.Targets(src.id, round)
			stable := probePlan.StableTargets(src.id)
			bufObs = make([]observation.Observation, 0, len(targets))
			for _, tm := range targets {
				j := index[tm.ID]
				isStable := slices.ContainsFunc(stable, func(s planner.Member) bool { return s.ID == tm.ID })
				o := observation.Observation{Source: src.src, Target: members[j].tgt, ProbeType: "icmp", Timestamp: at, Stable: isStable, Sent: 3}
				if j == dead && !at.Before(faultAt) {
					o.Lost, o.ErrorType, o.Message = 3, "timeout", "icmp "+members[j].tgt.Address+": timeout (3 of 3 echoes lost)"
				} else {
					o.Success, o.RTT = true, rtt
				}
				if j == dead && isStable {
					k := observation.KeyOf(&o)
					if !slices.Contains(deadPairs, k) {
						deadPairs = append(deadPairs, k)
					}
				}
				bufObs = append(bufObs, o)
				lastProbed[pairID{int32(i), int32(j)}] = at
			}
			pending = append(pending, delivery{at: at.Add(cfg.Delivery), obs: bufObs})
			if pendingHead > 4096 && pendingHead > len(pending)/2 {
				pending = append(pending[:0:0], pending[pendingHead:]...)
				pendingHead = 0
			}
		}
	}
	step(end.Add(cfg.Delivery + time.Second))

	res.Objects = e.Objects()
	res.PendingAtEnd = q.Len()
	res.WritesPerSec = float64(res.Writes) / cfg.Duration.Seconds()
	if !targetUnreachableAt.IsZero() {
		res.DeadTargetIntervals = targetUnreachableAt.Sub(faultAt).Seconds() / iv.Seconds()
	}
	if !pairWrittenAt.IsZero() {
		res.DeadPairWrittenIntervals = pairWrittenAt.Sub(faultAt).Seconds() / iv.Seconds()
	}
	for _, n := range e.BadNodes() {
		if n != members[dead].node {
			res.OtherNodesMarked++
		}
	}

	// Series: stable pairs and targets seen in the last 5 minutes at the gateway, against
	// every pair probed in the last 5 minutes.
	const expiration = 5 * time.Minute
	stablePairs := 0
	for _, i := range order {
		stablePairs += len(probePlan.StableTargets(members[i].id))
	}
	res.Series = stablePairs*cfg.PairSeries + e.Stats().Targets*cfg.TargetSeries
	ttl := ecfg.TargetTTL
	if ttl <= 0 {
		ttl = verdict.DefaultTargetTTL
	}
	for _, at := range lastProbed {
		if end.Sub(at) <= expiration {
			res.ReferenceSeries += cfg.PairSeries
		}
		if end.Sub(at) <= ttl {
			res.PairsSeenInTTL++
		}
	}
	res.PairsSeenTotal = len(lastProbed)
	clear(lastProbed)
	lastProbed = nil
	pending = nil
	bufObs = nil

	// The decoder's share: the stable streams of every source (rotating pairs' points are
	// self-contained and leave no state).
	dec := decode.NewDecoder(decode.DecoderConfig{FirstSightMaxAge: time.Minute, StreamTTL: 3 * time.Minute})
	feedStableStreams(dec, members, probePlan, end)

	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	res.HeapMiB = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
	runtime.KeepAlive(e)
	runtime.KeepAlive(q)
	runtime.KeepAlive(dec)
	runtime.KeepAlive(probePlan)
	return res, nil
}
