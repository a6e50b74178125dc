// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/internal/contract"
)

// Gray failures on the ring (12 members, each probed by 4 observers a round: the shipped
// K+M, 3 echoes each, 10 s rounds): a node that loses part of its packets, a slow node, a
// lossy observer, a liar, and the healthy background. The engine must blame the right node,
// never flip a target that answers to Unreachable, never read random loss as an
// address-family failure, and say nothing about a healthy mesh.

// echoFate gives, for a probe from src to dst, the chance each echo is lost and its RTT.
type echoFate func(src, dst int) (loss float64, rtt time.Duration)

func baseFate(int, int) (float64, time.Duration) { return 0, 200 * time.Microsecond }

// grayRound builds one round with each echo lost at random per fate.
func (r *ring) grayRound(round int, rng *rand.Rand, fate echoFate) []observation.Observation {
	var obs []observation.Observation
	for i := 0; i < r.n; i++ {
		ts := r.at(round).Add(time.Duration(i) * time.Millisecond)
		dsts, stable := r.targets(i, round)
		for j, d := range dsts {
			p, rtt := fate(i, d)
			o := observation.Observation{Source: r.src(i), Target: r.tgt(d), ProbeType: "icmp", Timestamp: ts, Stable: stable[j], Sent: 3}
			o.RTT = observation.NewHistogram(8)
			for range 3 {
				if rng.Float64() < p {
					o.Lost++
				} else {
					o.RTT.Record(rtt.Seconds() * (0.95 + 0.1*rng.Float64()))
				}
			}
			o.Success = o.Lost < o.Sent
			if !o.Success {
				o.ErrorType, o.Message, o.RTT = "timeout", "icmp: timeout (3 of 3 echoes lost)", observation.Histogram{}
			}
			obs = append(obs, o)
		}
	}
	return obs
}

// nodeLoss: every packet into node x is lost with probability p (the issue's "5 % of
// everything the node's peers send it"): its peers' echo requests to it, and the replies
// to its own echoes.
func nodeLoss(x int, p float64) echoFate {
	return func(src, dst int) (float64, time.Duration) {
		if src == x || dst == x {
			return p, 200 * time.Microsecond
		}
		return 0, 200 * time.Microsecond
	}
}

// grayRun drives an engine and records what users would read.
type grayRun struct {
	r   *ring
	e   *Engine
	rng *rand.Rand
	// pairs: the newest write of each object.
	pairs       map[observation.PairKey]ObjectWrite
	unreachable []string // target verdicts turned Unreachable
	pairOutages []string // pair objects written Unreachable
	degraded    []Event  // ConnectivityDegraded Events
	familyFails []string // writes of an object with a failing address family
	// decorate, when set, changes each round's observations before they are observed.
	decorate func([]observation.Observation)
	round    int
}

func newGrayRun(n int, seed uint64) *grayRun {
	r := newRing(n, 3)
	return &grayRun{r: r, e: New(verdict.Config{}), rng: rand.New(rand.NewPCG(seed, 7)), pairs: map[observation.PairKey]ObjectWrite{}}
}

func (g *grayRun) run(rounds int, fate echoFate) {
	g.runDual(rounds, fate, nil)
}

// runDual adds an IPv6 probe of each pair with fate6 (nil: IPv4 only).
func (g *grayRun) runDual(rounds int, fate, fate6 echoFate) {
	for range rounds {
		obs := g.r.grayRound(g.round, g.rng, fate)
		if fate6 != nil {
			for _, o := range g.r.grayRound(g.round, g.rng, fate6) {
				o.Target.Address = "fd00::" + o.Target.Address[len("10.0.0."):]
				obs = append(obs, o)
			}
		}
		if g.decorate != nil {
			g.decorate(obs)
		}
		g.e.Observe(obs, g.r.at(g.round))
		res := g.e.Reconcile(g.r.at(g.round).Add(time.Second))
		for _, w := range res.Objects {
			g.pairs[w.Key] = w
			if len(w.DegradedFamilies) > 0 {
				g.familyFails = append(g.familyFails, fmt.Sprintf("round %d: %s %v", g.round, w.Key, w.DegradedFamilies))
			}
		}
		for _, w := range res.Objects {
			if !w.Delete && (w.Reason == ReasonVerdict || w.Reason == ReasonInitial) && w.Summary.Verdict == observation.VerdictUnreachable {
				g.pairOutages = append(g.pairOutages, fmt.Sprintf("round %d: %s", g.round, w.Key))
			}
		}
		for _, c := range res.TargetChanges {
			if c.Verdict == observation.VerdictUnreachable {
				g.unreachable = append(g.unreachable, fmt.Sprintf("round %d: %s", g.round, c.Key))
			}
		}
		g.degraded = append(g.degraded, res.Degraded...)
		g.round++
	}
}

// healed runs healthy rounds until no node is blamed (at most 10 minutes).
func (g *grayRun) healed(t *testing.T, seed uint64) {
	for range 60 {
		g.run(1, baseFate)
		if len(g.grayNodes()) == 0 {
			return
		}
	}
	require.Empty(t, g.grayNodes(), "seed %d round %d: still blamed 10 minutes after the heal", seed, g.round)
}

// grayNodes are the nodes blamed, with their side.
func (g *grayRun) grayNodes() map[string]string {
	out := map[string]string{}
	nodes, _ := g.e.GrayNodes()
	for _, n := range nodes {
		out[n.Node] = n.Reason + "/" + n.Side
	}
	return out
}

// graySeeds: how many random worlds each scenario runs (GRAY_SEEDS widens it).
func graySeeds() uint64 {
	if n, err := strconv.Atoi(os.Getenv("GRAY_SEEDS")); err == nil && n > 0 {
		return uint64(n)
	}
	return 3
}

func TestGrayLossIsBlamedOnTheLossyNode(t *testing.T) {
	for _, p := range []float64{0.02, 0.05, 0.2, 0.5, 0.75} {
		for seed := range graySeeds() {
			t.Run(fmt.Sprintf("%v/%d", p, seed), func(t *testing.T) { testGrayLoss(t, p, seed) })
		}
	}
}

func testGrayLoss(t *testing.T, p float64, seed uint64) {
	{
		{
			g := newGrayRun(12, seed*1000+uint64(p*1000))
			g.run(6, baseFate)
			lossy := 60 // 10 minutes
			if p < 0.05 {
				lossy = 120 // 2 %: the statistical bound alone is 4 minutes at this budget
			}
			// The onset: the fault's first rounds, a minute at 75 % echo loss (a run bound
			// needs a few dozen answered echoes of evidence before it holds).
			first := 3
			if p >= 0.75 {
				first = 6
			}
			g.run(first, nodeLoss(5, p))
			onset, onsetPairs := len(g.unreachable), len(g.pairOutages)
			g.run(lossy-first, nodeLoss(5, p))
			// In the fault's first rounds, before any partial answer, 3 of 4 observers
			// losing all 3 echoes (a quarter of rounds at 75 % echo loss), or a pair failing
			// its first 3 rounds, cannot be told from an outage; from then on the partial
			// answers hold them.
			if p < 0.75 {
				assert.Zero(t, onset, "%v", g.unreachable)
				assert.Zero(t, onsetPairs, "%v", g.pairOutages)
			}
			if p < 0.75 {
				assert.Len(t, g.unreachable, onset, "a node that answers part of its echoes never reads Unreachable")
				assert.Len(t, g.pairOutages, onsetPairs, "nor does any pair of it")
			} else {
				// At 75 % echo loss (42 % of rounds fail entirely) a run bound resting on a
				// few dozen answered echoes still lets a run through now and then: at most
				// one more in 10 minutes (5 of 40 seeds had one; docs/gray.md).
				assert.LessOrEqual(t, len(g.unreachable)-onset, 1, "%v", g.unreachable)
				if len(g.unreachable) > onset || len(g.pairOutages) > onsetPairs {
					t.Logf("after the onset: %v %v", g.unreachable[onset:], g.pairOutages[onsetPairs:])
					return // those outages made objects of rotating pairs, with Events
				}
			}
			if onset+onsetPairs > 0 {
				t.Logf("onset: %v %v", g.unreachable, g.pairOutages)
				return // the onset's outages made objects of rotating pairs, with Events
			}
			assert.Equal(t, map[string]string{"node-5": "PacketLoss/node"}, g.grayNodes(), "only node-5, on both sides")
			// Its stable pairs: towards it, the target's side; from it, the observer's side.
			for k, w := range g.pairs {
				if w.Delete {
					continue
				}
				switch {
				case k.TargetName == "agent-5":
					assert.Equal(t, DegradedPacketLoss, w.Gray.Reason, "%s", k)
					assert.Equal(t, verdict.SideTarget, w.Gray.Side, "%s", k)
					assert.Equal(t, "node-5", w.Gray.Node)
					assert.Equal(t, observation.VerdictReachable, w.Summary.Verdict, "%s", k)
				case k.SourcePod == "agent-5":
					assert.Equal(t, DegradedPacketLoss, w.Gray.Reason, "%s", k)
					assert.Equal(t, verdict.SideObserver, w.Gray.Side, "%s", k)
				default:
					assert.Empty(t, w.Gray.Reason, "%s: an innocent pair", k)
				}
				assert.Empty(t, w.DegradedFamilies, "%s: loss is not a family failure", k)
			}
			// One Event per object and episode: the two objects that touch node-5.
			assert.Len(t, g.degraded, 2, "%v", g.degraded)
			// Healed: cleared, without an Event.
			// (Clearing needs the recent rate confidently below a third of the loss seen,
			// and at least 0.5 %: ~600 clean echoes after 2 % loss, 50 rounds here.)
			g.run(120, baseFate)
			assert.Empty(t, g.grayNodes(), "cleared after the heal")
			assert.Len(t, g.degraded, 2)
		}
	}
}

// The 50 % each way (75 % of echoes lost) on a dual-stack node, and 50 % of its
// input (half its echoes lost): both families lose alike, which is loss, not
// AddressFamilyUnreachable, at no write, and no target or pair flips. Before
// FamilyRunNeeded a run of three failed rounds in one family, while the other had answered
// its recent rounds by chance, was written AddressFamilyUnreachable (end to end, 21 s into
// TestHalfLoss), and one family's target could read Unreachable in the loss's first rounds
// while the other answered: with GRAY_SEEDS=20, 8 of 40 seeds at 50 % and 5 of 40 at 75 %
// failed here; with the other family's answers as evidence (partialRun), none.
func TestRandomLossIsNotAnAddressFamilyFailure(t *testing.T) {
	for _, p := range []float64{0.5, 0.75} {
		for seed := range 2 * graySeeds() {
			g := newGrayRun(12, 3+seed)
			g.runDual(6, baseFate, baseFate)
			onset := 0
			if p >= 0.75 {
				// The first minute at 75 % echo loss, before any answered echo is evidence:
				// TestGrayLossIsBlamedOnTheLossyNode's onset.
				g.runDual(6, nodeLoss(5, p), nodeLoss(5, p))
				onset = len(g.familyFails)
			}
			g.runDual(90, nodeLoss(5, p), nodeLoss(5, p))
			if p < 0.75 {
				assert.Empty(t, g.unreachable, "p %v seed %d", p, seed)
			}
			assert.Empty(t, g.familyFails[onset:], "p %v seed %d", p, seed)
			for k, w := range g.pairs {
				assert.NotEqual(t, observation.VerdictUnreachable, w.Summary.Verdict, "p %v seed %d: %s", p, seed, k)
			}
			assert.Equal(t, "PacketLoss/node", g.grayNodes()["node-5"], "p %v seed %d", p, seed)
		}
	}
	g := newGrayRun(12, 3)
	g.runDual(6, baseFate, baseFate)
	g.runDual(90, nodeLoss(5, 0.75), nodeLoss(5, 0.75))
	// A real IPv6 failure on one path is still one (the other family answers everything).
	path := func(src, dst int) (float64, time.Duration) {
		if src == 3 && dst == 4 {
			return 1, 0
		}
		return baseFate(src, dst)
	}
	g.runDual(60, baseFate, baseFate) // heal first
	g.runDual(4, baseFate, path)
	k := observation.KeyOf(&observation.Observation{Source: g.r.src(3), Target: g.r.tgt(4)})
	assert.Equal(t, []string{"ipv6"}, g.pairs[k].DegradedFamilies)
}

// One family's loss into one node (20 % of the IPv6 echo requests its peers send it; its
// own echoes and IPv4 are clean), in batches whose order of families alternates round by
// round, as real agents' batches do: a pair's gray verdict is its target's over both
// families, not the newest observation's family's. Before, the pairs towards the node
// flipped between PacketLoss and nothing with the order: an Event a flip (on real
// dual-stack nodes a healed loss cleared in IPv4 minutes before IPv6, and its pairs gained
// a second Event).
func TestOneFamilysLossHoldsThePairWhateverTheOrder(t *testing.T) {
	for seed := range graySeeds() {
		g := newGrayRun(12, 40+seed)
		g.decorate = func(obs []observation.Observation) {
			if g.round%2 == 1 {
				slices.Reverse(obs)
			}
		}
		g.runDual(6, baseFate, baseFate)
		into := func(src, dst int) (float64, time.Duration) {
			if dst == 5 {
				return 0.2, 200 * time.Microsecond
			}
			return baseFate(src, dst)
		}
		g.runDual(60, baseFate, into)
		events := map[string]int{}
		for _, ev := range g.degraded {
			events[ev.Key.String()]++
		}
		towards := 0
		for k, w := range g.pairs {
			if k.TargetName != "agent-5" || w.Delete {
				continue
			}
			towards++
			assert.Equal(t, DegradedPacketLoss, w.Gray.Reason, "seed %d: %s", seed, k)
			assert.Equal(t, 1, events[k.String()], "seed %d: %s: one Event for one episode", seed, k)
		}
		assert.Positive(t, towards, "seed %d", seed)
	}
}

// One node's own problem: loss on everything it sends (its egress). It is blamed, on both
// sides (its echoes and its replies cross the same uplink); no peer is.
func TestLossyObserverBlamesOnlyItself(t *testing.T) {
	g := newGrayRun(12, 11)
	g.run(6, baseFate)
	g.run(30, nodeLoss(2, 0.1))
	nodes := g.grayNodes()
	assert.Equal(t, map[string]string{"node-2": "PacketLoss/node"}, nodes)
}

// A compromised agent (its own token and name) reports loss towards every target: only its
// own node is blamed (observer side); no target, no other node. Towards a single victim:
// nothing at all, the largest contributor is left out of the victim's judgement.
func TestOneLiarDegradesOnlyItsOwnPairs(t *testing.T) {
	liarFate := func(x int) echoFate {
		return func(src, dst int) (float64, time.Duration) {
			if src == x {
				return 0.6, 200 * time.Microsecond
			}
			return 0, 200 * time.Microsecond
		}
	}
	g := newGrayRun(12, 5)
	g.run(60, liarFate(0))
	assert.Equal(t, map[string]string{"node-0": "PacketLoss/observer"}, g.grayNodes())
	assert.Empty(t, g.e.GrayTargets(), "no target blamed")
	assert.Empty(t, g.unreachable)

	victim := func(src, dst int) (float64, time.Duration) {
		if src == 0 && dst == 6 {
			return 0.6, 200 * time.Microsecond
		}
		return 0, 200 * time.Microsecond
	}
	g2 := newGrayRun(12, 6)
	g2.run(90, victim)
	assert.Empty(t, g2.e.GrayTargets(), "one node's losses do not blame the victim")
	for k, w := range g2.pairs {
		if k.TargetName != "agent-6" {
			assert.Empty(t, w.Gray.Reason, "%s", k)
		}
	}
}

// 30 minutes of 0.1 % background loss on every path: no verdict anywhere.
func TestBackgroundLossMakesNoVerdict(t *testing.T) {
	for seed := range uint64(3) {
		g := newGrayRun(12, seed)
		g.run(180, func(int, int) (float64, time.Duration) { return 0.001, 200 * time.Microsecond })
		assert.Empty(t, g.grayNodes(), "seed %d", seed)
		assert.Empty(t, g.degraded, "seed %d", seed)
		for k, w := range g.pairs {
			assert.Empty(t, w.Gray.Reason, "seed %d: %s", seed, k)
		}
	}
}

// +20 ms at one node: HighLatency on it within 3 rounds once baselines are learnt, blamed
// on it, nobody else.
func TestSlowNodeIsHighLatency(t *testing.T) {
	g := newGrayRun(12, 9)
	g.run(12, baseFate) // baselines: 48 samples per target
	slow := func(src, dst int) (float64, time.Duration) {
		if src == 7 || dst == 7 {
			return 0, 20*time.Millisecond + 200*time.Microsecond
		}
		return baseFate(src, dst)
	}
	first := -1
	for r := range 12 {
		g.run(1, slow)
		if g.grayNodes()["node-7"] != "" && first < 0 {
			first = r + 1
		}
	}
	require.Positive(t, first, "judged")
	assert.LessOrEqual(t, first, 3, "within 3 rounds")
	assert.Equal(t, map[string]string{"node-7": "HighLatency/node"}, g.grayNodes())
	k := observation.KeyOf(&observation.Observation{Source: g.r.src(6), Target: g.r.tgt(7)})
	require.Equal(t, DegradedHighLatency, g.pairs[k].Gray.Reason)
	assert.Contains(t, GrayMessage(g.pairs[k].Gray), "node-7")
	assert.Empty(t, g.unreachable)
}

// A node slow from the first round (netpulse installed on a cluster with a slow node)
// learns its slowness as its own baseline; against its peers' it still reads slow. Before,
// it was never judged (end to end: a node answering 20 ms late from its agent's start).
func TestSlowFromTheStartIsHighLatency(t *testing.T) {
	g := newGrayRun(12, 19)
	slow := func(src, dst int) (float64, time.Duration) {
		if src == 7 || dst == 7 {
			return 0, 20*time.Millisecond + 200*time.Microsecond
		}
		return baseFate(src, dst)
	}
	first := -1
	for r := range 30 {
		g.run(1, slow)
		for node := range g.grayNodes() {
			require.Equal(t, "node-7", node, "round %d: only the slow node is blamed", r)
		}
		if g.grayNodes()["node-7"] != "" && first < 0 {
			first = r + 1
		}
	}
	require.Positive(t, first, "judged")
	t.Logf("judged in round %d", first)
	assert.Equal(t, map[string]string{"node-7": "HighLatency/node"}, g.grayNodes())
	k := observation.KeyOf(&observation.Observation{Source: g.r.src(6), Target: g.r.tgt(7)})
	require.Equal(t, DegradedHighLatency, g.pairs[k].Gray.Reason)
	assert.Contains(t, GrayMessage(g.pairs[k].Gray), "node-7")
	assert.Empty(t, g.unreachable)
}

// A pod replaced while its node is slow (a roll during congestion) inherits its node's
// baseline: the new pod is judged slow, not learnt as normal.
func TestReplacedPodOnASlowNodeIsHighLatency(t *testing.T) {
	g := newGrayRun(12, 13)
	g.run(12, baseFate)
	slow := func(src, dst int) (float64, time.Duration) {
		if src == 7 || dst == 7 {
			return 0, 20*time.Millisecond + 200*time.Microsecond
		}
		return baseFate(src, dst)
	}
	for range 6 {
		obs := g.r.grayRound(g.round, g.rng, slow)
		for i := range obs {
			if obs[i].Target.Name == "agent-7" {
				obs[i].Target.Name, obs[i].Target.UID = "agent-7-new", "uid-7-new"
			}
		}
		if g.decorate != nil {
			g.decorate(obs)
		}
		g.e.Observe(obs, g.r.at(g.round))
		g.e.Reconcile(g.r.at(g.round).Add(time.Second))
		g.round++
	}
	var slowTargets []string
	for _, gt := range g.e.GrayTargets() {
		if gt.Status.HighLatency {
			slowTargets = append(slowTargets, gt.Key.Name)
		}
	}
	assert.Equal(t, []string{"agent-7-new"}, slowTargets, "the new pod is slow against its node's baseline")
}

// Transients are not gray: the first rounds of a starting mesh (peers coming up, echoes
// answered part-way through a round), and a target going away, lose echoes without a
// verdict.
func TestTransientsAreNotGray(t *testing.T) {
	g := newGrayRun(12, 21)
	g.run(3, func(int, int) (float64, time.Duration) { return 0.3, 200 * time.Microsecond }) // 30 s of start-up
	assert.Empty(t, g.grayNodes(), "a starting mesh's losses")
	g.run(30, baseFate)
	assert.Empty(t, g.grayNodes())
	assert.Empty(t, g.degraded, "no Event for a start-up")

	// node-8's pod is terminating: echoes towards it are lost part-way for 5 minutes.
	for range 30 {
		obs := g.r.grayRound(g.round, g.rng, nodeLoss(8, 0.4))
		for i := range obs {
			if obs[i].Target.Name == "agent-8" {
				obs[i].TargetLeaving, obs[i].TargetDisruption = true, "PodTerminating"
			}
		}
		if g.decorate != nil {
			g.decorate(obs)
		}
		g.e.Observe(obs, g.r.at(g.round))
		g.e.Reconcile(g.r.at(g.round).Add(time.Second))
		g.round++
	}
	assert.Empty(t, g.e.GrayTargets(), "a target going away is no gray target")
}

// Two lossy nodes in turn within the window: each observer lost echoes towards both, and
// the judged-lossy targets' losses are left out of the observers' judgement, so no
// observer is blamed (leaving out only the largest contributor would blame them).
// The end-to-end mesh's order (TestLoss, TestLossyObserver, TestHalfLoss on 4 nodes): a
// node lossy and healed, another lossy and healed, then a third loses half of its input.
// Two of its three observers were judged lossy earlier in the window; what they send after
// their heal is evidence like any other observer's, so the third node is blamed at its
// target side (its observer side still leaves out all its lossy targets sent). Before,
// every loss those two had ever sent was left out for 30 minutes, with the largest other
// observer: nothing remained, and the node was never judged.
func TestHealedObserversStillJudgeANewLoss(t *testing.T) {
	for seed := range graySeeds() {
		g := newGrayRun(4, 41+seed)
		g.run(6, baseFate)
		g.run(20, nodeLoss(3, 0.2))
		require.Equal(t, "PacketLoss/node", g.grayNodes()["node-3"], "seed %d: the first loss is judged", seed)
		g.healed(t, seed)
		g.run(20, nodeLoss(1, 0.2))
		require.Equal(t, "PacketLoss/node", g.grayNodes()["node-1"], "seed %d: the second loss is judged", seed)
		g.healed(t, seed)
		start := g.round
		targetSide := func() bool { v := g.grayNodes()["node-2"]; return v == "PacketLoss/node" || v == "PacketLoss/target" }
		for !targetSide() && g.round-start < 20 {
			g.run(1, nodeLoss(2, 0.5))
			for node := range g.grayNodes() {
				require.Equal(t, "node-2", node, "seed %d round %d: only the lossy node is blamed", seed, g.round)
			}
		}
		require.True(t, targetSide(), "seed %d: the third loss is judged at its target side within 20 rounds: %v", seed, g.grayNodes())
		t.Logf("seed %d: the third loss judged in %d rounds", seed, g.round-start)
	}
}

func TestTwoLossyNodesInTurnBlameNoObserver(t *testing.T) {
	for seed := range graySeeds() {
		// A full mesh of 5 (the end-to-end mesh's shape: each observer probes every other
		// node each round), so every observer's window holds both nodes' losses.
		g := newGrayRun(5, 31+seed)
		g.run(6, baseFate)
		check := func() {
			for node, v := range g.grayNodes() {
				require.Contains(t, []string{"node-1", "node-3"}, node, "seed %d round %d: %s blamed (%s)", seed, g.round, node, v)
			}
		}
		for range 30 {
			g.run(1, nodeLoss(1, 0.2))
			check()
		}
		for range 30 {
			g.run(1, nodeLoss(3, 0.2))
			check()
		}
		assert.Equal(t, "PacketLoss/node", g.grayNodes()["node-3"])
	}
}

// A congested node (+200 ms of queueing, 3 % of its small echoes lost) whose byte-limited
// queue also loses every full-size echo of the path-MTU probes while small ones pass: the
// probes report a black hole on each of its stable pairs at every probe, yet its pairs
// read HighLatency or PacketLoss blamed on it, never MTUBlackHole (found end to end:
// TestCongestedNode read MTUBlackHole on every pair towards the node). A pair elsewhere
// with the same probe results and no gray verdict still reads MTUBlackHole.
func TestCongestionIsNotAnMTUBlackHole(t *testing.T) {
	g := newGrayRun(12, 23)
	g.run(12, baseFate) // baselines
	congested := func(src, dst int) (float64, time.Duration) {
		if src == 7 || dst == 7 {
			return 0.03, 200 * time.Millisecond
		}
		return baseFate(src, dst)
	}
	hole := observation.PathMTU{Status: contract.PathMTUBlackHole, Bytes: 1280}
	g.decorate = func(obs []observation.Observation) {
		if g.round%6 != 0 {
			return // the receiver's default: a path-MTU probe every 6 rounds
		}
		for i := range obs {
			o := &obs[i]
			if o.Stable && o.Success && (o.Source.Node == "node-7" || o.Target.Node == "node-7" || o.Source.Node == "node-1") {
				o.PathMTU = hole // node-1's own stable pair: a real black hole on a clean path
			}
		}
	}
	judgedAt := -1
	for r := range 60 {
		g.run(1, congested)
		if judgedAt < 0 && g.grayNodes()["node-7"] != "" {
			judgedAt = r
		}
		for k, w := range g.pairs {
			if w.Delete || (k.SourcePod != "agent-7" && k.TargetName != "agent-7") {
				continue
			}
			c := meta.FindStatusCondition(DesiredOf(w, g.r.at(g.round)).Obj.Status.Conditions, v1alpha1.ConditionDegraded)
			require.NotNil(t, c, "round %d: %s", r, k)
			assert.NotEqual(t, v1alpha1.ReasonMTUBlackHole, c.Reason, "round %d: %s: %s", r, k, c.Message)
		}
	}
	require.GreaterOrEqual(t, judgedAt, 0, "node-7 judged")
	t.Logf("node-7 judged in congested round %d", judgedAt+1)
	clean := 0
	for k, w := range g.pairs {
		if w.Delete || !w.Summary.MTUBlackHole {
			continue
		}
		c := meta.FindStatusCondition(DesiredOf(w, g.r.at(g.round)).Obj.Status.Conditions, v1alpha1.ConditionDegraded)
		switch {
		case k.SourcePod == "agent-1" && k.TargetName != "agent-7":
			assert.Equal(t, v1alpha1.ReasonMTUBlackHole, c.Reason, "%s: a black hole on a clean path", k)
			clean++
		case k.SourcePod == "agent-7" || k.TargetName == "agent-7":
			assert.Contains(t, []string{v1alpha1.ReasonHighLatency, v1alpha1.ReasonPacketLoss}, c.Reason, "%s", k)
		}
	}
	assert.Equal(t, 1, clean, "node-1's stable pair reads its black hole")
}

// A node congested for 9 s (+200 ms, 15 % of its echoes lost) reads HighLatency and heals
// before its losses make a PacketLoss verdict. Its windows still hold those losses; when
// another node then starts losing 2 % of its input (its losses reach every window it
// observes until it is judged), the healed node must not be blamed on the old losses plus
// the new node's (found end to end: TestSmallLoss after TestCongestedNode blamed the
// congested node 67 s after its heal). Its congestion episode was reported; a new loss
// episode rests on evidence after it (Engine.latencyEnded). Before: at 10 % and 15 %
// congestion loss, 2 and 3 of 12 seeds blamed it (on its target, observer or both sides).
func TestAHealedCongestionIsNoLaterLoss(t *testing.T) {
	late := 0
	seeds := 4 * graySeeds()
	for seed := range seeds {
		// The e2e mesh: 4 dual-stack nodes probing each other every 1 s round.
		g := newGrayRun(4, 40+seed)
		g.r.k, g.r.iv = 2, time.Second
		g.runDual(60, baseFate, baseFate)
		congested := func(src, dst int) (float64, time.Duration) {
			if src == 1 || dst == 1 {
				return 0.15, 200 * time.Millisecond
			}
			return baseFate(src, dst)
		}
		g.runDual(9, congested, congested)
		for range 40 { // the heal, and the wait until no gray verdict is left
			if g.runDual(1, baseFate, baseFate); len(g.grayNodes()) == 0 {
				break
			}
		}
		for r := range 150 {
			g.runDual(1, nodeLoss(2, 0.02), nodeLoss(2, 0.02))
			if got := g.grayNodes()["node-1"]; got != "" {
				late++
				t.Errorf("seed %d: %d s into node-2's loss, the healed node-1 reads %s", seed, r+1, got)
				break
			}
		}
	}
	t.Logf("%d of %d seeds blamed the healed node", late, seeds)
}

// A node cut off and healed again and again (a flapping link, drains, reboots): the rounds
// at each cut's edges are answered part-way, both towards it and from it. They are the
// outages' boundaries, not gray loss: no node is blamed, no Degraded Event. Its target
// side is covered by its own Unreachable verdict; its observer side has no such verdict (its
// targets answer everyone else), only its pairs' own rounds failing whole next to them.
// Found end to end: a drained node's heal left its boundaries in its windows, and its pooled
// test read PacketLoss 40 s later, in the next scenario.
func TestCutEdgesAreNotGray(t *testing.T) {
	const x = 5
	for seed := range graySeeds() {
		g := newGrayRun(12, 61+seed)
		g.run(6, baseFate)
		cut := func(p float64) echoFate {
			return func(src, dst int) (float64, time.Duration) {
				if src == x || dst == x {
					return p, 200 * time.Microsecond
				}
				return 0, 200 * time.Microsecond
			}
		}
		for range 8 {
			g.run(1, cut(0.6)) // the cut begins mid-round
			g.run(3, cut(1))
			g.run(1, cut(0.6)) // and heals mid-round
			g.run(5, baseFate)
		}
		g.run(6, baseFate)
		require.Empty(t, g.grayNodes(), "seed %d: a cut node's edges are no gray loss", seed)
		require.Empty(t, g.degraded, "seed %d", seed)
	}
}
