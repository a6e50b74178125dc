// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package scalesim runs the gateway's shipped intake and decision code at cluster sizes
// no test machine can host, in simulated time (testing/synctest: nothing sleeps for real):
// N agents (syntheticagent.Agent) emit pod_probe's OTLP for the real sampling planner's
// rounds, with RTT jitter, per-echo loss and dual-stack pods; each batch passes the real
// k8s_net_attributes binding and admission (over an index of the simulated pods and
// nodes), the real decoder, and the real decision engine; the engine's object writes,
// Events and node conditions go through the real apply.Writer to fake clientsets that
// count every request and answer a share of updates with a conflict. One agent's node
// dies mid-run: its address stops answering and its agent stops reporting.
//
// It measures what the scale model bounds: live objects, API requests (peak per minute,
// backlog, drain after the fault), rounds from the fault to the engine's verdict and to
// the API write, and the gateway's live heap. `make bench` prints its figures (BENCH
// lines); a small configuration runs in `make test`.
package scalesim // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/scalesim"

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	pnhfake "github.com/netpulse/netpulse/api/client/clientset/versioned/fake"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/decode"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/k8sindex"
	"github.com/netpulse/netpulse/internal/planner"
	"github.com/netpulse/netpulse/internal/shard"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor"
	"github.com/netpulse/netpulse/testbed/syntheticagent"
)

// Namespace of the simulated agents.
const Namespace = "netpulse"

// Config describes one simulated cluster. Zero fields take the shipped defaults.
type Config struct {
	N     int
	Zones int // default 3
	// K rotating and M stable peers per source per round (defaults 3 and 1, as shipped).
	K, M int
	// ProbeBudget (probes/s, default 1000) and BaseInterval (default 10s) as in agent.yaml.
	ProbeBudget  float64
	BaseInterval time.Duration
	// Duration simulated (default 2h); the dead node's pod stops answering and its agent
	// stops reporting at FaultAt (default Duration/2), for good.
	Duration, FaultAt time.Duration
	// Delivery is the delay from a probe round to the gateway: the probe timeout plus the
	// agent's batch timeout (default 2s + 1s).
	Delivery time.Duration
	// Seed makes the RTTs, the losses and the injected conflicts reproducible.
	Seed uint64
	// LossRate is the share of echoes lost on every healthy path (default 0.002; < 0: none).
	LossRate float64
	// DualStackEvery: every n-th pod has an IPv6 address too, and dual-stack pairs are
	// probed over both families (default 4; < 0: single-stack).
	DualStackEvery int
	// ConflictRate is the share of updates (object and status) the fake API answers with
	// 409 Conflict (default 0.01; < 0: none).
	ConflictRate float64
	// QPS and Burst: the write budget (the exporter's defaults 5 and 10).
	QPS   float64
	Burst int
	// Engine overrides the engine configuration (zero: the exporter's defaults).
	Engine verdict.Config
	// MaxStableTargetsPerSource raises the admission's limit and the decoder's stream
	// bound with it (0: the shipped 16): the full-mesh reference needs N-1 stable targets.
	MaxStableTargetsPerSource int
	// FailoverAt, when > 0, crashes the writer then (its pending writes are lost) and a new
	// one takes over: a fresh decoder and engine, the engine resumed from what the fake
	// API holds (the exporter's persistedOf), a new apply.Writer with its own informer.
	FailoverAt time.Duration
	// RollAt, when > 0, rolls the agent DaemonSet then as its maxUnavailable of 10% does: 10
	// waves 30 s apart; each deletes a tenth of the pods (the garbage collector removes the
	// objects they own) and starts their replacements 10 s later with new UIDs, names,
	// addresses and fresh agents. The dead node's pod is not rolled. Peers keep probing a
	// deleted pod's addresses until its replacement runs (their watch lag, exaggerated).
	RollAt time.Duration
	// ZoneCutAt, when > 0, cuts zone-1 off the other zones then for ZoneCutFor (default 3
	// minutes): every echo between a node of zone-1 and a node of another zone is lost, in
	// both directions, while echoes within each side pass. The gateway judges zones as the
	// exporter does by default (zones.enabled, write_objects on shard 0).
	ZoneCutAt, ZoneCutFor time.Duration
	// WriteEveryChange disables the write-on-change policy's tolerances (any RTT or loss
	// change is written, no minimum interval between writes): the reference for writes.
	WriteEveryChange bool
	// LeaseFreshness: the exporter's freshness: lease (its default beside a summary): an
	// unchanged status is never rewritten (no heartbeat).
	LeaseFreshness bool
	// PairSeries and TargetSeries: series the gateway exports per stable pair and per
	// target family (defaults 27 and 2; see docs/telemetry-contract.md: status, loss ratio,
	// jitter, sent, lost, and the duration histogram in classic buckets - explicit_buckets'
	// 19 bounds, so 20 bucket series, sum and count; the two per-target gauges).
	PairSeries, TargetSeries int
	// Shards > 1 plays shard 0 of that many gateway shards (docs/sharding.md): every agent
	// sends it the points of the targets on shard 0's nodes (what its filter for shard 0
	// passes) and its heartbeat each round; the dead node is one of shard 0's. The figures
	// are that shard's: its objects, writes, detection and heap.
	Shards int
}

func (c Config) withDefaults() Config {
	if c.Zones <= 0 {
		c.Zones = 3
	}
	if c.K <= 0 {
		c.K = syntheticagent.ShippedK
	}
	if c.M < 0 {
		c.M = 0
	} else if c.M == 0 {
		c.M = syntheticagent.ShippedStablePeers
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
	if c.ZoneCutAt > 0 && c.ZoneCutFor <= 0 {
		c.ZoneCutFor = 3 * time.Minute
	}
	if c.Delivery <= 0 {
		c.Delivery = 3 * time.Second
	}
	if c.LossRate == 0 {
		c.LossRate = 0.002
	}
	if c.DualStackEvery == 0 {
		c.DualStackEvery = 4
	}
	if c.ConflictRate == 0 {
		c.ConflictRate = 0.01
	}
	if c.QPS <= 0 {
		c.QPS = 5
	}
	if c.Burst <= 0 {
		c.Burst = 10
	}
	if c.PairSeries <= 0 {
		c.PairSeries = 5 + (19 + 1) + 2
	}
	if c.TargetSeries <= 0 {
		c.TargetSeries = 3 // reachable, failing observers, gray loss ratio
	}
	return c
}

// Result holds the measured figures.
type Result struct {
	N        int
	Interval time.Duration
	Rounds   int
	// Batches the agents sent; DataPoints in them; Observations the decoder made of them.
	Batches, DataPoints, Observations int
	// DecodeSkipped: data points the decoder did not use (any reason); AdmissionRefused:
	// data points the admission removed. Both 0 in a correct run.
	DecodeSkipped, AdmissionRefused int
	// Objects live in the engine at the end; ObjectsMax the most at any time; APIObjects
	// the PodNetworkHealth objects the fake API holds at the end.
	Objects, ObjectsMax, APIObjects int
	// Requests by verb and resource ("update podnetworkhealths/status"), as the fake
	// clients received them (conflicts and retries included).
	Requests map[string]int
	// Writes: requests that change something (create, update, patch, delete);
	// WritesPerSec their mean over the run, PeakWritesPerMinute the most in one minute.
	Writes              int
	WritesPerSec        float64
	PeakWritesPerMinute int
	// WritesPerMinute: the writes of each simulated minute.
	WritesPerMinute []int
	// PlannedByReason: the object writes the engine planned, by reason (plan.Reason*,
	// "observer", "family", ...); a planned write replaces one of the same object still
	// queued, so these are at least the writes made.
	PlannedByReason map[string]int
	// Conflicts injected; FailedWrites the writer's write results with an error (each is
	// retried with back-off).
	Conflicts, FailedWrites int
	// MaxBacklog: most writes pending at a reconcile; PendingAtEnd at the end.
	MaxBacklog, PendingAtEnd int
	// DrainAfterFault: from the fault until no verdict or Event write is pending any more
	// (after the dead target's verdict writes were queued).
	DrainAfterFault time.Duration
	Heartbeat       time.Duration // heartbeat interval in force at the end
	EventsEmitted   int
	// DetectVerdictRounds: probe intervals from the fault to the dead target's Unreachable
	// verdict in the engine; DetectWriteRounds: to the fake API receiving the status
	// update that makes one of its stable pairs' objects Unreachable.
	DetectVerdictRounds, DetectWriteRounds float64
	// FalseUnreachable counts targets other than the dead one judged Unreachable (outside
	// a zone cut: ZoneCutUnreachable), and
	// OtherNodesMarked the nodes marked at the end besides the dead one.
	FalseUnreachable, OtherNodesMarked int
	// HeapMiB: live heap released when the gateway's state is dropped at the end (the
	// processor's index and admission table, the decoder, the engine, the writer with its
	// queue and informer cache); the agents and the fake API stay alive across the two
	// measurements. PeakRSSMiB: the whole test process's peak RSS (VmHWM), simulation
	// included.
	HeapMiB, PeakRSSMiB float64
	// Series: what the gateway exports (stable pairs seen in the last 5 minutes and the
	// per-target series, computed from the configured series per pair; not counted from
	// an exporter).
	Series int
	// PairsSeenInTTL and PairsSeenTotal: distinct (source, target address) pairs probed in
	// the last target_ttl and over the whole run.
	PairsSeenInTTL, PairsSeenTotal int
	// AfterFailover: requests by verb and resource in the 10 minutes after the failover;
	// BeforeFailover the same for the 10 minutes before it.
	AfterFailover, BeforeFailover map[string]int
	// RolledUnreachable: Unreachable verdicts of rolled pods (deleted or replaced); Roll:
	// requests by verb and resource from the roll's start to 10 minutes after its end.
	RolledUnreachable int
	Roll              map[string]int
	// SummaryWrites: the NetworkHealthSummary's status writes (inside Writes).
	// CompleteAt: from the start until the summary first read Complete=True (every
	// verdict written, the warm-up over), with PendingAtComplete writes still queued (first
	// writes of healthy pairs). CompleteAfterFault: from the fault until it read
	// Complete=True again with the dead target's verdicts written.
	SummaryWrites                  int
	CompleteAt, CompleteAfterFault time.Duration
	PendingAtComplete              int
	// TargetsAtComplete and UnknownAtComplete: the summary's targets, and those not
	// judged yet, when it first read Complete.
	TargetsAtComplete, UnknownAtComplete int
	// DetectSummaryRounds: probe intervals from the fault to the fake API receiving the
	// summary that names the dead node among the Unreachable targets' nodes.
	DetectSummaryRounds float64
	// The zone cut (ZoneCutAt): probe intervals from the cut to the gateway's zone
	// judgement naming a cut pair of zone-1 (ZoneCutJudgedRounds), and to the fake API
	// receiving a ZoneNetworkHealth of zone-1 that says Unreachable (ZoneCutWriteRounds);
	// from the cut's end to the judgement naming no cut pair (ZoneHealedRounds).
	// ZoneCutNodesMarked: the most nodes marked at once during the cut, the dead one aside
	// (the cut explains its edges: 0 expected). ZoneCutPairs: the most cut zone pairs at once.
	ZoneCutJudgedRounds, ZoneCutWriteRounds, ZoneHealedRounds float64
	ZoneCutNodesMarked, ZoneCutPairs                          int
	// ZoneCutUnreachable: target verdicts turned Unreachable from the cut until a minute
	// after it (not in FalseUnreachable): the rounds before the zone judgement localised
	// the cut, when a target fails from the other side and its votes are not yet set aside.
	ZoneCutUnreachable int
	// Wall is the real time the run took.
	Wall time.Duration
}

type member struct {
	// slot is the member's planner ID: its node's, so that a DaemonSet roll keeps the
	// plan (the agents' planners key on pod UIDs; keeping the plan leaves the roll's cost
	// to the gateway, which is what is measured).
	slot                 string
	id, name, node, zone string
	addrs                []string // IPv4, then IPv6 when dual-stack
	agent                *syntheticagent.Agent
	gen                  int  // pod generation: 1 after a roll replaced it
	down                 bool // deleted, its replacement not running yet
}

type delivery struct {
	at time.Time
	md pmetric.Metrics
}

// Run simulates one cluster in a synctest bubble of t (time starts at
// 2000-01-01T00:00:00Z and moves only when every goroutine of the run waits).
func Run(t *testing.T, cfg Config) (Result, error) {
	var res Result
	var err error
	began := time.Now()
	synctest.Test(t, func(*testing.T) { res, err = run(cfg) })
	res.Wall = time.Since(began)
	res.PeakRSSMiB = peakRSSMiB()
	return res, err
}

// counter is what the fake clients received.
type counter struct {
	mu        sync.Mutex
	t0        time.Time
	rng       *rand.Rand
	conflict  float64
	requests  map[string]int
	perMinute []int
	conflicts int
	deadUID   string
	faultAt   time.Time
	deadWrite time.Time // first status update making a pair towards the dead pod Unreachable
	// deadNode, summaryWrite: the first summary status update naming the dead node.
	deadNode     string
	summaryWrite time.Time
	failoverAt   time.Time // zero: none
	before       map[string]int
	after        map[string]int
	rollFrom     time.Time // zero: none
	rollTo       time.Time
	roll         map[string]int
	writeVerbs   map[string]bool
	// cutAt, cutZone, zoneWrite: the first ZoneNetworkHealth of cutZone said Unreachable
	// from cutAt on.
	cutAt     time.Time
	cutZone   string
	zoneWrite time.Time
}

func (c *counter) react(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		res += "/" + sub
	}
	c.requests[a.GetVerb()+" "+res]++
	now := time.Now()
	if !c.rollFrom.IsZero() && !now.Before(c.rollFrom) && now.Before(c.rollTo) {
		c.roll[a.GetVerb()+" "+res]++
	}
	if f := c.failoverAt; !f.IsZero() {
		switch {
		case !now.Before(f.Add(-10*time.Minute)) && now.Before(f):
			c.before[a.GetVerb()+" "+res]++
		case !now.Before(f) && now.Before(f.Add(10*time.Minute)):
			c.after[a.GetVerb()+" "+res]++
		}
	}
	if c.writeVerbs[a.GetVerb()] {
		m := int(now.Sub(c.t0) / time.Minute)
		for len(c.perMinute) <= m {
			c.perMinute = append(c.perMinute, 0)
		}
		c.perMinute[m]++
	}
	if u, ok := a.(k8stesting.UpdateAction); ok && a.GetResource().Resource == "networkhealthsummaries" && a.GetSubresource() == "status" &&
		c.summaryWrite.IsZero() && !now.Before(c.faultAt) && slices.Contains(u.GetObject().(*v1alpha1.NetworkHealthSummary).Status.UnreachableNodes, c.deadNode) {
		c.summaryWrite = now
	}
	if o, ok := a.(interface{ GetObject() k8sruntime.Object }); ok && a.GetResource().Resource == "zonenetworkhealths" && !c.cutAt.IsZero() &&
		c.zoneWrite.IsZero() && !now.Before(c.cutAt) {
		if z, ok := o.GetObject().(*v1alpha1.ZoneNetworkHealth); ok && z.Status.Reachability == v1alpha1.Reachability(observation.VerdictUnreachable) &&
			(z.Spec.SourceZone == c.cutZone || z.Spec.TargetZone == c.cutZone) {
			c.zoneWrite = now
		}
	}
	if u, ok := a.(k8stesting.UpdateAction); ok && a.GetResource().Resource == "podnetworkhealths" {
		if c.rng.Float64() < c.conflict {
			c.conflicts++
			o := u.GetObject().(*v1alpha1.PodNetworkHealth)
			return true, nil, apierrors.NewConflict(v1alpha1.Resource("podnetworkhealths"), o.Name, errors.New("injected by the scale simulation"))
		}
		if o := u.GetObject().(*v1alpha1.PodNetworkHealth); a.GetSubresource() == "status" && c.deadWrite.IsZero() && !now.Before(c.faultAt) &&
			o.Spec.TargetPodRef != nil && string(o.Spec.TargetPodRef.UID) == c.deadUID && o.Status.Reachability == v1alpha1.Reachability(observation.VerdictUnreachable) {
			c.deadWrite = now
		}
	}
	return false, nil, nil
}

// sim is one simulated run: the cluster (nodes, agent pods, their planner), the gateway
// (admission + binding, decoder, engine, writer) and the schedule that drives them, one
// simulated second at a time.
type sim struct {
	cfg                Config
	ctx                context.Context
	t0, end, faultAt   time.Time
	rollAt, failoverAt time.Time // zero: no roll, no failover
	cutAt, cutEnd      time.Time // zero: no zone cut
	rng                *rand.Rand
	res                Result
	resultsMu          sync.Mutex

	// The cluster.
	members   []member
	index     map[string]int // planner ID → members index
	nodes     []*corev1.Node
	kube      *kubefake.Clientset
	ix        *k8sindex.Index
	probePlan *planner.Plan
	iv        time.Duration
	dead      int
	deadNode  string

	// The gateway.
	proc          *k8snetattributesprocessor.StaticIndexProcessor
	stableTargets int // the decoder's streams per source (0: its default)
	dec           *decode.Decoder
	ecfg          verdict.Config
	e             *plan.Engine
	nodeControl   plan.NodeConditions
	cnt           *counter
	pnh           *pnhfake.Clientset
	w             *apply.Writer
	endTerm       context.CancelFunc

	// The schedule.
	order      []int           // sources in jitter order within a round
	jitter     []time.Duration // by members index
	lastProbed map[pairID]time.Time
	pending    []delivery
	round      uint64
	next       int // index in order of the next source to fire in round
	// verdictAt: the dead target's Unreachable verdict; drainedAt: no verdict or Event
	// write pending any more after the dead target's were queued (deadQueued).
	verdictAt, drainedAt time.Time
	deadQueued           bool
	currentNodes         map[string]*verdict.NodeCondition
	nodeByName           map[string]*corev1.Node
	lastNodes            time.Time
	rolled               map[string]bool // UIDs of rolled pods
	// The writer's NetworkHealthSummary (controllers.Summary's core), judged every 5 s.
	summary     *plan.Summary
	lastSummary time.Time
	// The ZoneNetworkHealth objects' core (controllers.Zones'), shard 0's; the zone cut's
	// judgement and heal as the node reconcile saw them.
	zoneObjects          *plan.ZoneObjects
	cutJudged, cutHealed time.Time
}

type pairID struct{ s, t int32 }

// The DaemonSet roll: waves of a tenth of the pods, 30 s apart, each pod replaced 10 s
// after its deletion.
const rollWaves, rollWaveEvery, rollDown = 10, 30 * time.Second, 10 * time.Second

func run(cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	s := &sim{cfg: cfg, ctx: ctx, t0: t0, end: t0.Add(cfg.Duration), faultAt: t0.Add(cfg.FaultAt),
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x7363616c65))}
	if err := s.buildCluster(); err != nil {
		return Result{}, err
	}
	if err := s.startGateway(); err != nil {
		return Result{}, err
	}
	s.schedule()
	stopAt := s.end.Add(cfg.Delivery + 2*time.Second)
	for at := t0.Add(time.Second); !at.After(stopAt); at = at.Add(time.Second) {
		if err := s.second(at); err != nil {
			return Result{}, err
		}
	}
	s.collect()
	s.measureHeap(cancel)
	return s.res, nil
}

// buildCluster creates N nodes in zones, one agent pod on each, and the agents' plan.
func (s *sim) buildCluster() error {
	cfg := s.cfg
	s.members = make([]member, cfg.N)
	pm := make([]planner.Member, cfg.N)
	s.index = make(map[string]int, cfg.N)
	s.nodes = make([]*corev1.Node, cfg.N)
	// The plain object tracker: NewClientset's field-managed one builds a REST mapper per
	// patch (milliseconds each), which would dominate the simulation.
	s.kube = kubefake.NewSimpleClientset()
	s.ix = k8sindex.New(k8sindex.Config{DeletedPodGrace: 30 * time.Second}) // the processor's default grace
	for i := range s.members {
		m := member{slot: fmt.Sprintf("slot-%05d", i), node: fmt.Sprintf("node-%05d", i), zone: fmt.Sprintf("zone-%d", i%cfg.Zones)}
		s.newPod(&m, i, 0, s.t0.Add(-time.Hour))
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.node, Labels: map[string]string{corev1.LabelTopologyZone: m.zone}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		nr := k8sindex.NodeRecordFromNode(node)
		s.ix.UpsertNode(&nr)
		if err := s.kube.Tracker().Add(node); err != nil {
			return err
		}
		s.nodes[i] = node
		s.members[i] = m
		pm[i] = planner.Member{ID: m.slot, Node: m.node, Zone: m.zone}
		s.index[m.slot] = i
	}
	var err error
	s.probePlan, err = planner.New(pm, planner.Config{K: cfg.K, Stable: cfg.M, ProbeBudget: cfg.ProbeBudget, BaseInterval: cfg.BaseInterval})
	if err != nil {
		return err
	}
	s.iv = s.probePlan.Interval()
	s.res = Result{N: cfg.N, Interval: s.iv}
	s.dead = cfg.N / 3
	for cfg.Shards > 1 && shard.Of(s.members[s.dead].node, cfg.Shards) != 0 {
		s.dead++ // shard 0's node, where the simulated shard sees it
	}
	s.deadNode = s.members[s.dead].node
	return nil
}

// newPod gives slot i's pod of generation gen its identity and addresses, a fresh agent
// started at start, and puts it in the index.
func (s *sim) newPod(m *member, i, gen int, start time.Time) {
	cfg := s.cfg
	m.gen = gen
	m.id, m.name = fmt.Sprintf("uid-%05d", i), fmt.Sprintf("netpulse-agent-%05d", i)
	if gen > 0 {
		m.id, m.name = fmt.Sprintf("uid-%05d-g%d", i, gen), fmt.Sprintf("netpulse-agent-%05d-g%d", i, gen)
	}
	m.addrs = []string{fmt.Sprintf("10.%d.%d.%d", 64+4*gen+i/65536, (i/256)%256, i%256)}
	if cfg.DualStackEvery > 0 && i%cfg.DualStackEvery == 0 {
		m.addrs = append(m.addrs, fmt.Sprintf("fd00:%x::%x", 10+gen, i+1))
	}
	m.agent = syntheticagent.NewAgent(m.name, m.id, Namespace, m.node, m.addrs[0], start, cfg.Seed*1_000_003+uint64(i)+uint64(gen)<<32)
	ips := make([]corev1.PodIP, len(m.addrs))
	for j, a := range m.addrs {
		ips[j] = corev1.PodIP{IP: a}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: m.name, UID: types.UID(m.id)},
		Spec:   corev1.PodSpec{NodeName: m.node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: m.addrs[0], PodIPs: ips, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	pr := k8sindex.PodRecordFromPod(pod, nil)
	s.ix.UpsertPod(&pr)
}

// startGateway builds the gateway: admission + binding, decoder, engine, the fake API's
// request counter, and the first leader's writer.
func (s *sim) startGateway() error {
	cfg := s.cfg
	pcfg := k8snetattributesprocessor.DefaultGatewayConfig()
	// The admission remembers max_sources agents (10,000 by default): a larger cluster must
	// raise it (docs/sharding.md), as this does.
	pcfg.Admission.MaxSources = max(pcfg.Admission.MaxSources, 2*cfg.N)
	s.stableTargets = 0 // the decoder's default, the admission's default
	if n := cfg.MaxStableTargetsPerSource; n > 0 {
		pcfg.Admission.MaxStableTargetsPerSource = n
		pcfg.Admission.MaxTargetsPerRound = max(pcfg.Admission.MaxTargetsPerRound, 2*n)
		s.stableTargets = n // the decoder's streams derived from it, as the exporter's config does
	}
	var err error
	s.proc, err = k8snetattributesprocessor.NewStaticIndexProcessor(processortest.NewNopSettings(processortest.NopType), pcfg, s.ix)
	if err != nil {
		return err
	}
	s.dec = s.newDecoder()
	s.ecfg = cfg.Engine
	s.ecfg.WritesPerSecond = cfg.QPS // as the exporter sets it
	s.e = s.newEngine()
	// The exporter's defaults (factory.go): zones judged first, their objects written by
	// shard 0 (this one).
	s.nodeControl = plan.NodeConditions{Type: "netpulse.io/PodNetworkProblem", Config: verdict.NodeConfig{Quorum: 2, MaxFailingShare: 0.2, Heartbeat: 10 * time.Minute, MinHold: time.Minute,
		Zones: &zones.Config{MinNodes: zones.DefaultMinNodes, MinFailingShare: zones.DefaultMinFailingShare, MinHealthyShare: zones.DefaultMinHealthyShare}}}
	s.zoneObjects = plan.NewZoneObjects(plan.DefaultZoneMinHold, plan.DefaultZoneRetention, 10*time.Minute)

	s.cnt = &counter{t0: s.t0, rng: rand.New(rand.NewPCG(cfg.Seed, 0x636f6e66)), conflict: max(cfg.ConflictRate, 0), requests: map[string]int{},
		deadUID: s.members[s.dead].id, deadNode: s.deadNode, faultAt: s.faultAt, writeVerbs: map[string]bool{"create": true, "update": true, "patch": true, "delete": true},
		before: map[string]int{}, after: map[string]int{}, roll: map[string]int{}}
	if cfg.RollAt > 0 {
		s.rollAt = s.t0.Add(cfg.RollAt)
		s.cnt.rollFrom, s.cnt.rollTo = s.rollAt, s.rollAt.Add(rollWaves*rollWaveEvery+10*time.Minute)
	}
	if cfg.FailoverAt > 0 {
		s.failoverAt = s.t0.Add(cfg.FailoverAt)
		s.cnt.failoverAt = s.failoverAt
	}
	if cfg.ZoneCutAt > 0 {
		s.cutAt, s.cutEnd = s.t0.Add(cfg.ZoneCutAt), s.t0.Add(cfg.ZoneCutAt+cfg.ZoneCutFor)
		s.cnt.cutAt, s.cnt.cutZone = s.cutAt, cutZone
	}
	s.pnh = pnhfake.NewSimpleClientset()
	s.pnh.PrependReactor("*", "*", s.cnt.react)
	s.kube.PrependReactor("*", "*", s.cnt.react)
	s.w, s.endTerm, err = s.lead(s.e, s.t0)
	return err
}

const maxProbeInterval = time.Minute // the exporter's defaults (factory.go)

func (s *sim) newDecoder() *decode.Decoder {
	return decode.NewDecoder(decode.DecoderConfig{StreamTTL: 3 * maxProbeInterval, FirstSightMaxAge: maxProbeInterval, MaxPerRound: 10,
		MinRoundInterval: time.Second, MaxFutureSkew: observation.FutureSkew(time.Second), StableTargetsPerSource: s.stableTargets})
}

func (s *sim) newEngine() *plan.Engine {
	e := plan.New(s.ecfg)
	if s.cfg.WriteEveryChange {
		e.WithPolicy(plan.Policy{RTTTolerance: 1e-12, RTTFloor: time.Nanosecond, LossTolerance: 1e-12, LossFloor: 1e-12, MinChangeInterval: -1})
	}
	if s.cfg.LeaseFreshness {
		p := e.Pairs.Policy
		p.LeaseFreshness = true
		e.WithPolicy(p)
	}
	return e
}

// lead starts a writer as a new leader does (the exporter's lead and controllers.Pairs.Lead): informer synced, the engine
// resumed from what the API holds, workers running until the term ends.
func (s *sim) lead(e *plan.Engine, now time.Time) (*apply.Writer, context.CancelFunc, error) {
	w := apply.NewWriter(s.pnh, "", s.cfg.QPS, s.cfg.Burst, zap.NewNop(), func(r apply.WriteResult) {
		if r.Err != nil {
			s.resultsMu.Lock()
			s.res.FailedWrites++
			s.resultsMu.Unlock()
		}
	})
	w.OnDeleted(func(o *v1alpha1.PodNetworkHealth) { e.ObjectGone(plan.KeyOfObject(o)) })
	w.WatchZones()
	w.StartInformer()
	if !w.Synced(s.ctx) {
		return nil, nil, errors.New("writer informer did not sync")
	}
	var existing []verdict.Persisted
	for _, o := range w.Existing() {
		existing = append(existing, plan.PersistedOf(o))
	}
	e.Resume(existing, now)
	if s.summary == nil {
		s.summary = &plan.Summary{MinInterval: 30 * time.Second, WarmUp: 3 * s.iv, // the exporter's: 3 x max_probe_interval
			Writer: plan.SummaryWriter{LeaseName: summaryLease, Identity: "scalesim", Shard: 0, Shards: max(s.cfg.Shards, 1)}}
	}
	s.summary.Lead(now)
	term, end := context.WithCancel(s.ctx)
	w.Run(term, 2) // the exporter's default workers
	return w, end, nil
}

// schedule orders the sources: they fire at round*iv + jitter, in jitter order within a
// round; and it readies the node conditions' cache.
func (s *sim) schedule() {
	cfg := s.cfg
	s.order = make([]int, cfg.N)
	for i := range s.order {
		s.order[i] = i
	}
	s.jitter = make([]time.Duration, cfg.N)
	for i, m := range s.members {
		s.jitter[i] = s.probePlan.Jitter(m.slot)
	}
	slices.SortFunc(s.order, func(a, b int) int { return int(s.jitter[a] - s.jitter[b]) })
	s.lastProbed = map[pairID]time.Time{}
	s.round = s.probePlan.Round(s.t0)
	s.next = 0

	s.currentNodes = make(map[string]*verdict.NodeCondition, cfg.N)
	for _, n := range s.nodes {
		if cfg.Shards > 1 && shard.Of(n.Name, cfg.Shards) != 0 {
			continue // another shard's node: the exporter sets conditions on its own only
		}
		s.currentNodes[n.Name] = nil
	}
	s.nodeByName = make(map[string]*corev1.Node, cfg.N)
	for _, n := range s.nodes {
		s.nodeByName[n.Name] = n
	}
	s.lastNodes = time.Time{}
	s.rolled = map[string]bool{}
}

// cutZone is the zone a zone cut (Config.ZoneCutAt) separates from the others.
const cutZone = "zone-1"

// echoesLost returns how many echoes of source's round to target's address at are lost:
// all of them once the target is dead, while it is rolled, or while a zone cut separates
// the two, else each with LossRate.
func (s *sim) echoesLost(source, target int, at time.Time) func(string) int {
	cut := s.cut(at) && (s.members[source].zone == cutZone) != (s.members[target].zone == cutZone)
	return func(string) int {
		if (target == s.dead && !at.Before(s.faultAt)) || s.members[target].down || cut {
			return syntheticagent.ShippedICMPCount
		}
		if s.cfg.LossRate <= 0 {
			return 0
		}
		n := 0
		for range syntheticagent.ShippedICMPCount {
			if s.rng.Float64() < s.cfg.LossRate {
				n++
			}
		}
		return n
	}
}

// cut reports whether the zone cut is on at at.
func (s *sim) cut(at time.Time) bool {
	return !s.cutAt.IsZero() && !at.Before(s.cutAt) && at.Before(s.cutEnd)
}

// fire makes every source due by upTo probe its round's targets, and queues the batches
// for delivery.
func (s *sim) fire(upTo time.Time) {
	for {
		roundStart := time.Unix(0, int64(s.round)*int64(s.iv))
		if s.next == len(s.order) {
			s.round++
			s.next = 0
			s.res.Rounds++
			continue
		}
		i := s.order[s.next]
		at := roundStart.Add(s.jitter[i])
		if at.After(upTo) {
			return
		}
		s.next++
		if at.Before(s.t0) || (i == s.dead && !at.Before(s.faultAt)) || s.members[i].down {
			continue // the dead node's agent reports no more; a rolled pod is not back yet
		}
		s.fireSource(i, at)
	}
}

// fireSource is source i's round at: its stable and rotating targets' addresses, the
// echoes lost, the batch its agent emits.
func (s *sim) fireSource(i int, at time.Time) {
	src := &s.members[i]
	stableM := s.probePlan.StableTargets(src.slot)
	var stableAddrs, rotatingAddrs []string
	lossy := map[string]int{}
	for _, tm := range s.probePlan.Targets(src.slot, s.round) {
		j := s.index[tm.ID]
		if s.cfg.Shards > 1 && shard.Of(s.members[j].node, s.cfg.Shards) != 0 {
			continue // routed to another shard by the agent's filter
		}
		isStable := slices.ContainsFunc(stableM, func(m planner.Member) bool { return m.ID == tm.ID })
		lost := s.echoesLost(i, j, at)
		for f, a := range s.members[j].addrs {
			if f >= len(src.addrs) {
				break // a single-stack source probes the first family only
			}
			if isStable {
				stableAddrs = append(stableAddrs, a)
			} else {
				rotatingAddrs = append(rotatingAddrs, a)
			}
			lossy[a] = lost(a)
		}
		s.lastProbed[pairID{int32(i), int32(j)}] = at
	}
	md := src.agent.RoundWithLoss(at, stableAddrs, rotatingAddrs, func(a string) int { return lossy[a] })
	if s.cfg.Shards > 1 {
		src.agent.Heartbeat(md, at, int64(s.round+1))
	}
	s.res.Batches++
	s.res.DataPoints += md.DataPointCount()
	s.pending = append(s.pending, delivery{at: at.Add(s.cfg.Delivery), md: md})
}

// second is one simulated second at: the sources due fire, the roll and the failover
// happen when due, the deliveries due reach the gateway, and the leader reconciles.
func (s *sim) second(at time.Time) error {
	if !at.After(s.end) {
		s.fire(at)
	}
	if err := s.roll(at); err != nil {
		return err
	}
	if !s.failoverAt.IsZero() && at.Equal(s.failoverAt) {
		// The leader crashes: its pending writes are lost. A new replica takes over with
		// its own decoder and engine.
		s.endTerm()
		s.w.Stop()
		s.zoneObjects.Forget() // controllers.Zones.EndTerm: the next term reads the API again
		s.dec = s.newDecoder()
		s.e = s.newEngine()
		var err error
		if s.w, s.endTerm, err = s.lead(s.e, at); err != nil {
			return err
		}
	}
	s.deliver(at)
	s.reconcile(at)
	time.Sleep(time.Until(at.Add(time.Second))) // the writer works in the simulated second
	return nil
}

// roll deletes a wave's pods at its start (out of the index, into its grace; their
// objects collected) and starts their replacements rollDown later.
func (s *sim) roll(at time.Time) error {
	if s.rollAt.IsZero() {
		return nil
	}
	for k := range rollWaves {
		ws := s.rollAt.Add(time.Duration(k) * rollWaveEvery)
		if !at.Equal(ws) && !at.Equal(ws.Add(rollDown)) {
			continue
		}
		for i := k; i < s.cfg.N; i += rollWaves {
			m := &s.members[i]
			if i == s.dead {
				continue
			}
			if at.Equal(ws) { // deleted: out of the index (into its grace), its objects collected
				m.down = true
				s.rolled[m.id] = true
				s.ix.DeletePod(m.id)
				if err := collectOwned(s.pnh, m.id); err != nil {
					return err
				}
			} else { // its replacement runs
				s.newPod(m, i, m.gen+1, at)
				m.down = false
			}
		}
	}
	return nil
}

// deliver passes the deliveries due by at, in order, through admission + binding, the
// decoder and the engine.
func (s *sim) deliver(at time.Time) {
	k := 0
	for k < len(s.pending) && !s.pending[k].at.After(at) {
		d := s.pending[k]
		s.pending[k] = delivery{}
		k++
		before := d.md.DataPointCount()
		md, _ := s.proc.ProcessMetrics(s.ctx, d.md)
		s.res.AdmissionRefused += before - md.DataPointCount()
		dr := s.dec.Decode(md, d.at)
		for _, n := range dr.Skipped {
			s.res.DecodeSkipped += n
		}
		s.res.Observations += len(dr.Observations)
		s.e.Heard(dr.Heartbeats, d.at)
		s.e.Observe(dr.Observations, d.at)
	}
	s.pending = s.pending[k:]
	if at.Second() == 0 {
		s.dec.Expire(at)
	}
}

// reconcile is the leader's reconcile (controllers.Pairs and controllers.Nodes): objects, Events, node
// conditions; and the backlog and detection it shows.
func (s *sim) reconcile(at time.Time) {
	r := s.e.Reconcile(at)
	s.res.Heartbeat = r.Heartbeat
	for _, ow := range r.Objects {
		if s.res.PlannedByReason == nil {
			s.res.PlannedByReason = map[string]int{}
		}
		s.res.PlannedByReason[ow.Reason]++
		s.w.Set(plan.DesiredOf(ow, at), ow.Priority)
		if !at.Before(s.faultAt) && ow.Summary.Verdict == observation.VerdictUnreachable && ow.Key.TargetUID == s.members[s.dead].id {
			s.deadQueued = true
		}
	}
	for _, ev := range plan.PairEvents(r.Events) {
		s.w.Event(s.kube, "scalesim", corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodNetworkHealth", Namespace: ev.Key.SourceNamespace, Name: plan.ObjectNameOf(ev.Key)},
			ev.Type, ev.Reason, ev.Message, ev.At, writequeue.Event)
		s.res.EventsEmitted++
	}
	for _, c := range r.TargetChanges {
		if c.Verdict != observation.VerdictUnreachable {
			continue
		}
		if s.rolled[c.Key.UID] {
			s.res.RolledUnreachable++
			continue
		}
		if c.Key.UID == s.members[s.dead].id { // either family of the dead pod
			if s.verdictAt.IsZero() && !at.Before(s.faultAt) {
				s.verdictAt = at
			}
		} else if !s.cutAt.IsZero() && !at.Before(s.cutAt) && at.Before(s.cutEnd.Add(time.Minute)) {
			s.res.ZoneCutUnreachable++
		} else {
			s.res.FalseUnreachable++
		}
	}
	if len(r.TargetChanges) > 0 || at.Sub(s.lastNodes) >= 5*time.Second {
		s.lastNodes = at
		d := s.e.ReconcileNodes(at, s.currentNodes, s.nodeControl.Config)
		var written []*corev1.Node
		for _, nw := range d.Writes {
			c := nw.Condition
			s.currentNodes[nw.Node] = &c // the node cache would show it once written
			written = append(written, s.nodeByName[nw.Node])
		}
		s.w.NodeConditions(s.kube, s.nodeControl.Plan(d, written, at))
		s.reconcileZones(d, at)
	}
	pend := s.w.PendingByPriority()
	total := 0
	for _, n := range pend {
		total += n
	}
	s.res.MaxBacklog = max(s.res.MaxBacklog, total)
	if s.deadQueued && s.drainedAt.IsZero() && pend[writequeue.Verdict]+pend[writequeue.Event] == 0 {
		s.drainedAt = at
	}
	s.res.ObjectsMax = max(s.res.ObjectsMax, s.e.Objects())
	s.reconcileSummary(at)
}

// summaryNamespace and summaryLease: where the simulated writer's summary lives.
const summaryNamespace, summaryLease = "netpulse", "netpulse-gateway-0"

// reconcileZones is controllers.Zones' reconcile (objects and Events of the node
// reconcile's zone judgement), and the zone cut's figures.
func (s *sim) reconcileZones(d verdict.NodeDecision, at time.Time) {
	if existing, synced := s.w.Zones(); synced {
		writes := s.zoneObjects.Plan(d.Zones, s.e.GrayZones(), existing, at)
		s.w.ZoneObjects(writes)
		for _, zw := range writes {
			if zw.Event != nil {
				s.w.Event(s.kube, "scalesim", corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ZoneNetworkHealth",
					Namespace: corev1.NamespaceDefault, Name: zw.Object.Name}, zw.Event.Type, zw.Event.Reason, zw.Event.Message, at, writequeue.Event)
				s.res.EventsEmitted++
			}
		}
	}
	if s.cutAt.IsZero() || at.Before(s.cutAt) {
		return
	}
	cut := 0
	for _, p := range d.Zones.CutPairs() {
		if p.From == cutZone || p.To == cutZone {
			cut++
		}
	}
	if s.cut(at) {
		s.res.ZoneCutPairs = max(s.res.ZoneCutPairs, cut)
		if cut > 0 && s.cutJudged.IsZero() {
			s.cutJudged = at
		}
		marked := 0
		for _, n := range d.Marked {
			if n != s.deadNode {
				marked++
			}
		}
		s.res.ZoneCutNodesMarked = max(s.res.ZoneCutNodesMarked, marked)
	} else if cut == 0 && s.cutHealed.IsZero() {
		s.cutHealed = at
	}
}

// reconcileSummary is controllers.Summary's reconcile, and the figures of its
// Complete condition.
func (s *sim) reconcileSummary(at time.Time) {
	if at.Sub(s.lastSummary) < 5*time.Second {
		return
	}
	s.lastSummary = at
	in := plan.SummaryInput{Targets: s.e.Targets(), Gray: s.e.GrayStatuses(), Observers: s.e.Observers()}
	in.PendingVerdict, in.Pending = s.w.PendingVerdicts(summaryNamespace, summaryLease)
	st, write := s.summary.Plan(in, at)
	if write {
		s.w.Summary(summaryNamespace, summaryLease, st)
		s.res.SummaryWrites++
	}
	if !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionComplete) {
		return
	}
	if s.res.CompleteAt == 0 {
		s.res.CompleteAt, s.res.PendingAtComplete = at.Sub(s.t0), in.Pending
		s.res.TargetsAtComplete, s.res.UnknownAtComplete = int(st.Targets), int(st.UnknownTargets)
	}
	if s.deadQueued && s.res.CompleteAfterFault == 0 {
		s.res.CompleteAfterFault = at.Sub(s.faultAt)
	}
}

// collect fills the figures measured at the end: objects, detection, requests, series.
func (s *sim) collect() {
	cfg, res, e := s.cfg, &s.res, s.e
	res.Objects = e.Objects()
	res.PendingAtEnd = s.w.PendingCount()
	if !s.verdictAt.IsZero() {
		res.DetectVerdictRounds = s.verdictAt.Sub(s.faultAt).Seconds() / s.iv.Seconds()
	}
	if !s.drainedAt.IsZero() {
		res.DrainAfterFault = s.drainedAt.Sub(s.faultAt)
	}
	if !s.cutJudged.IsZero() {
		res.ZoneCutJudgedRounds = s.cutJudged.Sub(s.cutAt).Seconds() / s.iv.Seconds()
	}
	if !s.cutHealed.IsZero() {
		res.ZoneHealedRounds = s.cutHealed.Sub(s.cutEnd).Seconds() / s.iv.Seconds()
	}
	for _, n := range e.BadNodes() {
		if n != s.deadNode {
			res.OtherNodesMarked++
		}
	}
	s.collectRequests()
	res.WritesPerSec = float64(res.Writes) / cfg.Duration.Seconds()
	if l, err := s.pnh.NetpulseV1alpha1().PodNetworkHealths("").List(s.ctx, metav1.ListOptions{}); err == nil {
		res.APIObjects = len(l.Items)
	}

	// Series: every source's stable pairs (all reported within the Prometheus exporter's
	// 5-minute metric_expiration) and the engine's targets, from the series per pair.
	stablePairs := 0
	for _, m := range s.members {
		stablePairs += len(s.probePlan.StableTargets(m.slot))
	}
	res.Series = stablePairs*cfg.PairSeries + e.Stats().Targets*cfg.TargetSeries
	ttl := cfg.Engine.TargetTTL
	if ttl <= 0 {
		ttl = verdict.DefaultTargetTTL
	}
	for _, at := range s.lastProbed {
		if s.end.Sub(at) <= ttl {
			res.PairsSeenInTTL++
		}
	}
	res.PairsSeenTotal = len(s.lastProbed)
	s.lastProbed, s.pending = nil, nil
}

// collectRequests copies what the fake clients received into the figures.
func (s *sim) collectRequests() {
	cnt, res := s.cnt, &s.res
	cnt.mu.Lock()
	defer cnt.mu.Unlock()
	res.Requests = cnt.requests
	if !s.failoverAt.IsZero() {
		res.BeforeFailover, res.AfterFailover = cnt.before, cnt.after
	}
	if !s.rollAt.IsZero() {
		res.Roll = cnt.roll
	}
	res.Conflicts = cnt.conflicts
	for v, n := range cnt.requests {
		if cnt.writeVerbs[verbOf(v)] {
			res.Writes += n
		}
	}
	res.PeakWritesPerMinute = slices.Max(append(cnt.perMinute, 0))
	res.WritesPerMinute = slices.Clone(cnt.perMinute)
	if !cnt.summaryWrite.IsZero() {
		res.DetectSummaryRounds = cnt.summaryWrite.Sub(s.faultAt).Seconds() / s.iv.Seconds()
	}
	if !cnt.deadWrite.IsZero() {
		res.DetectWriteRounds = cnt.deadWrite.Sub(s.faultAt).Seconds() / s.iv.Seconds()
	}
	if !cnt.zoneWrite.IsZero() {
		res.ZoneCutWriteRounds = cnt.zoneWrite.Sub(s.cutAt).Seconds() / s.iv.Seconds()
	}
}

// measureHeap stops the gateway and measures its heap: live heap with it, then without
// it (the agents and the fake API stay alive across the two measurements).
func (s *sim) measureHeap(cancel context.CancelFunc) {
	s.endTerm()
	cancel()
	s.w.Stop()
	with := liveHeap()
	runtime.KeepAlive(s.proc)
	runtime.KeepAlive(s.dec)
	runtime.KeepAlive(s.e)
	runtime.KeepAlive(s.w)
	runtime.KeepAlive(s.ix)
	_ = s.proc.Shutdown(context.Background())
	// Dropped for the second measurement.
	s.proc, s.dec, s.e, s.w, s.ix, s.endTerm = nil, nil, nil, nil, nil, nil
	without := liveHeap()
	s.res.HeapMiB = float64(int64(with)-int64(without)) / (1 << 20)
	runtime.KeepAlive(s.members)
	runtime.KeepAlive(s.pnh)
	runtime.KeepAlive(s.kube)
}

// collectOwned deletes the PodNetworkHealth objects owned by the pod uid, as the garbage
// collector does once the pod is gone: straight in the fake's tracker, so the writer's
// request counts do not include them; its informer sees the deletions.
func collectOwned(pnh *pnhfake.Clientset, uid string) error {
	gvr := v1alpha1.SchemeGroupVersion.WithResource("podnetworkhealths")
	obj, err := pnh.Tracker().List(gvr, v1alpha1.SchemeGroupVersion.WithKind("PodNetworkHealth"), Namespace)
	if err != nil {
		return err
	}
	for _, o := range obj.(*v1alpha1.PodNetworkHealthList).Items {
		for _, ref := range o.OwnerReferences {
			if string(ref.UID) == uid {
				if err := pnh.Tracker().Delete(gvr, o.Namespace, o.Name); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
	}
	return nil
}

func verbOf(s string) string {
	for i := range s {
		if s[i] == ' ' {
			return s[:i]
		}
	}
	return s
}

// peakRSSMiB is the process's peak resident set (VmHWM), 0 where /proc is absent.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
