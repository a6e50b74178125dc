// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/contract"
)

// Gray failures: packet loss and latency judged per target (all its observers' echoes,
// rotating probes included) and per observer node (all its targets), and localised by
// which side the evidence agrees on. The statistics are internal/gray's.

// GrayConfig configures the gray judgement. Zero fields take the defaults.
type GrayConfig struct {
	// Off: no gray judgement (no state, no verdicts): what the exporter's gray.enabled:
	// false gives, and the reference of BenchmarkGrayState.
	Off     bool
	Loss    gray.LossConfig
	Latency gray.LatencyConfig
	// SlotWidth and Slots: the window the loss evidence is counted in (defaults 30 s and
	// 60: the last half hour, judged over its newest 1, 2, 4, ... slots).
	SlotWidth time.Duration
	Slots     int
	// ZonesOff: no zone-pair loss verdict (grayzones.go), what zones.enabled: false gives.
	ZonesOff bool
}

// Defaults of GrayConfig.
const (
	DefaultGraySlotWidth = 30 * time.Second
	DefaultGraySlots     = 60
)

func (c GrayConfig) withDefaults() GrayConfig {
	c.Loss, c.Latency = c.Loss.WithDefaults(), c.Latency.WithDefaults()
	if c.SlotWidth <= 0 {
		c.SlotWidth = DefaultGraySlotWidth
	}
	if c.Slots <= 0 {
		c.Slots = DefaultGraySlots
	}
	return c
}

// Span is how far back the loss evidence reaches.
func (c GrayConfig) Span() time.Duration {
	c = c.withDefaults()
	return time.Duration(c.Slots) * c.SlotWidth
}

// Gray sides: where the evidence agrees the problem is.
const (
	SideTarget   = "target"   // most of its observers see it
	SideObserver = "observer" // it sees it towards most of its targets: its own problem
	SideBoth     = "node"     // both: the node's own network
	SidePath     = "path"     // this pair alone
)

// NodeSides are the sides of a node's gray verdict (GrayNode.Side): the values of the
// netpulse.gray.side attribute of pod_network_health's node gauge (its metadata.yaml enum,
// which a test compares with this list).
var NodeSides = [...]string{SideTarget, SideObserver, SideBoth}

// GrayStatus is a gray verdict with its figures.
type GrayStatus struct {
	Lossy bool
	// Loss figures: lost of sent echoes over Span (the deciding window while lossy).
	Sent, Lost uint64
	Span       time.Duration
	LossSince  time.Time
	// Observers: distinct nodes (observers of a target, targets of an observer) whose
	// echoes were lost in the window (at most 4 are remembered).
	Contributors int
	// Window: the answered echoes of the whole window, an episode that cleared included.
	Window gray.Counts

	HighLatency      bool
	LatencySince     time.Time
	Median, Baseline time.Duration
	// Exceeding of Voters: observer nodes whose newest round was high.
	Exceeding, Voters int
}

// Degraded reports whether either verdict holds.
func (g GrayStatus) Degraded() bool { return g.Lossy || g.HighLatency }

// LossInterval is the 95 % Wilson interval of the loss rate.
func (g GrayStatus) LossInterval() (lo, hi float64) {
	return gray.WilsonLower(g.Lost, g.Sent, 1.96), gray.WilsonUpper(g.Lost, g.Sent, 1.96)
}

// targetGray is one target's gray state: ~1 KB of slots, 4 contributors, and its node's
// baseline.
type targetGray struct {
	window  *gray.Window
	contrib gray.Contributors
	loss    gray.Loss
	// base is shared by the targets of one node and family (Engine.baselines): a pod
	// replaced while its node is slow (a DaemonSet roll during congestion) inherits what
	// the node's RTT was, instead of learning the slowness as normal.
	base   *nodeBaseline
	lat    gray.Latency
	newest time.Time
	// pending: answered rounds held until no outage boundary can claim them; win: the
	// boundary (a round of their observers); outageEnd: when the target's last outage
	// ended.
	pending   []pendingEcho
	win       time.Duration
	outageEnd time.Time
	// answeredAt: the newest held round's date with an answer in it. A held round a round
	// older than it is released early: the target answered after it, so no outage began
	// in it.
	answeredAt time.Time
}

// pendingEcho is an answered round held until no outage boundary can claim it.
type pendingEcho struct {
	voter, node string
	// pair: the followed pair it belongs to, when it had one (its path window).
	pair       *pairInfo
	at         time.Time
	sent, lost uint32
}

// maxPendingEchoes bounds a target's held rounds (K+M observers over two rounds fit).
const maxPendingEchoes = 32

// boundaryReach: how far from a held round a failed round of its pair may be to be its
// neighbour (a round and a half: rounds jitter, the next but one is two rounds away).
func boundaryReach(win time.Duration) time.Duration { return win * 3 / 2 }

// boundaryWindow is one round of the observer (its measured round length, 1 s to 30 s;
// 10 s before it is known).
func boundaryWindow(ob *observerState) time.Duration {
	if ob.interval <= 0 {
		return 10 * time.Second
	}
	return min(max(ob.interval, time.Second), 30*time.Second)
}

// commitEcho counts a held round (caller holds mu). Answered rounds only: a round nothing
// answered is an outage's evidence (reachability judges it); partial answers are the gray
// signal. An echo lost between a lossy end and a healthy one is the lossy end's; between
// two lossy ends (or a distrusted observer) it counts for both, so that windows never
// starve: a cluster-wide loss that made every node lossy must clear once it heals.
func (e *Engine) commitEcho(ts *targetState, p pendingEcho) {
	og := e.grayObservers[p.voter]
	if og == nil {
		return
	}
	reach := boundaryReach(ts.g.win)
	if p.pair != nil && p.pair.families[familyIndex(ts.key.Family)].failedNear(p.at, reach) || og.out.near(p.at, reach) {
		// Next to a round of its pair that nothing answered, or to a round its observer's
		// node was cut off in: that outage's boundary, answered part-way, whoever's the
		// outage was (its target's, excused or not; its observer's node's; the path's). Its
		// target's verdict shows neither an outage of the observer's node nor a drain
		// (Unknown, excused): in the end-to-end mesh the heal of a drained node left its
		// rounds' boundaries in its windows, and 40 s later its pooled test read PacketLoss
		// on 22 of 240 echoes. The round is left out whatever it lost (its neighbours
		// decide, not its own losses: no estimate is biased); at 50 % random loss a stable
		// pair's round fails whole 1 in 8, so a quarter of its rounds go, and its evidence
		// comes a third slower where it comes fastest (an observer's rounds fail whole
		// towards all of its targets far more rarely).
		return
	}
	if e.commitZoneEcho(ts, p) { // its zone pair explains it, or judges it first (grayzones.go)
		return
	}
	e.commitNodeEcho(ts, og, p)
}

// commitNodeEcho counts a committed round in its target's, its observer's and its pair's
// windows (caller holds mu).
func (e *Engine) commitNodeEcho(ts *targetState, og *observerGray, p pendingEcho) {
	tg := ts.g
	span := e.gray.Span()
	observerBad := og.loss.Lossy || e.distrusted(p.node)
	sent, lost := uint64(p.sent), uint64(p.lost)
	if !observerBad || tg.loss.Lossy {
		tg.window.Add(p.at, sent, lost)
		tg.contrib.Add(p.voter, sent, lost, p.at, span, e.lossyAt(e.lossyObservers, p.voter, p.at))
	}
	if !tg.loss.Lossy || og.loss.Lossy {
		og.window.Add(p.at, sent, lost)
		og.contrib.Add(targetNodeKey(ts), sent, lost, p.at, span, e.lossyAt(e.lossyTargets, targetNodeKey(ts), p.at))
	}
	if pi := p.pair; pi != nil { // a followed pair's own window
		if pi.path == nil {
			pi.path = &pathGray{window: gray.NewWindow(pathSlots, e.gray.SlotWidth)}
		}
		pi.path.window.Add(p.at, sent, lost)
	}
}

// flushPending counts the held rounds dated before held, and those dated before early
// whose pair's next round in the family is in (caller holds mu).
func (e *Engine) flushPending(ts *targetState, held, early time.Time) {
	tg := ts.g
	fi := familyIndex(ts.key.Family)
	n := 0
	for _, p := range tg.pending {
		if p.at.Before(held) || p.at.Before(early) && (p.pair == nil || p.pair.families[fi].lastRound.After(p.at)) {
			e.commitEcho(ts, p)
			continue
		}
		tg.pending[n] = p
		n++
	}
	clear(tg.pending[n:])
	tg.pending = tg.pending[:n]
}

// outageBoundary drops the held rounds of ts dated within a round before its outage began
// (caller holds mu): they were answered part-way as it began.
func (ts *targetState) outageBoundary(start time.Time) {
	tg := ts.g
	if tg == nil {
		return
	}
	n := 0
	for _, p := range tg.pending {
		if !p.at.Before(start.Add(-tg.win)) {
			continue
		}
		tg.pending[n] = p
		n++
	}
	clear(tg.pending[n:])
	tg.pending = tg.pending[:n]
}

// nodeBaseline is a node's learnt RTT in one address family, with when it last learnt.
type nodeBaseline struct {
	gray.Baseline
	seen time.Time
	// group: the node's zone and family ("" for a baseline of a target without a node);
	// peer: the lower median of its group's warm baselines (0 with fewer than
	// peerBaselineMin), refreshed every peerBaselineEvery.
	group string
	peer  time.Duration
}

// peerBaselineMin and peerBaselineEvery: how many warm baselines a zone and family need
// for a peer reference, and how often it is refreshed (O(nodes·log nodes)).
const (
	peerBaselineMin   = 3
	peerBaselineEvery = 10 * time.Second
)

// reference is what a round's RTT is judged against: the node's own baseline, or its
// zone's peers' when lower. A node slow since netpulse started learns its slowness as
// its own baseline; against its zone's other nodes it still reads slow (end to end, a
// node answering 20 ms late from its agent's first round was never judged before).
func (b *nodeBaseline) reference(c gray.LatencyConfig) gray.Baseline {
	if b.peer <= 0 || !b.Warm(c) || b.peer >= b.RTT() {
		return b.Baseline
	}
	return gray.BaselineAt(b.peer, c)
}

// high reports whether rtt is high against the reference.
func (b *nodeBaseline) high(c gray.LatencyConfig, rtt time.Duration) bool {
	ref := b.reference(c)
	return ref.High(c, rtt)
}

// refreshPeerBaselines sets every node baseline's peer reference (caller holds mu): the
// lower median of the warm baselines of its zone and family, so that a slow minority does
// not move it.
func (e *Engine) refreshPeerBaselines(now time.Time) {
	if now.Sub(e.peerBaselinesAt) < peerBaselineEvery {
		return
	}
	e.peerBaselinesAt = now
	c := e.gray.Latency
	groups := map[string][]time.Duration{}
	for _, b := range e.baselines {
		if b.group != "" && b.Warm(c) {
			groups[b.group] = append(groups[b.group], b.RTT())
		}
	}
	ref := make(map[string]time.Duration, len(groups))
	for g, rtts := range groups {
		if len(rtts) >= peerBaselineMin {
			slices.Sort(rtts)
			ref[g] = rtts[(len(rtts)-1)/2]
		}
	}
	for _, b := range e.baselines {
		b.peer = ref[b.group]
	}
}

// baselineOf returns the baseline of ts's node and family (of ts itself when its node is
// unknown), created when new (caller holds mu). O(nodes·families), forgotten TargetTTL
// after its last sample.
func (e *Engine) baselineOf(ts *targetState) *nodeBaseline {
	k := ts.key.String()
	if ts.target.Node != "" {
		k = "node:" + ts.target.Node + "/" + ts.key.Family
	}
	b := e.baselines[k]
	if b == nil {
		b = &nodeBaseline{}
		if ts.target.Node != "" {
			b.group = ts.target.Zone + "/" + ts.key.Family
		}
		e.baselines[k] = b
	}
	return b
}

// observerGray is one observer node's gray state (by its voter key).
type observerGray struct {
	window *gray.Window
	// answered: its answered rounds' echoes as they come (no boundary rule, 4 slots):
	// the rate its own pairs' run bound assumes (pairRunFloor). Only its own pairs read
	// it, so what it reports moves nothing of another node's.
	answered *gray.Window
	contrib  gray.Contributors
	loss     gray.Loss
	lat      gray.Latency
	// highShare: a running share of its rounds that were high against their targets'
	// baselines; highN how many counted. sameShare and sameN: the same for its rounds
	// towards its own zone's targets.
	highShare float64
	highN     int
	sameShare float64
	sameN     int
	newest    time.Time
	lastSeen  time.Time
	dirty     bool
	// out: its node's own outages, round by round (observerRounds).
	out observerRounds
}

// observerRounds finds the rounds in which an observer's node was cut off: every probe of
// the round towards a target that answers others failed whole, two of them at least (one
// is a path's, or a target's own outage before its verdict). pod_probe dates all the
// observations of a round alike (when it ends), so a round is a date. 40 bytes per
// observer node.
type observerRounds struct {
	at             int64 // the date of the round being counted (Unix nanoseconds)
	failed, answer uint16
	// outAt: the newest two rounds found cut off (0 none).
	outAt [2]int64
}

// add counts one probe of the round dated at.
func (r *observerRounds) add(at time.Time, answered bool) {
	t := at.UnixNano()
	switch {
	case t > r.at:
		r.close()
		r.at, r.failed, r.answer = t, 0, 0
	case t < r.at:
		return // a late round: the rounds around it are counted already
	}
	if answered {
		r.answer = min(r.answer+1, 1<<15)
	} else {
		r.failed = min(r.failed+1, 1<<15)
	}
}

func (r *observerRounds) cutOff() bool { return r.answer == 0 && r.failed >= 2 }

// close ends the round being counted.
func (r *observerRounds) close() {
	if r.at != 0 && r.cutOff() && r.outAt[0] != r.at {
		r.outAt[1], r.outAt[0] = r.outAt[0], r.at
	}
}

// near reports whether a cut-off round (the one being counted included) lies within d of at.
func (r *observerRounds) near(at time.Time, d time.Duration) bool {
	t := at.UnixNano()
	within := func(x int64) bool { return x != 0 && max(x-t, t-x) <= int64(d) }
	return within(r.outAt[0]) || within(r.outAt[1]) || r.cutOff() && within(r.at)
}

// transient reports whether o is a transient, not gray evidence: a pod's first rounds (the
// agent's own, or a new target's: peers and routes still coming up, echoes answered
// part-way through a round) and a target going away or down (a round the pod died in).
func transient(ts *targetState, ob *observerState, o *observation.Observation) bool {
	return o.TargetLeaving || o.TargetDisruption != "" || o.Timestamp.Sub(ts.firstSeen) < grayWarmup || o.Timestamp.Sub(ob.firstSeen) < grayWarmup
}

// pathGray is a followed pair's own loss judgement (O(objects)): 10 slots, ~0.3 KB.
type pathGray struct {
	window *gray.Window
	loss   gray.Loss
}

// pathEvidenceFactor: a path verdict asks 1.5 times the evidence of an end's (18 nats at
// the defaults: e^-6 the false-alarm odds per test). A node's window is one test; its
// paths are one a followed pair, tens to hundreds of tests with no leave-one-out to
// protect them, so the same odds per test would make a node's paths false alarms that
// many times as often.
const pathEvidenceFactor = 1.5

// pathLoss is the loss test of a pair's own window.
func (c GrayConfig) pathLoss() gray.LossConfig {
	l := c.Loss.WithDefaults()
	l.Evidence *= pathEvidenceFactor
	return l
}

// pathSlots: a pair's own window is the newest 10 slots (5 minutes at the defaults): the
// pair's object's declared window.
const pathSlots = 10

// grayWarmup: the first rounds of a new agent pod, and of a new target, that the gray
// judgement leaves out (in the end-to-end mesh a starting agent saw 2.6 % of its first
// 30 s of echoes lost towards the peers starting beside it, and read as a lossy node).
const grayWarmup = 30 * time.Second

// observerHighMinRounds: rounds an observer's high share needs before it judges.
const observerHighMinRounds = 6

// roundRTT is the median RTT of an ICMP observation (0 when none): kernel receive
// timestamps against local send times in the agent, so scheduling is not in it.
func roundRTT(o *observation.Observation) time.Duration {
	if o.ProbeType != contract.ProbeTypeICMP || o.RTT.Count() == 0 || !o.Success {
		return 0
	}
	v, ok := o.RTT.Quantile(0.5)
	if !ok {
		return 0
	}
	return secondsToDuration(v)
}

// observeGray feeds one observation's echoes and RTT to its target's and its observer
// node's gray state (caller holds mu). The target side leaves out observers already
// judged lossy (their loss is theirs) and the observer side targets already judged lossy,
// so one bad node does not spread its verdict to its peers; what is counted before that
// is bounded by the leave-one-out test.
//
// An answered round is held for two of its observer's rounds before it counts, and is
// dropped when its target's outage began within a round after it, or ended within a round
// before it: an outage that begins or ends in the middle of a round answers it part-way,
// and such boundaries are the outage's, not gray loss (in the end-to-end mesh the
// partitions of earlier scenarios, each of another node, read as an observer losing 5.8 %
// towards three of its targets). The rule looks at the target's verdict, not at the
// round's own losses, so what it leaves out biases no estimate.
func (e *Engine) observeGray(ts *targetState, ob *observerState, voter string, o *observation.Observation, now time.Time) {
	if e.gray.Off || o.Sent == 0 && o.RTT.Count() == 0 {
		return
	}
	if transient(ts, ob, o) {
		return
	}
	g := e.gray
	og := e.grayObservers[voter]
	if og == nil {
		og = &observerGray{window: gray.NewWindow(g.Slots, g.SlotWidth)}
		e.grayObservers[voter] = og
	}
	og.lastSeen, og.dirty = now, true
	if o.ProbeType == contract.ProbeTypeICMP && o.Sent > 0 && ts.verdict != observation.VerdictUnreachable && ts.excuse == "" {
		og.out.add(o.Timestamp, o.Success)
	}
	if o.ProbeType == contract.ProbeTypeICMP && o.Sent > 0 && o.Success {
		if og.answered == nil {
			og.answered = gray.NewWindow(4, g.SlotWidth)
		}
		og.answered.Add(o.Timestamp, o.Sent, min(o.Lost, o.Sent))
	}
	if ts.g == nil {
		ts.g = &targetGray{window: gray.NewWindow(g.Slots, g.SlotWidth)}
	}
	tg := ts.g
	if tg.base == nil {
		tg.base = e.baselineOf(ts)
	}
	observerBad := og.loss.Lossy || e.distrusted(o.Source.Node)
	if o.ProbeType == contract.ProbeTypeICMP && o.Sent > 0 && o.Success {
		win := boundaryWindow(ob)
		tg.win = win
		outage := ts.verdict == observation.VerdictUnreachable
		afterOutage := !tg.outageEnd.IsZero() && o.Timestamp.Sub(tg.outageEnd) < win
		if !outage && !afterOutage {
			if len(tg.pending) == maxPendingEchoes {
				e.commitEcho(ts, tg.pending[0])
				tg.pending = tg.pending[1:]
			}
			tg.pending = append(tg.pending, pendingEcho{voter: voter, node: o.Source.Node, pair: e.pairs[observation.KeyOf(o)], at: o.Timestamp,
				sent: uint32(min(o.Sent, 1<<16)), lost: uint32(min(o.Lost, o.Sent, 1<<16))})
			if o.Lost < o.Sent && o.Timestamp.After(tg.answeredAt) {
				tg.answeredAt = o.Timestamp
			}
		}
	}
	if o.Timestamp.After(tg.newest) {
		tg.newest = o.Timestamp
	}
	// Held for two rounds, or until the target answered a round dated a round later (its
	// echoes were all sent after the held round's): an outage that began in the held round
	// would have left nothing to answer. One round sooner at every loss rate. Early only
	// once the held round's pair has had its next round too: if that failed whole, the
	// held one was its outage's boundary (commitEcho), an outage of the observer's node
	// that the target's other observers do not see.
	e.flushPending(ts, tg.newest.Add(-2*tg.win), tg.answeredAt.Add(-tg.win+1))
	if o.Timestamp.After(og.newest) {
		og.newest = o.Timestamp
	}
	rtt := roundRTT(o)
	if rtt <= 0 {
		return
	}
	// A slow link between the observer's zone and the target's explains the round: it is
	// the zone pair's evidence (grayzones.go), neither the target's baseline nor the
	// observer's share.
	zoneSlow := tg.base.Warm(g.Latency) && !observerBad && e.observeZoneRTT(ts, voter, tg.base.high(g.Latency, rtt), o.Timestamp)
	if !og.lat.High && !observerBad && !zoneSlow {
		tg.base.Learn(g.Latency, rtt)
		tg.base.seen = now
	}
	if tg.base.Warm(g.Latency) && !tg.lat.High && !zoneSlow {
		x := 0.0
		if tg.base.high(g.Latency, rtt) {
			x = 1
		}
		og.highN++
		og.highShare += (x - og.highShare) / float64(min(og.highN, 10))
		if same, known := e.sameZone(voter, ts); known && same {
			og.sameN++
			og.sameShare += (x - og.sameShare) / float64(min(og.sameN, 10))
		}
	}
}

// sameZone reports whether voter's node is in ts's zone (known: both zones are known and
// zones are judged) (caller holds mu).
func (e *Engine) sameZone(voter string, ts *targetState) (same, known bool) {
	if e.gray.ZonesOff || ts.target.Zone == "" || e.grayZones.nodeZone == nil {
		return false, false
	}
	from := e.grayZones.nodeZone[voter].zone
	if from == "" {
		return false, false
	}
	return from == ts.target.Zone, true
}

// recentlyLossy reports whether key was judged lossy within the gray window (caller holds
// mu): its losses may still be in the other side's windows.
func (e *Engine) recentlyLossy(m map[string]time.Time, key string, now time.Time) bool {
	at, ok := m[key]
	return ok && now.Sub(at) <= e.gray.Span()
}

// lossyAt is when key (in m) was last judged lossy, zero when not within the window
// before now.
func (e *Engine) lossyAt(m map[string]time.Time, key string, now time.Time) time.Time {
	if !e.recentlyLossy(m, key, now) {
		return time.Time{}
	}
	return m[key]
}

// lossyWholeWithin is lossyWithin leaving out all a key judged lossy within the window
// ever sent: its last verdict taken as now.
func (e *Engine) lossyWholeWithin(m map[string]time.Time, now time.Time) func(string) (time.Time, bool) {
	return func(key string) (time.Time, bool) {
		if !e.recentlyLossy(m, key, now) {
			return time.Time{}, false
		}
		return now, true
	}
}

// lossyWithin is lossyAt for Contributors.Excluding.
func (e *Engine) lossyWithin(m map[string]time.Time, now time.Time) func(string) (time.Time, bool) {
	return func(key string) (time.Time, bool) {
		at := e.lossyAt(m, key, now)
		return at, !at.IsZero()
	}
}

// targetNodeKey is what an observer's losses are attributed to: the target's node, else
// the target itself.
func targetNodeKey(ts *targetState) string {
	if ts.target.Node != "" {
		return "node:" + ts.target.Node
	}
	return ts.key.String()
}

// judgeGray re-judges one target's loss and latency at now (caller holds mu). It reports
// whether a gray verdict changed.
func (e *Engine) judgeGray(ts *targetState, now time.Time) bool {
	tg := ts.g
	if tg == nil {
		return false
	}
	// Left out: what the observers judged lossy themselves within the window sent up to
	// their last lossy verdict (their losses are theirs, also those counted before they
	// were judged), and the largest other one.
	except := tg.contrib.Excluding(e.lossyWithin(e.lossyObservers, now))
	changed := e.gray.Loss.Judge(&tg.loss, tg.window, except, now)
	if tg.loss.Lossy && ts.target.Node != "" {
		e.lossyTargets["node:"+ts.target.Node] = now
	}

	// Latency: the newest round of each observer node that probed it in the last third of
	// a slot (10 s: one shipped round), leaving out observers whose own latency or loss is
	// judged high (theirs, not the target's).
	exceeding, voters := 0, 0
	// A slow node is slow for the observers of its own zone too: when it has some and most
	// of them see it fast, the slowness its other observers see is their link's (the zone
	// pair's, judged there), not the node's. Found end to end: a slow link between the
	// mesh's two zones made a target's two observers across it a majority before the zone
	// pair explained their rounds.
	sameExceeding, sameVoters := 0, 0
	var rtts []time.Duration
	for _, v := range ts.votes[:ts.n] {
		if v.rtt <= 0 || tg.newest.Sub(v.at) > e.gray.SlotWidth/3 {
			continue
		}
		if og := e.grayObservers[v.key()]; og != nil && (og.lat.High || og.loss.Lossy) {
			continue
		}
		if e.distrusted(v.node) || e.zoneExplainsRTT(v.key(), ts) {
			continue
		}
		voters++
		rtts = append(rtts, v.rtt)
		high := tg.base != nil && tg.base.high(e.gray.Latency, v.rtt)
		if high {
			exceeding++
		}
		if same, known := e.sameZone(v.key(), ts); known && same {
			sameVoters++
			if high {
				sameExceeding++
			}
		}
	}
	tg.lat.Exceeding, tg.lat.Voters = exceeding, voters
	if tg.base != nil {
		ref := tg.base.reference(e.gray.Latency)
		tg.lat.Baseline = ref.RTT()
	}
	if len(rtts) > 0 {
		slices.Sort(rtts)
		tg.lat.Median = rtts[len(rtts)/2]
	}
	high := gray.Majority(exceeding, voters) && (sameVoters == 0 || 2*sameExceeding > sameVoters)
	if voters > 0 && e.gray.Latency.Step(&tg.lat, high, tg.newest, now) {
		changed = true
		e.latencyEnded(&tg.lat, &tg.loss, now)
	}
	return changed
}

// latencyEnded starts the loss judgement afresh when a HighLatency episode ends without a
// loss verdict (caller holds mu): the losses of a congestion belong to the episode that
// was reported, and a later loss episode rests on evidence after it. Found end to end: a
// node congested for 9 s read HighLatency and healed; its targets' windows kept the
// congestion's losses, and when another node began losing 2 % of its input (whose losses
// reach every window it observes until it is judged) they made a PacketLoss verdict on
// the healed node 67 s after its heal; in TestAHealedCongestionIsNoLaterLoss, 3 of 12
// seeds. From the next slot: the slot the episode ended in holds its losses.
func (e *Engine) latencyEnded(lat *gray.Latency, loss *gray.Loss, now time.Time) {
	if lat.High || loss.Lossy {
		return
	}
	if next := now.Truncate(e.gray.SlotWidth).Add(e.gray.SlotWidth); next.After(loss.Cleared) {
		loss.Cleared = next
	}
}

// judgeGrayObservers re-judges the observer nodes that reported since the last call and
// forgets those gone for TargetTTL (caller holds mu).
func (e *Engine) judgeGrayObservers(now time.Time) {
	e.judgeGrayZones(now) // grayzones.go
	for _, m := range []map[string]time.Time{e.lossyTargets, e.lossyObservers} {
		for k, at := range m {
			if now.Sub(at) > e.gray.Span() {
				delete(m, k)
			}
		}
	}
	for k, b := range e.baselines {
		if now.Sub(b.seen) > e.cfg.TargetTTL {
			delete(e.baselines, k)
		}
	}
	for k, og := range e.grayObservers {
		if now.Sub(og.lastSeen) > e.cfg.TargetTTL {
			delete(e.grayObservers, k)
			continue
		}
		if !og.dirty {
			continue
		}
		og.dirty = false
		// Left out: everything the targets judged lossy within the window sent (a node that
		// lost echoes towards two lossy targets in turn is not lossy itself), and the largest
		// other one. Unlike a target's observers, a healed target's fresh echoes stay left
		// out: an observer's own rounds at the boundaries of its own outage (a partition of
		// its node) are answered part-way and no target's verdict explains them, so counted
		// as fresh evidence they blamed the observer (the CI mesh's TestDelay, after
		// TestPartition).
		except := og.contrib.Excluding(e.lossyWholeWithin(e.lossyTargets, now))
		e.gray.Loss.Judge(&og.loss, og.window, except, now)
		if og.loss.Lossy {
			e.lossyObservers[k] = now
		}
		// Latency: most of its recent rounds were high against their targets' baselines.
		high := og.lat.High
		switch {
		case og.highN < observerHighMinRounds:
			high = false
		case og.highShare >= 0.6:
			// A slow node is slow towards its own zone too: an observer whose rounds in its
			// zone are mostly fast sees a slow link (its zone pair's), not its own node.
			// (An observer with rounds in its zone waits for a few of them; one without any
			// - a zone of one node, a sampled ring - is judged on the rest.)
			high = og.sameN == 0 || og.sameN >= 3 && og.sameShare >= 0.5
		case og.highShare <= 0.3:
			high = false
		}
		if e.gray.Latency.Step(&og.lat, high, og.newest, now) {
			e.latencyEnded(&og.lat, &og.loss, now)
		}
	}
}

// targetGrayStatus is a target's gray verdict, with the observer side's when the same
// node's observer is judged too (caller holds mu).
func (e *Engine) targetGrayStatus(ts *targetState) GrayStatus {
	tg := ts.g
	if tg == nil {
		return GrayStatus{}
	}
	st := GrayStatus{
		Lossy: tg.loss.Lossy, Sent: tg.loss.Figures.Sent, Lost: tg.loss.Figures.Lost, Span: tg.loss.Figures.Span,
		LossSince: tg.loss.Since, Contributors: tg.contrib.Distinct(), Window: tg.window.Total(tg.newest),
		HighLatency: tg.lat.High, LatencySince: tg.lat.Since, Median: tg.lat.Median, Baseline: tg.lat.Baseline,
		Exceeding: tg.lat.Exceeding, Voters: tg.lat.Voters,
	}
	return st
}

// observerGrayStatus is an observer node's gray verdict (caller holds mu).
func (e *Engine) observerGrayStatus(voter string) GrayStatus {
	og := e.grayObservers[voter]
	if og == nil {
		return GrayStatus{}
	}
	return GrayStatus{
		Lossy: og.loss.Lossy, Sent: og.loss.Figures.Sent, Lost: og.loss.Figures.Lost, Span: og.loss.Figures.Span,
		LossSince: og.loss.Since, Contributors: og.contrib.Distinct(), Window: og.window.Total(og.newest),
		HighLatency: og.lat.High, LatencySince: og.lat.Since, Exceeding: int(math.Round(og.highShare * 100)), Voters: og.highN,
	}
}

// PairGray is the gray verdict of one pair: which side it is blamed on, with the figures.
type PairGray struct {
	// Reason: v1alpha1.ReasonPacketLoss or ReasonHighLatency ("" when neither).
	Reason string
	// Side: SideTarget, SideObserver, SideBoth, SidePath or SideZone.
	Side string
	// Node: the node blamed ("" for SidePath and SideZone).
	Node string
	// FromZone, ToZone: SideZone's observer and target zones; TargetNodes: the target
	// nodes whose echoes were lost (Status.Contributors: the observer nodes).
	FromZone, ToZone string
	TargetNodes      int
	Status           GrayStatus
}

// pairGray localises a pair's gray verdict (caller holds mu): its target's side (most of
// the target's observers see it), its observer node's side (it sees it towards most of its
// targets), both (the node's own network), or the pair's own path (its own window passes
// the loss test while neither end is judged).
func (e *Engine) pairGray(k observation.PairKey, p *pairInfo, s observation.Summary) PairGray {
	ts := e.targets[p.target]
	tgt := e.pairTargetGray(p)
	var obs GrayStatus
	voter := ""
	if ob := e.observers[k.SourceUID]; ob != nil {
		voter = ob.voter
	}
	if voter != "" {
		obs = e.observerGrayStatus(voter)
	}
	targetNode := ""
	if ts != nil {
		targetNode = ts.target.Node
	}
	pick := func(tOn, oOn bool, reason string, t, o GrayStatus) (PairGray, bool) {
		switch {
		case tOn && oOn:
			return PairGray{Reason: reason, Side: SideTarget, Node: targetNode, Status: t}, true
		case tOn:
			return PairGray{Reason: reason, Side: SideTarget, Node: targetNode, Status: t}, true
		case oOn:
			return PairGray{Reason: reason, Side: SideObserver, Node: s.ObservedFromNode, Status: o}, true
		}
		return PairGray{}, false
	}
	if g, ok := pick(tgt.Lossy, obs.Lossy, reasonPacketLoss, tgt, obs); ok {
		return g
	}
	// A node judged on both sides' echoes together (graypooled.go): the target's first.
	pt, po := e.pooledGrayStatus(targetNode), e.pooledGrayStatus(s.ObservedFromNode)
	if pt.Lossy {
		pt.Contributors = tgt.Contributors
	}
	if po.Lossy {
		po.Contributors = obs.Contributors
	}
	if g, ok := pick(pt.Lossy, po.Lossy, reasonPacketLoss, pt, po); ok {
		return g
	}
	if g, ok := e.zonePairGray(ts, voter); ok { // grayzones.go
		return g
	}
	if g, ok := pick(tgt.HighLatency, obs.HighLatency, reasonHighLatency, tgt, obs); ok {
		return g
	}
	// The pair's own window: a path-specific loss neither end explains - and neither end's
	// window is building evidence of its own (a third of the verdict's: the pair's stable
	// observer is the largest contributor its target leaves out, so the target's verdict
	// can come a few rounds after the pair's own evidence, and blaming the path meanwhile
	// would be wrong). The same test as the ends', on the pair's answered echoes after the
	// transients, with the same hysteresis.
	if pg := p.path; pg != nil {
		e.gray.pathLoss().Judge(&pg.loss, pg.window, gray.Counts{}, s.LastObserved)
		if pg.loss.Lossy && !e.building(tgt) && !e.building(obs) {
			f := pg.loss.Figures
			return PairGray{Reason: reasonPacketLoss, Side: SidePath, Status: GrayStatus{Lossy: true, Sent: f.Sent, Lost: f.Lost, Span: f.Span, LossSince: pg.loss.Since}}
		}
	}
	return PairGray{}
}

// pairTargetGray is the gray verdict of a pair's target over every address family the pair
// probes (caller holds mu): a lossy family's first, the earliest episode of them; else a
// slow family's; else the newest observation's family's, with the families' windows
// summed. Each family's target is judged on its own echoes and clears on its own; taking
// the newest observation's family alone made a pair's verdict follow the order of a batch
// (on real dual-stack nodes a healed loss cleared in one family three minutes before the
// other, and a pair flipped between them: two Events for one episode).
func (e *Engine) pairTargetGray(p *pairInfo) GrayStatus {
	var out GrayStatus
	if ts := e.targets[p.target]; ts != nil {
		out = e.targetGrayStatus(ts)
	}
	for i, f := range p.families {
		if f.lastRound.IsZero() || familyNames[i] == p.target.Family {
			continue
		}
		k := p.target
		k.Family = familyNames[i]
		ts := e.targets[k]
		if ts == nil {
			continue
		}
		st := e.targetGrayStatus(ts)
		window := addCounts(out.Window, st.Window)
		switch {
		case st.Lossy && (!out.Lossy || st.LossSince.Before(out.LossSince)):
			out = st
		case !out.Lossy && st.HighLatency && (!out.HighLatency || st.LatencySince.Before(out.LatencySince)):
			out = st
		}
		out.Window = window
	}
	return out
}

// building reports whether an end's whole window (a cleared episode included: the pair's
// own window may still hold it) carries a third of the evidence a verdict needs.
func (e *Engine) building(st GrayStatus) bool {
	return gray.LLR(st.Window.Lost, st.Window.Sent, e.gray.Loss.Background) >= e.gray.Loss.Evidence/3
}

// The API's reasons of a gray verdict.
const (
	reasonPacketLoss  = v1alpha1.ReasonPacketLoss
	reasonHighLatency = v1alpha1.ReasonHighLatency
)

// GrayReasons are the reasons of a gray verdict (PairGray.Reason, GrayNode.Reason): the
// values of the netpulse.gray.reason attribute (pod_network_health's metadata.yaml enum,
// which a test compares with this list).
var GrayReasons = [...]string{reasonPacketLoss, reasonHighLatency}

// GrayTarget is one target's gray verdict, for the gauges and the view.
type GrayTarget struct {
	Key        TargetKey
	Node, Zone string
	Status     GrayStatus
}

// GrayStatuses returns the gray state of every target that has echoes or RTTs, ordered.
func (e *Engine) GrayStatuses() []GrayTarget {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]GrayTarget, 0, len(e.targets))
	for _, ts := range e.targets {
		if ts.g != nil {
			out = append(out, GrayTarget{Key: ts.key, Node: ts.target.Node, Zone: ts.target.Zone, Status: e.targetGrayStatus(ts)})
		}
	}
	slices.SortFunc(out, func(a, b GrayTarget) int { return compareTargetKeys(a.Key, b.Key) })
	return out
}

// GrayNode is one node's localised gray verdict: its targets' side, its observer's side,
// or both.
type GrayNode struct {
	Node   string
	Reason string // PacketLoss or HighLatency (loss first)
	Side   string // SideTarget, SideObserver or SideBoth
	Status GrayStatus
}

// GrayNodes localises the gray verdicts to nodes, sorted: a node is blamed when a target
// on it is judged lossy or slow by its observers (target side), or its observer is judged
// lossy or slow towards its targets (observer side). Systemic reports whether more than
// half the nodes with gray evidence are blamed: then the fault is the cluster's, and no
// node should carry it (the node condition suppresses itself).
func (e *Engine) GrayNodes() (nodes []GrayNode, systemic bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	byNode := map[string]*GrayNode{}
	seen := map[string]struct{}{}
	add := func(node, side string, st GrayStatus) {
		if node == "" {
			return
		}
		seen[node] = struct{}{}
		if !st.Degraded() {
			return
		}
		reason := reasonHighLatency
		if st.Lossy {
			reason = reasonPacketLoss
		}
		n := byNode[node]
		if n == nil {
			byNode[node] = &GrayNode{Node: node, Reason: reason, Side: side, Status: st}
			return
		}
		if n.Side != side {
			n.Side = SideBoth
		}
		if reason == reasonPacketLoss && n.Reason != reasonPacketLoss {
			n.Reason, n.Status = reason, st
		}
	}
	for _, ts := range e.targets {
		if ts.g != nil {
			add(ts.target.Node, SideTarget, e.targetGrayStatus(ts))
		}
	}
	nodeOf := map[string]string{}
	for _, ob := range e.observers {
		if ob.voter != "" {
			nodeOf[ob.voter] = ob.node
		}
	}
	for voter := range e.grayObservers {
		add(nodeOf[voter], SideObserver, e.observerGrayStatus(voter))
	}
	for node := range e.grayPooled {
		if byNode[node] == nil { // a side's own verdict says more: which side
			add(node, SideBoth, e.pooledGrayStatus(node))
		}
	}
	for _, n := range byNode {
		nodes = append(nodes, *n)
	}
	slices.SortFunc(nodes, func(a, b GrayNode) int {
		switch {
		case a.Node < b.Node:
			return -1
		case a.Node > b.Node:
			return 1
		}
		return 0
	})
	return nodes, len(seen) >= 4 && 2*len(nodes) > len(seen)
}

// GrayTargets returns the targets judged lossy or slow.
func (e *Engine) GrayTargets() []GrayTarget {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []GrayTarget
	for _, ts := range e.targets {
		if st := e.targetGrayStatus(ts); st.Degraded() {
			out = append(out, GrayTarget{Key: ts.key, Node: ts.target.Node, Status: st})
		}
	}
	slices.SortFunc(out, func(a, b GrayTarget) int { return compareTargetKeys(a.Key, b.Key) })
	return out
}

// partialRun is how many failed rounds (summed over the failing observer nodes) a run
// needs before a target that was answering part of its echoes is judged Unreachable: a
// run random loss would make with probability 1e-8 or more is loss, never an outage
// (gray.RunLength). The loss rate is the largest of the target's estimates (lossUpper)
// and, on a dual-stack pod, of its other address family's (sib, nil when none): random
// loss hits both families alike, and at the onset of a loss the other family's answers in
// the same rounds are often the only evidence there is (a 50 %-lossy node's IPv6 target
// read Unreachable in its second lossy round while its IPv4 target answered from every
// observer, 1 seed in 6). A real failure of one family leaves the other's answers clean,
// so it adds nothing then. A target that lost nothing in its answered rounds needs no more
// than the quorum (caller holds mu).
func (ts *targetState) partialRun(vs, fails []vote, slotWidth time.Duration, sib *targetState, distrusted func(string) bool) int {
	if ts.g == nil || len(fails) == 0 {
		return 0
	}
	echoes := 0.0
	for _, v := range fails {
		echoes += float64(v.sent)
	}
	e := max(echoes/float64(len(fails)), 1)
	q := ts.lossUpper(vs, fails[0].at, e, slotWidth)
	if sib != nil && sib.g != nil {
		var buf [targetVotes]vote
		q = max(q, sib.lossUpper(sib.sortedVotes(&buf, distrusted), fails[0].at, e, slotWidth))
	}
	return gray.RunLength(q, e)
}

// lossUpper is the loss rate a run of failures up to newestFail must be tested against
// (rounds of e echoes): the larger of two estimates, each taken only when two observer
// nodes or more saw partial answers (one compromised agent alone cannot delay a real
// outage's verdict; with an honest lossy observer beside it, its share of the echoes, a
// quarter at K+M = 4, bounds what it adds: a round or so): the partial answers among the
// newest votes vs (at the onset of the loss, before the window holds any), and the
// target's answered rounds in its window's scales; both are unbiased
// (gray.UnconditionalLoss) (caller holds mu).
func (ts *targetState) lossUpper(vs []vote, newestFail time.Time, e float64, slotWidth time.Duration) float64 {
	tg := ts.g
	if tg == nil {
		return 0
	}
	// The partial answers among the newest votes: the rate of the rounds that were
	// answered with losses, from two observer nodes at least. A healthy target's answers
	// lose nothing, so this adds nothing before a real outage.
	var partial gray.Counts
	nodes := 0
	for _, v := range vs {
		if !v.ok || v.lost == 0 || newestFail.Sub(v.at) > slotWidth {
			continue
		}
		partial.Sent += uint64(v.sent)
		partial.Lost += uint64(v.lost)
		nodes++
	}
	q := 0.0
	if nodes >= 2 {
		q = gray.RunLossUpper(partial.Lost, partial.Sent, e)
	}

	// The window's answered rounds: the highest rate of its scales with a dozen echoes at
	// least (the newest slots hold the loss; longer scales dilute it with the time before).
	if tg.contrib.Distinct() >= 2 {
		var buf [16]gray.Scale
		for _, s := range tg.window.Scales(newestFail, time.Time{}, buf[:0]) {
			if s.Sent >= 30 {
				q = max(q, gray.RunLossUpper(s.Lost, s.Sent, e))
			}
		}
	}
	return q
}

// pairRunFloor is the run of failed rounds a pair's failures must exceed before they are
// more than the random loss of its target or of its observer's node (caller holds mu): a
// rotating pair visited a few times has too few echoes of its own to tell.
func (e *Engine) pairRunFloor(k observation.PairKey) int {
	p := e.pairs[k]
	if p == nil {
		return 0
	}
	floor := e.partialRunOf(p.target)
	if ob := e.observers[k.SourceUID]; ob != nil && ob.voter != "" {
		if og := e.grayObservers[ob.voter]; og != nil && og.answered != nil {
			var buf [16]gray.Scale
			q := 0.0
			for _, s := range og.answered.Scales(og.newest, time.Time{}, buf[:0]) {
				if s.Sent >= 30 {
					q = max(q, gray.RunLossUpper(s.Lost, s.Sent, 3))
				}
			}
			floor = max(floor, gray.RunLength(q, 3))
		}
	}
	return floor
}

// partialRunOf is partialRun for the target k's current votes (caller holds mu): what a
// rotating pair's run of failed visits must exceed before it is path-specific.
func (e *Engine) partialRunOf(k TargetKey) int {
	ts := e.targets[k]
	if ts == nil || ts.g == nil {
		return 0
	}
	var buf [targetVotes]vote
	vs := ts.sortedVotes(&buf, e.distrusted)
	var fails []vote
	for _, v := range vs {
		if !v.ok {
			fails = append(fails, v)
		}
	}
	if len(fails) == 0 {
		return 0
	}
	return ts.partialRun(vs, fails, e.gray.SlotWidth, e.siblingFamily(k), e.distrusted)
}

// siblingFamily is the target state of k's other address family (nil when the pod is not
// probed on it) (caller holds mu).
func (e *Engine) siblingFamily(k TargetKey) *targetState {
	s := siblingKey(k)
	if s == k {
		return nil
	}
	return e.targets[s]
}

// LossText renders loss figures for messages: "5.2 % (95 % CI 3.1-8.0 %) of 1440 echoes
// over 2m0s".
func (g GrayStatus) LossText() string {
	lo, hi := g.LossInterval()
	r := 0.0
	if g.Sent > 0 {
		r = float64(g.Lost) / float64(g.Sent)
	}
	return fmt.Sprintf("%.1f %% (95 %% CI %.1f-%.1f %%) of %d echoes over %v", 100*r, 100*lo, 100*hi, g.Sent, g.Span.Round(time.Second))
}
