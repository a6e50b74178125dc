// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/summary"
)

// TargetKey identifies one address family of one target: the unit of the per-target
// judgement. Pod targets are keyed by namespace, name and UID, node targets by name,
// external targets (and nodes without a name) by address.
type TargetKey struct {
	Kind      summary.TargetKind
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
	case k.Kind == summary.TargetPod:
		s += k.Namespace + "/" + k.Name + "(" + k.UID + ")"
	case k.Name != "":
		s += k.Name
	default:
		s += summary.EndpointText(k.Address, k.Port, k.Endpoint)
	}
	return s + "/" + k.Family
}

// TargetKeyOf is the target (and family) an observation judges.
func TargetKeyOf(o *summary.Observation) TargetKey {
	pk := summary.KeyOf(o)
	return TargetKey{
		Kind: pk.TargetKind, Namespace: pk.TargetNamespace, Name: pk.TargetName, UID: pk.TargetUID,
		Address: pk.TargetAddress, Port: pk.TargetPort, Endpoint: pk.TargetEndpoint, Family: o.Target.Family(),
	}
}

// targetRing is how many of a target's newest observations are kept. With K+M observers
// per round it spans 3-4 rounds: enough to judge the newest run, bounded per target, so
// the gateway's per-target state is O(N) whatever the cluster's history.
const targetRing = 16

// tobs is one observer's outcome for a target in one round.
type tobs struct {
	at       time.Time
	observer string // the observing pod's UID
	node     string // its node ("" when unknown: the UID stands in)
	ok       bool
}

func (o tobs) observerNode() string {
	if o.node != "" {
		return o.node
	}
	return "pod:" + o.observer
}

// targetState is the per-target judgement of one TargetKey.
type targetState struct {
	key    TargetKey
	target summary.Target // newest identity seen (node, zone)
	ring   [targetRing]tobs
	n      int // entries used

	verdict summary.Verdict
	since   time.Time // when the verdict was reached (zero while Unknown)
	// outageStart is the first failed observation of the run that made it Unreachable.
	outageStart time.Time
	// failing / reaching: distinct observer nodes of the newest run (for messages, metrics).
	failing, reaching int
	lastSeen          time.Time
}

// add records an observation. Several probe types of one observer in one round count as
// one outcome, successful when any succeeded; a duplicate (a retried export) changes
// nothing.
func (t *targetState) add(o tobs) {
	for i := 0; i < t.n; i++ {
		e := &t.ring[i]
		if e.observer == o.observer && e.at.Equal(o.at) {
			e.ok = e.ok || o.ok
			return
		}
	}
	if t.n == targetRing {
		// Full: replace the oldest, unless the newcomer is older still (a late round).
		oldest := 0
		for i := 1; i < t.n; i++ {
			if t.ring[i].at.Before(t.ring[oldest].at) {
				oldest = i
			}
		}
		if !o.at.After(t.ring[oldest].at) {
			return
		}
		t.ring[oldest] = o
	} else {
		t.ring[t.n] = o
		t.n++
	}
	if o.at.After(t.lastSeen) {
		t.lastSeen = o.at
	}
}

// judgeConfig holds the per-target rules.
type judgeConfig struct {
	// quorum distinct observer nodes whose newest observations failed, with no success
	// after them, make the target Unreachable; when fewer observers have ever been seen,
	// all of them must fail on at least two observations.
	quorum int
	// recovery distinct observer nodes whose newest observations succeeded make an
	// Unreachable target Reachable again.
	recovery int
}

// judge re-evaluates the verdict from the ring. Failures from observers on nodes that
// distrusted(node) reports are not evidence against the target (the observer's node has
// the problem); their successes still are evidence for it. It reports whether the verdict
// changed.
func (t *targetState) judge(cfg judgeConfig, distrusted func(node string) bool) bool {
	var buf [targetRing]tobs
	obs := buf[:t.n]
	copy(obs, t.ring[:t.n])
	slices.SortFunc(obs, func(a, b tobs) int { return b.at.Compare(a.at) }) // newest first

	var failNodes, okNodes, all [targetRing]string
	nf, ns, na := 0, 0, 0
	failCount := 0
	var failStart, failEnd time.Time
	addTo := func(set []string, n *int, v string) {
		if !slices.Contains(set[:*n], v) {
			set[*n] = v
			*n++
		}
	}
	run := true // still inside the newest run
	for _, o := range obs {
		node := o.observerNode()
		if !o.ok && distrusted != nil && distrusted(o.node) {
			continue
		}
		addTo(all[:], &na, node)
		if !run {
			continue
		}
		switch {
		case o.ok && nf == 0:
			addTo(okNodes[:], &ns, node)
		case !o.ok && ns == 0:
			addTo(failNodes[:], &nf, node)
			failCount++
			if failEnd.IsZero() {
				failEnd = o.at
			}
			failStart = o.at
		default:
			run = false
		}
	}
	t.failing, t.reaching = nf, ns

	q := min(cfg.quorum, na)
	r := max(min(cfg.recovery, na), 1)
	next := t.verdict
	switch {
	case q > 0 && nf >= q && (q == cfg.quorum || failCount >= 2):
		next = summary.VerdictUnreachable
	case ns > 0 && t.verdict != summary.VerdictUnreachable:
		next = summary.VerdictReachable
	case ns >= r:
		next = summary.VerdictReachable
	}
	if next == t.verdict {
		return false
	}
	t.verdict = next
	switch next {
	case summary.VerdictUnreachable:
		t.since, t.outageStart = failEnd, failStart
	default:
		t.since = obs[0].at
		t.outageStart = time.Time{}
	}
	return true
}

// evidence returns the observations behind the current verdict, one per observer, newest
// first: for a Reachable target its observers' newest successes (a failure the verdict
// does not share is not evidence about the target), for an Unreachable one the failures
// of the newest run, for Unknown nothing.
func (t *targetState) evidence() []tobs {
	if t.verdict == summary.VerdictUnknown {
		return nil
	}
	all := make([]tobs, t.n)
	copy(all, t.ring[:t.n])
	slices.SortFunc(all, func(a, b tobs) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return cmp.Compare(a.observer, b.observer)
	})
	unreachable := t.verdict == summary.VerdictUnreachable
	out := all[:0]
	for _, o := range all {
		if o.ok == unreachable {
			if unreachable {
				break // the failing run ends at the newest success
			}
			continue
		}
		if !slices.ContainsFunc(out, func(x tobs) bool { return x.observer == o.observer }) {
			out = append(out, o)
		}
	}
	return out
}

// TargetStatus is the per-target judgement of one target and family.
type TargetStatus struct {
	Key     TargetKey
	Target  summary.Target
	Verdict summary.Verdict
	// Since: when the verdict was reached; OutageStart: the first failed observation of
	// the run that made it Unreachable (zero otherwise).
	Since, OutageStart time.Time
	// Failing and Reaching: distinct observer nodes in the newest run of failures or
	// successes.
	Failing, Reaching int
	LastSeen          time.Time
}

func (t *targetState) status() TargetStatus {
	return TargetStatus{
		Key: t.key, Target: t.target, Verdict: t.verdict, Since: t.since, OutageStart: t.outageStart,
		Failing: t.failing, Reaching: t.reaching, LastSeen: t.lastSeen,
	}
}
