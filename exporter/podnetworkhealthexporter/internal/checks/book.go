// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/internal/checkstatus"
)

const (
	checkResolveBatch    = 20 // placements resolved per reconcile tick (reads)
	checkRetryUnaccepted = 30 * time.Second
)

type checkKey struct{ kind, namespace, name string }

func (k checkKey) String() string { return k.kind + "/" + k.namespace + "/" + k.name }

// placement is where and at what a check runs, as the gateway resolved it.
type placement struct {
	accepted        bool
	reason, message string
	mode            v1alpha1.VantageMode
	sourcePod, node string
	endpoint        string
	targetKind      string
}

// spec is what a check asks for, whatever its kind (a PodNetworkConnectivityCheck's
// target endpoint is an Address target).
type spec struct {
	sourcePod string
	selector  *metav1.LabelSelector
	target    v1alpha1.CheckTarget
	probe     v1alpha1.ProbeType
}

// observed is one check object as the informer or the re-read saw it, converted by the
// edge: what the core needs of it.
type observed struct {
	key        checkKey
	uid        types.UID
	created    time.Time
	generation int64
	labels     map[string]string
	interval   time.Duration
	spec       spec
	status     checkstatus.Status
	flavour    checkstatus.Flavour
	// recorded: a NetworkCheck's status records its placement (nil for OpenShift's kind).
	recorded *recorded
}

// recorded is the placement a NetworkCheck's status holds (what a previous writer wrote).
type recorded struct {
	place                      placement
	since                      time.Time // the Accepted condition's lastTransitionTime
	sinceKnown                 bool      // the status has an Accepted condition
	observerPod, sourceAddress string
}

// checkState is one check: O(1) per check (at most 10+10 entries and 20 outages), so the
// gateway holds O(checks) for declared checks.
type checkState struct {
	key        checkKey
	uid        types.UID
	created    time.Time // creationTimestamp: the oldest checks of a namespace are served first
	generation int64
	// overQuota: beyond its namespace's checks.max_checks_per_namespace; not served (no
	// reads, no results), its status says NamespaceQuotaExceeded.
	overQuota bool
	interval  time.Duration
	labels    map[string]string
	spec      spec

	place, writtenPlace placement
	placed              bool
	placeAt, placeSince time.Time
	wantResolve         bool
	sourceGoneSince     time.Time

	st, written checkstatus.Status
	lastWrite   time.Time
	seenAt      time.Time
	observerPod string
	// sourceAddress is the address the newest result left from.
	sourceAddress, writtenSource string
	deleting                     bool
	// rejected: the API refused (4xx) the status write of this state; it is not queued
	// again until the state changes (rejectedLabels: the same for the labels patch).
	rejected       *snapshot
	rejectedLabels string

	// The NetworkPolicy explanation of a failing check (policy.go, explain.go).
	policy policyState
}

// snapshot is what one status write carries (and, once written, what was written).
type snapshot struct {
	st     checkstatus.Status
	place  placement
	source string
}

// book is the pure core's memory: every check the gateway serves and their quotas. Its
// methods decide and never do I/O; the controller holds the lock around them.
type book struct {
	cfg    Config
	checks map[checkKey]*checkState
	// served, nsServed and overQuota count the checks by quota state (max_checks bounds
	// served and overQuota each; max_checks_per_namespace bounds nsServed).
	served, overQuota int
	nsServed          map[string]int
	// quotaDirty: namespaces with checks waiting for quota whose served set may not be
	// their oldest (checks arrive in the informer's order, not by age).
	quotaDirty map[string]bool
	// termStart: when this replica's leadership term resumed (zero: not leading yet).
	termStart time.Time
}

// inTakeoverGrace reports whether cs's silence is not judged yet because this leadership
// term began after its last result, less than its silence allowance ago: the results sent
// while the old leader went away were lost with it, and the senders back off until the
// Service points at this replica. Counted from the term, as a new leader's observers get
// their settle time. Found on real nodes: a sidecar's check read NoResults 20 s into a
// gateway takeover (its last result had reached the old leader 30 s before).
func (b *book) inTakeoverGrace(cs *checkState, now time.Time) bool {
	return !b.termStart.IsZero() && cs.st.LastResultTime.Before(b.termStart) &&
		now.Sub(b.termStart) <= checkstatus.SilentAfter(cs.interval)
}

func newBook(cfg Config) *book {
	return &book{cfg: cfg, checks: map[checkKey]*checkState{}, nsServed: map[string]int{}, quotaDirty: map[string]bool{}}
}

// Refusals upsert reports for a check it does not track.
const (
	notTrackedMaxChecks = "max_checks"               // more checks than checks.max_checks
	overNamespaceQuota  = "max_checks_per_namespace" // tracked, but beyond its namespace's quota
)

// upsert tracks the check o. Its status is read into the check's state at first sight, on
// every update while this replica does not lead (a standby mirrors the API, it does not
// keep a copy from its start), and with fromAPI (the leader's re-read at takeover); a
// leader otherwise ignores the status it reads back (its own writes). It returns "" or why
// the check is not (fully) served.
func (b *book) upsert(o observed, fromAPI, leading bool, now time.Time) string {
	cs, known := b.checks[o.key]
	var note string
	switch {
	case !known:
		over := b.nsServed[o.key.namespace] >= b.cfg.MaxChecksPerNamespace
		if (over && b.overQuota >= b.cfg.MaxChecks) || (!over && b.served >= b.cfg.MaxChecks) {
			return notTrackedMaxChecks
		}
		if over {
			b.overQuota++
			b.quotaDirty[o.key.namespace] = true
			note = overNamespaceQuota
		} else {
			b.served++
			b.nsServed[o.key.namespace]++
		}
		cs = &checkState{key: o.key, overQuota: over}
		b.checks[o.key] = cs
		adopt(cs, o, now)
	case cs.uid != o.uid:
		// A re-created object: start from what the API holds.
		*cs = checkState{key: o.key, overQuota: cs.overQuota}
		adopt(cs, o, now)
	case fromAPI || !leading:
		adopt(cs, o, now)
	}
	cs.created = o.created
	if o.generation != cs.generation {
		cs.generation = o.generation
		cs.wantResolve = true
	}
	cs.interval, cs.labels, cs.spec = o.interval, o.labels, o.spec
	return note
}

// adopt resumes cs from what the API holds (its status, the placement recorded in a
// NetworkCheck's status): that is what was written. Results this replica folded in that
// are newer than the API's are kept, folded onto it again (without Events: whoever held
// the Lease when they came emitted them).
func adopt(cs *checkState, o observed, now time.Time) {
	var newer []checkstatus.Entry
	for _, es := range [][]checkstatus.Entry{cs.st.Successes, cs.st.Failures} {
		for _, e := range es {
			if e.Time.After(o.status.LastResultTime) {
				newer = append(newer, e)
			}
		}
	}
	cs.uid = o.uid
	cs.written = o.status.DeepCopy()
	cs.st, _ = checkstatus.Apply(o.status, o.flavour, newer...)
	cs.lastWrite = now
	cs.rejected, cs.rejectedLabels = nil, ""
	if r := o.recorded; r != nil {
		cs.place, cs.writtenPlace = r.place, r.place
		cs.placed = cs.place.sourcePod != "" || cs.place.reason != ""
		if r.sinceKnown {
			cs.placeSince = r.since
		}
		cs.observerPod, cs.writtenSource = r.observerPod, r.sourceAddress
		if len(newer) == 0 || cs.sourceAddress == "" {
			cs.sourceAddress = cs.writtenSource
		}
	}
	if !cs.placed {
		cs.wantResolve = true
	}
}

// forget drops a deleted check; a check of its namespace waiting for quota takes its place
// (the oldest first).
func (b *book) forget(key checkKey) {
	cs, ok := b.checks[key]
	if !ok {
		return
	}
	delete(b.checks, key)
	if cs.overQuota {
		b.overQuota--
		return
	}
	b.served--
	if b.nsServed[key.namespace]--; b.nsServed[key.namespace] <= 0 {
		delete(b.nsServed, key.namespace)
	}
	var next *checkState
	for _, o := range b.checks {
		if o.overQuota && o.key.namespace == key.namespace &&
			(next == nil || o.created.Before(next.created) || (o.created.Equal(next.created) && o.key.name < next.key.name)) {
			next = o
		}
	}
	if next != nil {
		next.overQuota = false
		next.wantResolve = true
		b.overQuota--
		b.served++
		b.nsServed[key.namespace]++
	}
}

// rebalance makes each namespace whose quota is in question serve its oldest checks
// (creation time, then name), whatever order the checks arrived in; a check that loses
// its slot is refused as NamespaceQuotaExceeded at once, one that gains one is placed.
// One pass over the checks.
func (b *book) rebalance() {
	if len(b.quotaDirty) == 0 {
		return
	}
	byNS := map[string][]*checkState{}
	for _, cs := range b.checks {
		if b.quotaDirty[cs.key.namespace] {
			byNS[cs.key.namespace] = append(byNS[cs.key.namespace], cs)
		}
	}
	clear(b.quotaDirty)
	for ns, list := range byNS {
		slices.SortFunc(list, func(a, b *checkState) int {
			if n := a.created.Compare(b.created); n != 0 {
				return n
			}
			return strings.Compare(a.key.String(), b.key.String())
		})
		served := min(len(list), b.nsServed[ns]) // the namespace keeps its number of slots
		for i, cs := range list {
			over := i >= served
			if over == cs.overQuota {
				continue
			}
			cs.overQuota = over
			if !over {
				cs.wantResolve = true
			}
		}
	}
}

// quotaRefusal is the placement of a check beyond its namespace's quota.
func (b *book) quotaRefusal() placement {
	return refuse(v1alpha1.ReasonNamespaceQuotaExceeded, fmt.Sprintf(
		"not served: this namespace has more checks than the gateway serves per namespace (checks.max_checks_per_namespace: %d); the oldest are served first",
		b.cfg.MaxChecksPerNamespace))
}

// dueForPlacement rebalances the quotas, refuses the checks beyond them (no reads) and
// returns the checks whose placement is due to be resolved, the longest unresolved first,
// at most checkResolveBatch: a new or changed check, a heartbeat since the last
// resolution, a refused check after checkRetryUnaccepted, a silent check after an
// interval.
func (b *book) dueForPlacement(now time.Time) []checkKey {
	b.rebalance()
	var due []*checkState
	for _, cs := range b.checks {
		if cs.overQuota {
			// No reads for a check beyond its namespace's quota: it is refused as it is.
			if p := b.quotaRefusal(); p != cs.place || !cs.placed {
				if p.reason != cs.place.reason || !cs.placed {
					cs.placeSince = now
				}
				cs.place, cs.placed, cs.placeAt, cs.wantResolve, cs.observerPod = p, true, now, false, ""
			}
			continue
		}
		silent := !cs.st.LastResultTime.IsZero() && now.Sub(cs.st.LastResultTime) > checkstatus.SilentAfter(cs.interval)
		switch {
		case cs.wantResolve, !cs.placed,
			now.Sub(cs.placeAt) >= b.cfg.Heartbeat,
			!cs.place.accepted && now.Sub(cs.placeAt) >= checkRetryUnaccepted,
			silent && now.Sub(cs.placeAt) >= cs.interval:
			due = append(due, cs)
		}
	}
	slices.SortFunc(due, func(a, b *checkState) int {
		if n := a.placeAt.Compare(b.placeAt); n != 0 {
			return n
		}
		return strings.Compare(a.key.String(), b.key.String())
	})
	keys := make([]checkKey, 0, min(len(due), checkResolveBatch))
	for _, cs := range due[:min(len(due), checkResolveBatch)] {
		keys = append(keys, cs.key)
	}
	return keys
}

// resolvable is what resolving a check's placement needs: its spec, unless it is no longer
// served.
func (b *book) resolvable(key checkKey) (spec, bool) {
	cs, ok := b.checks[key]
	if !ok || cs.overQuota {
		return spec{}, false
	}
	return cs.spec, true
}

// placed records a check's resolved placement.
func (b *book) placed(key checkKey, p placement, now time.Time) {
	cs, ok := b.checks[key]
	if !ok {
		return
	}
	if p != cs.place || !cs.placed {
		if p.accepted != cs.place.accepted || p.reason != cs.place.reason || !cs.placed {
			cs.placeSince = now
		}
		if p.mode != cs.place.mode || p.sourcePod != cs.place.sourcePod || p.node != cs.place.node {
			cs.observerPod = ""
		}
		cs.place = p
	}
	cs.placed, cs.placeAt, cs.wantResolve = true, now, false
	if p.reason == v1alpha1.ReasonSourceNotFound {
		if cs.sourceGoneSince.IsZero() {
			cs.sourceGoneSince = now
		}
	} else {
		cs.sourceGoneSince = time.Time{}
	}
}

// writePlan is what a reconcile writes: its status writes, label patches and prunings,
// and the checks counted by Accepted reason.
type writePlan struct {
	statuses []statusWrite
	labels   []labelPatch
	prunes   []checkKey
	byReason map[string]int64
}

type statusWrite struct {
	key         checkKey
	why         string
	significant bool // a reader acts on it (and the check is within its quota)
}

type labelPatch struct {
	key  checkKey
	data []byte // a JSON merge patch of metadata.labels
}

// plan decides the writes due now: it prunes stale OpenShift checks (marking them
// deleting), fixes the vantage labels, turns silent checks' conditions Unknown and
// applies the write policy to every placed check.
func (b *book) plan(now time.Time, policy plan.CheckPolicy) writePlan {
	out := writePlan{byReason: map[string]int64{}}
	for _, cs := range b.checks {
		if !cs.placed || cs.deleting {
			continue
		}
		if cs.place.accepted {
			out.byReason[v1alpha1.ReasonCheckAccepted]++
		} else {
			out.byReason[cs.place.reason]++
		}
		if cs.key.kind == ocv1alpha1.Kind && plan.CheckStale(cs.st.LastResultTime, cs.sourceGoneSince, now, b.cfg.PruneAfter) {
			cs.deleting = true
			out.prunes = append(out.prunes, cs.key)
			continue
		}
		if data, ok := labelsPatch(cs); ok {
			out.labels = append(out.labels, labelPatch{key: cs.key, data: data})
		}
		if cs.place.accepted && !b.inTakeoverGrace(cs, now) {
			if st, changed := checkstatus.Silence(cs.st, now, checkstatus.SilentAfter(cs.interval), cs.placeSince); changed {
				cs.st = st
			}
		}
		nc := cs.key.kind == v1alpha1.NetworkCheckKind
		r := cs.rejected
		due, why := policy.DueWrite(plan.CheckWrite{Written: cs.written, LastWrite: cs.lastWrite, Current: cs.st,
			PlacementChanged: nc && cs.place != cs.writtenPlace,
			SourceChanged:    nc && cs.sourceAddress != cs.writtenSource,
			RejectedAsIs:     r != nil && r.place == cs.place && r.source == cs.sourceAddress && r.st.Equal(cs.st),
		}, now)
		if due {
			// A check beyond its namespace's quota is routine whatever changed.
			out.statuses = append(out.statuses, statusWrite{key: cs.key, why: why, significant: plan.CheckWriteSignificant(why) && !cs.overQuota})
		}
	}
	return out
}

// labelsMatch says whether have carries exactly the vantage labels of want.
func labelsMatch(have, want map[string]string) bool {
	for _, k := range []string{v1alpha1.LabelVantageMode, v1alpha1.LabelVantageNode, v1alpha1.LabelVantagePod} {
		h, hasH := have[k]
		w, hasW := want[k]
		if hasH != hasW || h != w {
			return false
		}
	}
	return true
}

// wantLabels are the labels that place a check on its vantage point (none unless
// accepted).
func wantLabels(p placement) map[string]string {
	if !p.accepted {
		return nil
	}
	if p.mode == v1alpha1.VantageSidecar {
		return map[string]string{v1alpha1.LabelVantageMode: string(p.mode), v1alpha1.LabelVantageNode: p.node, v1alpha1.LabelVantagePod: p.sourcePod}
	}
	return map[string]string{v1alpha1.LabelVantageMode: string(p.mode), v1alpha1.LabelVantageNode: p.node}
}

// labelsPatch is the merge patch that gives cs the labels of its placement, unless they
// are right or the API refused that very patch.
func labelsPatch(cs *checkState) ([]byte, bool) {
	want := wantLabels(cs.place)
	if labelsMatch(cs.labels, want) {
		return nil, false // the common case, without allocating a patch
	}
	patch := map[string]any{}
	for _, k := range []string{v1alpha1.LabelVantageMode, v1alpha1.LabelVantageNode, v1alpha1.LabelVantagePod} {
		cur, has := cs.labels[k]
		w, wanted := want[k]
		switch {
		case wanted && (!has || cur != w):
			patch[k] = w
		case !wanted && has:
			patch[k] = nil
		}
	}
	if len(patch) == 0 {
		return nil, false
	}
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
	if cs.rejectedLabels == string(data) {
		return nil, false // refused by the API as it is
	}
	return data, true
}

// snapshotOf is what a status write of key carries now (the newest state: a queued write
// always carries it), and the status as the API stores it.
func (b *book) snapshotOf(key checkKey) (snapshot, any, bool) {
	cs, ok := b.checks[key]
	if !ok {
		return snapshot{}, nil, false
	}
	s := snapshot{st: cs.st.DeepCopy(), place: cs.place, source: cs.sourceAddress}
	if key.kind == ocv1alpha1.Kind {
		return s, pnccStatus(s.st), true
	}
	return s, ncStatus(cs), true
}

// written: s reached the API at `at`.
func (b *book) written(key checkKey, s snapshot, at time.Time) {
	if cs, ok := b.checks[key]; ok {
		cs.written, cs.writtenPlace, cs.writtenSource, cs.lastWrite, cs.rejected = s.st, s.place, s.source, at, nil
	}
}

// refused: the API refused s for good; it is not written again until the state changes.
func (b *book) refused(key checkKey, s snapshot) {
	if cs, ok := b.checks[key]; ok {
		cs.rejected = &s
	}
}

// labelsRefused: the API refused the labels patch data for good.
func (b *book) labelsRefused(key checkKey, data []byte) {
	if cs, ok := b.checks[key]; ok {
		cs.rejectedLabels = string(data)
	}
}
