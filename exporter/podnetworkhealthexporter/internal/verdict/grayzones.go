// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"
)

// Gray loss between zones: a lossy inter-zone link drops echoes between every node of one
// zone and every node of the other, and nothing inside either zone. The node judgement
// alone would blame every node of the target zone on the target side and every node of the
// observer zone on the observer side (or read the picture as systemic). So, in clusters
// whose nodes carry zone labels, each ordered (observer zone, target zone) pair keeps a
// window of the answered echoes between them, judged by the same loss test as a node's
// (likelihood ratio against the background, the evidence, the echoes at least, the worst
// slot, the hysteresis), and localised like the node quorum localises outages:
//
//   - the losses must be spread: the test leaves out the largest observer node and the
//     largest target node (and the nodes judged lossy themselves within the window), and the
//     verdict needs losses from two observer nodes and towards two target nodes at least, so
//     one compromised agent, or one lossy node, never makes a zone pair lossy;
//   - each zone's own traffic (A→A, B→B) must be clean: it holds echoes, and is neither lossy
//     nor building evidence (a zone whose own nodes lose echoes is not a link's problem).
//
// While a zone pair explains its echoes' losses (judged lossy, or building a third of the
// evidence with its own traffic clean), its echoes are counted in its window only: no node
// window and no pair's path window gets them, so no node is blamed for the link, on either
// side. Excluding them, rather than leaving them in and discounting them at judgement,
// keeps the node windows honest without per-zone counts in each node's state; the node
// windows do not starve (a node keeps its own zone's echoes and the other zone pairs'),
// and the zone pair's own window, which gets every echo, clears after the heal and gives
// the echoes back to the nodes. "Building" rather than only "lossy" because a zone pair
// gathers evidence several times faster than any one of its nodes (all its nodes' echoes
// against one node's share of them), so it reaches a third of the evidence long before a
// node reaches a verdict: the node windows stop taking the link's losses before they can
// blame anyone.

// SideZone: the loss is between the pair's observer zone and its target zone (PairGray
// FromZone, ToZone): a lossy inter-zone link, no node's fault.
const SideZone = "zone"

// maxGrayZonePairs bounds the zone pairs judged (Z² for Z zones: 32 zones). A zone is a
// node label the cluster's admins set, not something a sender chooses, but the bound keeps
// the state O(1) whatever the labels: ~2 KB a zone pair (BenchmarkGrayZones).
const maxGrayZonePairs = 1024

// zonePairKey is an ordered zone pair: observers in from, targets in to.
type zonePairKey struct{ from, to string }

// zoneGray is one zone pair's gray state.
type zoneGray struct {
	window *gray.Window
	// observers (by voter key) and targets (by target node key) that lost echoes: the
	// leave-one-out on both sides, and the spread the verdict needs.
	observers, targets gray.Contributors
	// loss: the statistical test; lossy: the verdict (the test, localised).
	loss  gray.Loss
	lossy bool
	// building: the evidence since the last clear, without the largest contributors,
	// reaches a third of a verdict's; explains: its echoes are counted here only.
	building, explains bool
	lastBuilding       time.Time
	newest             time.Time
	// The latency side (zoneRTT): a running share of its rounds that were high against
	// their targets' baselines, over highN rounds; the observer and target nodes whose
	// rounds were high lately (the spread); the verdict's run (lat), and whether the zone
	// pair explains its rounds' RTTs (slow, or building: then they count here only).
	highShare                float64
	highN                    int
	highObservers, highNodes gray.Contributors
	lat                      gray.Latency
	newestRTT                time.Time
	slow, explainsRTT        bool
}

// nodeZoneSeen is a node's zone as the targets on it carry it (the gateway's index, from
// the Node's label: never a sender's word), and when it was last seen.
type nodeZoneSeen struct {
	zone string
	seen time.Time
}

// grayZoneState is the engine's zone-pair gray state (caller holds mu).
type grayZoneState struct {
	pairs    map[zonePairKey]*zoneGray
	nodeZone map[string]nodeZoneSeen
	// deferred: rounds across zones committed since the last judgement, which the zone
	// pairs judge before the nodes take them.
	deferred []zoneDeferredEcho
}

// commitZoneEcho counts a committed answered round in its zone pair's window and reports
// whether the zone pair explains it: then it counts nowhere else (caller holds mu).
// Rounds of a distrusted observer (a node that lost the pod network), of a target or an
// observer without a zone, and everything when zones are off, are left to the nodes.
func (e *Engine) commitZoneEcho(ts *targetState, p pendingEcho) bool {
	if e.gray.ZonesOff || ts.target.Node == "" || ts.target.Zone == "" {
		return false
	}
	z := &e.grayZones
	if z.nodeZone == nil {
		z.nodeZone, z.pairs = map[string]nodeZoneSeen{}, map[zonePairKey]*zoneGray{}
	}
	// Refreshed a slot at a time: a map write per echo would cost more than the rest.
	if seen := z.nodeZone[ts.target.Node]; seen.zone != ts.target.Zone || p.at.Sub(seen.seen) > e.gray.SlotWidth {
		z.nodeZone[ts.target.Node] = nodeZoneSeen{zone: ts.target.Zone, seen: p.at}
	}
	from := z.nodeZone[p.voter].zone
	if from == "" || e.distrusted(p.node) {
		return false
	}
	k := zonePairKey{from: from, to: ts.target.Zone}
	zg := z.pairs[k]
	if zg == nil {
		if len(z.pairs) >= maxGrayZonePairs {
			return false
		}
		zg = &zoneGray{window: gray.NewWindow(e.gray.Slots, e.gray.SlotWidth)}
		z.pairs[k] = zg
	}
	span := e.gray.Span()
	sent, lost := uint64(p.sent), uint64(p.lost)
	zg.window.Add(p.at, sent, lost)
	zg.observers.Add(p.voter, sent, lost, p.at, span, e.lossyAt(e.lossyObservers, p.voter, p.at))
	tk := targetNodeKey(ts)
	zg.targets.Add(tk, sent, lost, p.at, span, e.lossyAt(e.lossyTargets, tk, p.at))
	if p.at.After(zg.newest) {
		zg.newest = p.at
	}
	if zg.explains || k.from == k.to || len(z.deferred) >= maxZoneDeferred {
		return zg.explains
	}
	// Across zones and not explained yet: the zone pair judges it first. The nodes take it
	// at the next judgement, after the zone pair's, unless the zone pair explains it then:
	// a link's loss begins in every node's window at once, and a node's test, fast at the
	// onset of a heavy loss, would otherwise win the race with the zone pair's on the
	// echoes of the judgement in which the zone pair's evidence builds.
	z.deferred = append(z.deferred, zoneDeferredEcho{ts: ts, key: k, p: p})
	return true
}

// zoneDeferredEcho is a round across zones held until its zone pair's next judgement.
type zoneDeferredEcho struct {
	ts  *targetState
	key zonePairKey
	p   pendingEcho
}

// maxZoneDeferred bounds the rounds held for the zone pairs' judgement: a judgement's rounds
// across zones (every observer's towards K+M targets, about a second of them); past it,
// rounds go to the nodes at once, as without zones.
const maxZoneDeferred = 1 << 14

// releaseZoneDeferred gives the held rounds to their nodes, except those their zone pair
// now explains (caller holds mu; after the zone pairs' judgement).
func (e *Engine) releaseZoneDeferred() {
	z := &e.grayZones
	for _, d := range z.deferred {
		if zg := z.pairs[d.key]; zg != nil && zg.explains {
			continue
		}
		if og := e.grayObservers[d.p.voter]; og != nil && d.ts.g != nil {
			e.commitNodeEcho(d.ts, og, d.p)
		}
	}
	clear(z.deferred)
	z.deferred = z.deferred[:0]
}

// Latency between zones: a slow inter-zone link delays the rounds between every node of
// one zone and every node of the other. The per-target judgement sees a majority of slow
// observers only when most of a target's observers are across the link: in two zones it
// blamed every node of one zone (4 of 8 in the ring), in three it judged nothing. So each
// ordered zone pair keeps a running share of its rounds that are high against their
// targets' baselines (the same test as a target's), and is HighLatency, localised like
// its loss:
//
//   - the share is 0.6 or more over zoneRTTMinRounds rounds or more, from two observer
//     nodes and towards two target nodes at least (one slow agent, or one slow node, never
//     makes a zone pair slow: that node's own verdict does);
//   - each zone's own rounds are fast: a share of 0.3 or less over zoneRTTMinQuiet rounds
//     or more (a zone whose own nodes are slow is not a link's problem);
//   - for gray.latency.rounds evaluations on newer rounds, and cleared as slowly.
//
// While a zone pair is slow, or its share reaches 0.5 with that spread (building), its
// rounds' RTTs are its evidence only: no target's majority, no observer's share and no
// baseline takes them, so no node is blamed for the link. The shares count only rounds
// whose target's baseline is warm.

// zoneRTTMinRounds: rounds a zone pair's share needs before it is judged; zoneRTTMinQuiet
// the rounds a zone's own share needs before it reads fast (few: a zone of two nodes has
// two rounds inside it a round, and the zone pair must explain a slow link before the
// nodes' own judgements blame it).
const (
	zoneRTTMinRounds = 12
	zoneRTTMinQuiet  = 4
)

// observeZoneRTT counts one round's RTT (high or not against its target's baseline) in
// its zone pair and reports whether the zone pair explains it (caller holds mu).
func (e *Engine) observeZoneRTT(ts *targetState, voter string, high bool, at time.Time) bool {
	z := &e.grayZones
	if e.gray.ZonesOff || ts.target.Node == "" || ts.target.Zone == "" || z.pairs == nil {
		return false
	}
	from := z.nodeZone[voter].zone
	if from == "" {
		return false
	}
	zg := z.pairs[zonePairKey{from: from, to: ts.target.Zone}]
	if zg == nil {
		return false // created by the loss side's first answered round
	}
	x, lost := 0.0, uint64(0)
	if high {
		x, lost = 1, 1
	}
	zg.highN++
	// A short memory, like an observer's share: the zone pair must explain a slow link's
	// rounds before the observers' shares (10 rounds) and the targets' majorities (3
	// rounds) judge them, and it hears from every node of both zones. Found end to end:
	// with a memory of 36 rounds the mesh's zone pair took 3 rounds to explain and an
	// observer of the slow link read HighLatency at its own node first.
	zg.highShare += (x - zg.highShare) / float64(min(zg.highN, 10))
	span := 2 * e.gray.SlotWidth
	zg.highObservers.Add(voter, 1, lost, at, span, time.Time{})
	zg.highNodes.Add(targetNodeKey(ts), 1, lost, at, span, time.Time{})
	if at.After(zg.newestRTT) {
		zg.newestRTT = at
	}
	return from != ts.target.Zone && zg.explainsRTT
}

// zoneExplainsRTT reports whether the zone pair of voter's zone and ts's zone explains the
// RTTs of its rounds (caller holds mu).
func (e *Engine) zoneExplainsRTT(voter string, ts *targetState) bool {
	z := &e.grayZones
	if e.gray.ZonesOff || ts.target.Zone == "" || z.pairs == nil {
		return false
	}
	from := z.nodeZone[voter].zone
	if from == "" || from == ts.target.Zone {
		return false
	}
	zg := z.pairs[zonePairKey{from, ts.target.Zone}]
	return zg != nil && zg.explainsRTT
}

// judgeZoneLatency re-judges the zone pairs' latency at now (caller holds mu).
func (e *Engine) judgeZoneLatency(now time.Time) {
	z := &e.grayZones
	fast := func(zone string) bool {
		zg := z.pairs[zonePairKey{zone, zone}]
		return zg != nil && zg.highN >= zoneRTTMinQuiet && zg.highShare <= 0.3
	}
	for k, zg := range z.pairs {
		if k.from == k.to {
			continue
		}
		spread := zg.highObservers.Distinct() >= 2 && zg.highNodes.Distinct() >= 2
		quiet := fast(k.from) && fast(k.to)
		raw := zg.lat.High
		switch {
		case zg.highN < zoneRTTMinRounds || !quiet:
			raw = false
		case zg.highShare >= 0.6 && spread:
			raw = true
		case zg.highShare <= 0.3:
			raw = false
		}
		e.gray.Latency.Step(&zg.lat, raw, zg.newestRTT, now)
		zg.slow = zg.lat.High
		zg.explainsRTT = zg.slow || quiet && spread && zg.highN >= zoneRTTMinRounds && zg.highShare >= 0.5
	}
}

// judgeGrayZones re-judges every zone pair at now and forgets those without echoes for
// TargetTTL (caller holds mu). It runs before the nodes are judged, so a zone pair's
// verdict governs the next rounds' echoes.
func (e *Engine) judgeGrayZones(now time.Time) {
	z := &e.grayZones
	defer e.releaseZoneDeferred()
	if e.gray.ZonesOff || len(z.pairs) == 0 {
		return
	}
	for n, seen := range z.nodeZone {
		if now.Sub(seen.seen) > e.cfg.TargetTTL {
			delete(z.nodeZone, n)
		}
	}
	cfg := e.gray.Loss.WithDefaults()
	for k, zg := range z.pairs {
		if now.Sub(zg.newest) > e.cfg.TargetTTL {
			delete(z.pairs, k)
			continue
		}
		// Left out: the nodes judged lossy themselves within the window (their losses are
		// theirs) and the largest other one, on both sides.
		except := zg.observers.Excluding(e.lossyWithin(e.lossyObservers, now))
		t := zg.targets.Excluding(e.lossyWithin(e.lossyTargets, now))
		except.Sent += t.Sent
		except.Lost += t.Lost
		cfg.Judge(&zg.loss, zg.window, except, now)
		if zg.loss.Lossy || buildingLoss(cfg, zg.window, zg.observers.Excluding(e.lossyWithin(e.lossyObservers, now)), zg.loss.Cleared, now) {
			zg.lastBuilding = now
		}
		// Held two slots: the short scales come and go while the evidence builds, and
		// each gap would let the link's losses through to the nodes.
		zg.building = !zg.lastBuilding.IsZero() && now.Sub(zg.lastBuilding) < 2*e.gray.SlotWidth
	}
	for k, zg := range z.pairs {
		if k.from == k.to {
			zg.lossy, zg.explains = false, false // a zone's own traffic: the gate, never a verdict
			continue
		}
		quiet := z.clean(k.from, 1, now) && z.clean(k.to, 1, now)
		clean := quiet && z.clean(k.from, cfg.MinEchoes, now) && z.clean(k.to, cfg.MinEchoes, now)
		switch {
		case !zg.loss.Lossy:
			zg.lossy = false
		case !zg.lossy:
			// The onset: spread over two observer nodes and two target nodes at least,
			// each zone's own traffic clean.
			zg.lossy = clean && zg.observers.Distinct() >= 2 && zg.targets.Distinct() >= 2 &&
				z.cleanAgainst(k.from, zg.loss.Level, cfg.ClearZ, now) && z.cleanAgainst(k.to, zg.loss.Level, cfg.ClearZ, now)
		default:
			// Held while the test holds, unless a zone's own traffic is judged lossy:
			// then the loss is not the link's, and the nodes judge it.
			zg.lossy = !z.intraLossy(k.from) && !z.intraLossy(k.to)
		}
		// Explained: its own echoes are enough to hold the nodes' back while the zones' own
		// traffic builds no evidence, however few echoes it has yet (a fault beginning soon
		// after the zones' windows did must not reach the nodes meanwhile).
		zg.explains = zg.lossy || zg.building && quiet
	}
	e.judgeZoneLatency(now)
}

// clean reports whether zone's own traffic holds minEchoes echoes at least and is neither
// lossy nor building evidence (caller holds mu).
func (z *grayZoneState) clean(zone string, minEchoes uint64, now time.Time) bool {
	zg := z.pairs[zonePairKey{zone, zone}]
	return zg != nil && !zg.building && zg.window.Total(now).Sent >= minEchoes
}

// cleanAgainst reports whether zone's own traffic loses, with z confidence, under half of
// rate (caller holds mu): the absence of evidence inside a small zone is not evidence of a
// clean zone. A zone whose nodes lose their input loses its own traffic too, more slowly
// evidenced than the links to it that carry more echoes; its links must not be judged
// before it.
func (z *grayZoneState) cleanAgainst(zone string, rate, conf float64, now time.Time) bool {
	zg := z.pairs[zonePairKey{zone, zone}]
	if zg == nil {
		return false
	}
	t := zg.window.Total(now)
	return gray.WilsonUpper(t.Lost, t.Sent, conf) < rate/2
}

// intraLossy reports whether zone's own traffic passes the loss test (caller holds mu).
func (z *grayZoneState) intraLossy(zone string) bool {
	zg := z.pairs[zonePairKey{zone, zone}]
	return zg != nil && zg.loss.Lossy
}

// buildingLoss reports whether a scale of w since notBefore, without except's losses,
// reaches a third of the evidence at a rate of Threshold at least: evidence is building.
func buildingLoss(c gray.LossConfig, w *gray.Window, except gray.Counts, notBefore, now time.Time) bool {
	var buf [16]gray.Scale
	for _, s := range w.Scales(now, notBefore, buf[:0]) {
		if s.Ratio() >= c.Threshold && gray.LLR(s.Lost, s.Sent, c.Background) >= c.Evidence/4 && gray.LLR(s.Lost-min(except.Lost, s.Lost), s.Sent, c.Background) >= c.Evidence/8 {
			return true
		}
	}
	return false
}

// zoneGrayStatus is a zone pair's verdict with its figures (caller holds mu): its loss,
// and its latency as the share of slow rounds (Exceeding, in %, of Voters rounds).
func (zg *zoneGray) status() GrayStatus {
	st := GrayStatus{
		Lossy: zg.lossy, Sent: zg.loss.Figures.Sent, Lost: zg.loss.Figures.Lost, Span: zg.loss.Figures.Span,
		LossSince: zg.loss.Since, Contributors: zg.observers.Distinct(), Window: zg.window.Total(zg.newest),
		HighLatency: zg.slow, LatencySince: zg.lat.Since, Exceeding: int(math.Round(zg.highShare * 100)), Voters: zg.highN,
	}
	if !zg.lossy && zg.slow {
		st.Contributors = zg.highObservers.Distinct()
	}
	return st
}

// reason is the zone pair's gray reason: PacketLoss first, then HighLatency ("" when
// neither), with the target nodes it was seen towards.
func (zg *zoneGray) reason() (string, int) {
	switch {
	case zg.lossy:
		return reasonPacketLoss, zg.targets.Distinct()
	case zg.slow:
		return reasonHighLatency, zg.highNodes.Distinct()
	}
	return "", 0
}

// zonePairGray is the zone side of a pair's gray verdict: its observer's zone and its
// target's zone are a lossy zone pair (caller holds mu).
func (e *Engine) zonePairGray(ts *targetState, voter string) (PairGray, bool) {
	z := &e.grayZones
	if ts == nil || ts.target.Zone == "" || voter == "" || len(z.pairs) == 0 {
		return PairGray{}, false
	}
	from := z.nodeZone[voter].zone
	zg := z.pairs[zonePairKey{from, ts.target.Zone}]
	if from == "" || zg == nil || from == ts.target.Zone {
		return PairGray{}, false
	}
	reason, nodes := zg.reason()
	if reason == "" {
		return PairGray{}, false
	}
	return PairGray{Reason: reason, Side: SideZone, FromZone: from, ToZone: ts.target.Zone,
		TargetNodes: nodes, Status: zg.status()}, true
}

// GrayZonePair is one zone pair's gray verdict: echoes from observers in FromZone towards
// targets in ToZone are lost (PacketLoss), or most of their rounds are slow (HighLatency),
// spread over Status.Contributors observer nodes and TargetNodes target nodes (at most 4
// of each are remembered), while each zone's own traffic is clean and fast.
type GrayZonePair struct {
	FromZone, ToZone string
	Reason           string // PacketLoss, else HighLatency
	TargetNodes      int
	Status           GrayStatus
}

// GrayZones returns the zone pairs judged lossy or slow, ordered (none without zones).
func (e *Engine) GrayZones() []GrayZonePair {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []GrayZonePair
	for k, zg := range e.grayZones.pairs {
		if reason, nodes := zg.reason(); reason != "" && k.from != k.to {
			out = append(out, GrayZonePair{FromZone: k.from, ToZone: k.to, Reason: reason, TargetNodes: nodes, Status: zg.status()})
		}
	}
	slices.SortFunc(out, func(a, b GrayZonePair) int {
		return cmp.Or(cmp.Compare(a.FromZone, b.FromZone), cmp.Compare(a.ToZone, b.ToZone))
	})
	return out
}
