// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"cmp"
	"slices"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// TargetKey identifies one address family of one target: the unit of the per-target
// judgement. Pod targets are keyed by namespace, name and UID, node targets by name,
// external targets (and nodes without a name) by address.
type TargetKey struct {
	Kind      observation.TargetKind
	Namespace string
	Name      string
	UID       string
	Address   string
	// Port and Endpoint (External only): each configured external target is its own.
	Port     int64
	Endpoint string
	Family   string
}

// String renders the key for logs, e.g. "Pod:ns/name(uid)/ipv6".
func (k TargetKey) String() string {
	s := string(k.Kind) + ":"
	switch {
	case k.Kind == observation.TargetPod:
		s += k.Namespace + "/" + k.Name + "(" + k.UID + ")"
	case k.Name != "":
		s += k.Name
	default:
		s += observation.EndpointText(k.Address, k.Port, k.Endpoint)
	}
	return s + "/" + k.Family
}

// TargetKeyOf is the target (and family) an observation judges.
func TargetKeyOf(o *observation.Observation) TargetKey {
	pk := observation.KeyOf(o)
	return TargetKey{
		Kind: pk.TargetKind, Namespace: pk.TargetNamespace, Name: pk.TargetName, UID: pk.TargetUID,
		Address: pk.TargetAddress, Port: pk.TargetPort, Endpoint: pk.TargetEndpoint, Family: o.Target.Family(),
	}
}

// targetVotes bounds the observer nodes whose votes a target keeps. With K+M = 4 observers
// per round it spans four rounds: enough to judge the newest run, bounded per target, so the
// gateway's per-target state is O(N) whatever the cluster's history.
const targetVotes = 16

// tobs is one observer's outcome for a target in one round.
type tobs struct {
	at       time.Time
	observer string // the observing pod's UID
	node     string // its node ("" when unknown: the UID stands in)
	ok       bool
	// rtt: the round's median ICMP RTT (0 when none); sent and lost: its echoes.
	rtt        time.Duration
	sent, lost uint64
}

// voterKey is who votes: the observer's node, or its pod when the node is unknown (with
// require_authenticated_observers every observation names its authenticated node).
func voterKey(node, observer string) string {
	if node != "" {
		return node
	}
	return "pod:" + observer
}

// vote is one observer node's newest outcome for a target (several probe types of one
// round count as one outcome, successful when any succeeded). A node holds exactly one vote
// per target and family: whatever it sends replaces its own vote and nothing else, so it
// can neither evict nor outnumber other nodes' evidence.
type vote struct {
	at       time.Time
	observer string // the observing pod's UID (of the newest round)
	node     string
	ok       bool
	// prevFails: the node's consecutive failed rounds before this one.
	prevFails int
	// rtt: the round's median ICMP RTT (0 when none); sent and lost: its ICMP echoes
	// (capped).
	rtt        time.Duration
	sent, lost uint16
}

func (v *vote) key() string { return voterKey(v.node, v.observer) }

// fails is the node's run of consecutive failed rounds up to its newest.
func (v *vote) fails() int {
	if v.ok {
		return 0
	}
	return v.prevFails + 1
}

// maxFailRun caps vote.prevFails (only "at least two" matters).
const maxFailRun = 1 << 10

// targetState is the per-target judgement of one TargetKey.
type targetState struct {
	key    TargetKey
	target observation.Target // newest identity seen (node, zone)
	votes  [targetVotes]vote
	n      int // votes used

	verdict observation.Verdict
	since   time.Time // when the verdict was reached (zero while Unknown)
	// outageStart is the first failed observation of the run that made it Unreachable.
	outageStart time.Time
	// failing / reaching: distinct observer nodes of the newest runs (for messages, metrics).
	failing, reaching int
	lastSeen          time.Time
	firstSeen         time.Time // oldest observation (the gray warm-up)
	// leaving: the newest observation found the target pod terminating or deleted
	// (observation.Observation.TargetLeaving), since leavingSince: the first observation
	// of that unbroken run.
	leaving      bool
	leavingSince time.Time
	// disruption: the newest observation's known disruption of the target (drain,
	// termination, node NotReady, not started; "" when none), since disruptedSince: the
	// first observation of the current unbroken disruption.
	disruption     string
	disruptedSince time.Time
	// excuse: the disruption that explains the failures of the newest run (set instead of
	// an Unreachable verdict; "" otherwise).
	excuse string
	// g: the gray judgement (loss and latency; nil until echoes or RTTs arrive).
	g *targetGray
}

// disrupted records the newest observation's disruption.
func (t *targetState) disrupted(d string, at time.Time) {
	switch {
	case d == "":
		t.disruptedSince = time.Time{}
	case t.disruption == "" || t.disruptedSince.IsZero() || d != t.disruption: // a new kind: a new disruption (excuse.go)
		t.disruptedSince = at
	}
	t.disruption = d
}

// excused reports the disruption that explains a run of failures starting at firstFail:
// one the cluster reported at or before the run began (a cordon before the evictions, a
// pod terminating before it stopped answering), at most DisruptionExcuseFor before. A disruption that came after the failures
// does not excuse them: a partitioned node goes NotReady some 40 s after its pods stopped
// answering, and the partition is what netpulse must report.
func (t *targetState) excused(firstFail time.Time) string {
	if t.disruption == "" || t.disruptedSince.IsZero() || t.disruptedSince.After(firstFail) || excuseExpired(t.disruptedSince, firstFail) {
		return ""
	}
	return t.disruption
}

// add records an observation as its node's vote. A newer round of the node replaces the
// node's vote; another probe of the same round counts as a success when it succeeded; an
// older round of the node changes nothing (its newest result stands), nor does a duplicate
// (a retried export). A node without a vote takes a free slot, else the oldest vote's slot
// when it is newer than that vote (the oldest vote belongs to the node that has not
// reported about the target for longest).
func (t *targetState) add(o tobs) {
	k := voterKey(o.node, o.observer)
	for i := 0; i < t.n; i++ {
		v := &t.votes[i]
		if v.key() != k {
			continue
		}
		switch {
		case o.at.After(v.at):
			*v = vote{at: o.at, observer: o.observer, node: o.node, ok: o.ok, prevFails: min(v.fails(), maxFailRun), rtt: o.rtt,
				sent: uint16(min(o.sent, 1<<15)), lost: uint16(min(o.lost, o.sent, 1<<15))}
		case o.at.Equal(v.at):
			if o.ok {
				v.ok = true // another probe of the round succeeded
			}
			if o.rtt > 0 {
				v.rtt = o.rtt
			}
			if o.sent > 0 {
				v.sent, v.lost = uint16(min(o.sent, 1<<15)), uint16(min(o.lost, o.sent, 1<<15))
			}
		}
		t.seen(o.at)
		return
	}
	nv := vote{at: o.at, observer: o.observer, node: o.node, ok: o.ok, rtt: o.rtt, sent: uint16(min(o.sent, 1<<15)), lost: uint16(min(o.lost, o.sent, 1<<15))}
	if t.n == targetVotes {
		oldest := 0
		for i := 1; i < t.n; i++ {
			if t.votes[i].at.Before(t.votes[oldest].at) {
				oldest = i
			}
		}
		if !o.at.After(t.votes[oldest].at) {
			return // older than every vote: a late round of a node long replaced
		}
		t.votes[oldest] = nv
	} else {
		t.votes[t.n] = nv
		t.n++
	}
	t.seen(o.at)
}

func (t *targetState) seen(at time.Time) {
	if at.After(t.lastSeen) {
		t.lastSeen = at
	}
}

// judgeConfig holds the per-target rules.
type judgeConfig struct {
	// quorum distinct observer nodes whose votes failed in the newest run make the target
	// Unreachable. In a cluster with fewer observer nodes (voters-1 of them can observe a
	// pod), all of those must fail, with at least two failed rounds between them.
	quorum int
	// recovery distinct observer nodes whose votes succeeded in the newest run make an
	// Unreachable target Reachable again (fewer in a smaller cluster, as for quorum).
	recovery int
	// voters: the distinct observer nodes of the cluster that vote and are not distrusted
	// (Engine.voterNodes). The quorums shrink with the cluster, never with the target's
	// own observers: a target only one node reports about is judged by a full quorum.
	voters int
	// graySlot: the gray window's slot width (partialRun).
	graySlot time.Duration
	// sibling: the target's other address family (partialRun; nil when none).
	sibling *targetState
}

// quorums are the failing and reaching observer nodes a verdict needs.
func (c judgeConfig) quorums() (q, r int) {
	possible := max(c.voters-1, 1) // a pod's own node does not observe it
	return min(c.quorum, possible), max(min(c.recovery, possible), 1)
}

// runTolerance is how many votes against a run it tolerates: one, the vote of any single
// node, so that no one node (a compromised agent, its own token and name) can end or hide
// a run of the others by keeping its vote the newest (it only needs to report more often,
// or a little ahead of the clock within the skew).
const runTolerance = 1

// sortedVotes returns the votes newest first (ties by voter, so the order is
// deterministic), without the failures of distrusted nodes: the observer's node has the
// problem, not the target. Their successes still are evidence for it.
func (t *targetState) sortedVotes(buf *[targetVotes]vote, distrusted func(node string) bool) []vote {
	vs := buf[:0]
	for _, v := range t.votes[:t.n] {
		if !v.ok && distrusted != nil && distrusted(v.node) {
			continue
		}
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b vote) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return cmp.Compare(a.key(), b.key())
	})
	return vs
}

// run returns the votes of the newest run of outcome ok, newest first: walking the votes
// newest first, those with outcome ok until the (runTolerance+1)-th vote against them.
// answeredSince reports whether an observer's vote at or after at is a success.
func (t *targetState) answeredSince(at time.Time) bool {
	for _, v := range t.votes[:t.n] {
		if v.ok && !v.at.Before(at) {
			return true
		}
	}
	return false
}

func run(vs []vote, ok bool, out []vote) []vote {
	against := 0
	for _, v := range vs {
		if v.ok == ok {
			out = append(out, v)
			continue
		}
		if against++; against > runTolerance {
			break
		}
	}
	return out
}

// judge re-evaluates the verdict from the votes, one per observer node. It reports
// whether the verdict changed.
//
// Unreachable: the newest run of failures holds quorum distinct nodes (in a cluster too
// small for the quorum, every node that can observe it, with two failed rounds at least).
// Reachable: an Unreachable target needs recovery distinct nodes in the newest run of
// successes; any other target the first success. A run tolerates one vote against it, so
// no single node changes a verdict that at least quorum (recovery) other nodes agree on,
// and the quorums count the cluster's observer nodes, so no node lowers them by being a
// target's only observer.
func (t *targetState) judge(cfg judgeConfig, distrusted func(node string) bool) bool {
	var buf, fbuf, sbuf [targetVotes]vote
	vs := t.sortedVotes(&buf, distrusted)
	fails := run(vs, false, fbuf[:0])
	oks := run(vs, true, sbuf[:0])
	nf, ns := len(fails), len(oks)
	failCount := 0
	for _, v := range fails {
		failCount += v.fails()
	}
	t.failing, t.reaching = nf, ns

	q, r := cfg.quorums()
	next := t.verdict
	excuse := ""
	switch {
	case q > 0 && nf >= q && (q == cfg.quorum || failCount >= 2) && failCount >= t.partialRun(vs, fails, cfg.graySlot, cfg.sibling, distrusted):
		// (A target that was answering part of its echoes needs a run that random loss
		// would not make: gray loss is PacketLoss, never Unreachable.)
		next = observation.VerdictUnreachable
		// Expected to fail: the cluster itself said so before the run. No verdict against
		// it. A target already judged Unreachable without an excuse stays so: a disruption
		// reported after the failures (a partitioned node going NotReady) excuses nothing.
		if t.verdict != observation.VerdictUnreachable || t.excuse != "" {
			if excuse = t.excused(fails[len(fails)-1].at); excuse != "" {
				next = observation.VerdictUnknown
			}
		}
	case ns >= r:
		next = observation.VerdictReachable
	case ns > 0 && t.verdict != observation.VerdictUnreachable:
		next = observation.VerdictReachable
	}
	excuseChanged := excuse != t.excuse
	t.excuse = excuse
	if next == t.verdict {
		return excuseChanged
	}
	wasUnreachable := t.verdict == observation.VerdictUnreachable
	t.verdict = next
	switch next {
	case observation.VerdictUnreachable:
		t.since, t.outageStart = fails[0].at, fails[len(fails)-1].at
		t.outageBoundary(t.outageStart)
	default:
		if wasUnreachable && t.g != nil {
			t.g.outageEnd = vs[0].at
		}
		t.since = vs[0].at
		t.outageStart = time.Time{}
	}
	return true
}

// evidence returns the votes behind the current verdict, newest first: for a Reachable
// target its observer nodes' successes (a failure the verdict does not share is not
// evidence about the target), for an Unreachable one the failures of its newest run, for
// Unknown nothing.
func (t *targetState) evidence() []vote {
	var buf [targetVotes]vote
	switch t.verdict {
	case observation.VerdictReachable:
		var out []vote
		for _, v := range t.sortedVotes(&buf, nil) {
			if v.ok {
				out = append(out, v)
			}
		}
		return out
	case observation.VerdictUnreachable:
		vs := t.sortedVotes(&buf, nil)
		return run(vs, false, make([]vote, 0, len(vs)))
	}
	return nil
}

// TargetStatus is the per-target judgement of one target and family.
type TargetStatus struct {
	Key     TargetKey
	Target  observation.Target
	Verdict observation.Verdict
	// Since: when the verdict was reached; OutageStart: the first failed observation of
	// the run that made it Unreachable (zero otherwise).
	Since, OutageStart time.Time
	// Failing and Reaching: distinct observer nodes in the newest run of failures or
	// successes.
	Failing, Reaching int
	LastSeen          time.Time
	// Disruption: the failures are expected (contract.Disruption*: a drain, a pod going
	// away, a node the kubelet reports NotReady, a pod not started), so the verdict is
	// Unknown, and nothing is blamed on the network.
	Disruption string
}

func (t *targetState) status() TargetStatus {
	return TargetStatus{
		Key: t.key, Target: t.target, Verdict: t.verdict, Since: t.since, OutageStart: t.outageStart,
		Failing: t.failing, Reaching: t.reaching, LastSeen: t.lastSeen, Disruption: t.excuse,
	}
}
