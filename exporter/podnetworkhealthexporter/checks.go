// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/ratelog"
	"github.com/netpulse/netpulse/internal/targetpolicy"
)

// Skip reasons of check results (otelcol_pod_network_health_datapoints_skipped).
const (
	SkipCheckUnknown       = "check_unknown"         // no such check (or not accepted)
	SkipCheckWrongVantage  = "check_wrong_vantage"   // not the vantage point the check was placed on
	SkipCheckMalformed     = "check_malformed"       // a record without the contract's attributes
	SkipCheckUnauthentic   = "check_unauthenticated" // require_authenticated_observers: no or another identity
	SkipCheckInvalid       = "check_invalid"         // a reason, source address or reporter name the API schema would refuse
	checkResolveBatch      = 20                      // placements resolved per reconcile tick (reads)
	checkRetryUnaccepted   = 30 * time.Second
	checkWriteReasonPrefix = "check_"
	// defaultMaxChecksPerNamespace is checks.max_checks_per_namespace's default.
	defaultMaxChecksPerNamespace = 100
	// maxSourceAddressLength is the schema's bound of status.vantage.sourceAddress.
	maxSourceAddressLength = 64
)

var (
	networkCheckGVR = v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.NetworkCheckPlural)
	pnccGVR         = ocv1alpha1.Resource
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
	obj       any // the latest typed object (*v1alpha1.NetworkCheck or *ocv1alpha1.PodNetworkConnectivityCheck)

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
	rejected       *rejectedWrite
	rejectedLabels string
}

// rejectedWrite is a check status the API refused, so it is not written again.
type rejectedWrite struct {
	st     checkstatus.Status
	place  placement
	source string
}

// checkController places declared checks, folds their results into their status and writes
// it through the exporter's writer, under its one write budget.
type checkController struct {
	e       *pnhExporter
	cfg     ChecksConfig
	policy  targetpolicy.Policy
	logger  *zap.Logger
	dyn     dynamic.Interface
	factory dynamicinformer.DynamicSharedInformerFactory
	leading atomic.Bool
	// resuming: a re-read of the checks at takeover is in flight.
	resuming atomic.Bool
	skipLog  *ratelog.Logger
	// eventsRL is the checks' own Event limiter (checks.events_per_minute); nil without
	// Events.
	eventsRL *rate.Limiter

	mu     sync.Mutex
	checks map[checkKey]*checkState
	// resumed: this leadership term has re-read every check's status from the API (a
	// quorum read at takeover); until then nothing of the checks is written or emitted.
	resumed bool
	// served, nsServed and overQuota count the checks by quota state (max_checks bounds
	// served and overQuota each; max_checks_per_namespace bounds nsServed).
	served, overQuota int
	nsServed          map[string]int
	reasonsSeen       map[string]bool // accepted_reason values recorded so far
	// quotaDirty: namespaces with checks waiting for quota whose served set may not be
	// their oldest (checks arrive in the informer's order, not by age).
	quotaDirty map[string]bool
	stop       chan struct{}
}

func newCheckController(e *pnhExporter, cfg ChecksConfig) *checkController {
	return &checkController{e: e, cfg: cfg, logger: e.logger,
		policy:  targetpolicy.Policy{AllowLoopback: cfg.AllowLoopback, AllowLinkLocal: cfg.AllowLinkLocal},
		skipLog: ratelog.New(e.logger, 30*time.Second, 2),
		checks:  map[checkKey]*checkState{}, nsServed: map[string]int{}, quotaDirty: map[string]bool{}, stop: make(chan struct{})}
}

// start watches the checks (every replica: a standby keeps the state warm).
func (c *checkController) start(dyn dynamic.Interface) {
	c.dyn = dyn
	c.factory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c.watch(networkCheckGVR, v1alpha1.NetworkCheckKind)
	if c.cfg.OpenShift {
		c.watch(pnccGVR, ocv1alpha1.Kind)
	}
	c.factory.Start(c.stop)
}

func (c *checkController) shutdown() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	if c.factory != nil {
		c.factory.Shutdown()
	}
}

func (c *checkController) watch(gvr schema.GroupVersionResource, kind string) {
	inf := c.factory.ForResource(gvr).Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.upsert(kind, o) },
		UpdateFunc: func(_, o any) { c.upsert(kind, o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if u, ok := o.(*unstructured.Unstructured); ok {
				c.mu.Lock()
				c.forgetLocked(checkKey{kind, u.GetNamespace(), u.GetName()})
				c.mu.Unlock()
			}
		},
	})
}

func (c *checkController) upsert(kind string, o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	c.upsertObject(kind, u, false)
}

// upsertObject tracks the check u. Its status is read into the check's state at first
// sight, on every update while this replica is not the leader (a standby mirrors the API,
// it does not keep a copy from its start), and with fromAPI (the leader's re-read at
// takeover); a leader otherwise ignores the status it reads back (its own writes).
func (c *checkController) upsertObject(kind string, u *unstructured.Unstructured, fromAPI bool) {
	key := checkKey{kind, u.GetNamespace(), u.GetName()}
	var (
		obj      any
		st       checkstatus.Status
		interval = checkstatus.DefaultInterval
		flavour  = checkstatus.FlavourNetpulse
	)
	switch kind {
	case ocv1alpha1.Kind:
		var pc ocv1alpha1.PodNetworkConnectivityCheck
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pc); err != nil {
			c.logger.Warn("pod_network_health: malformed PodNetworkConnectivityCheck", zap.String("check", key.String()), zap.Error(err))
			return
		}
		obj, st, flavour = &pc, statusOfPNCC(&pc.Status), checkstatus.FlavourOpenShift
		if v, err := time.ParseDuration(pc.Annotations[v1alpha1.AnnotationCheckInterval]); err == nil && v >= checkstatus.MinInterval {
			interval = v
		}
	default:
		var nc v1alpha1.NetworkCheck
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc); err != nil {
			c.logger.Warn("pod_network_health: malformed NetworkCheck", zap.String("check", key.String()), zap.Error(err))
			return
		}
		obj, st = &nc, statusOfNC(&nc.Status)
		if nc.Spec.Interval != nil {
			interval = nc.Spec.Interval.Duration
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cs, known := c.checks[key]
	switch {
	case !known:
		over := c.nsServed[key.namespace] >= c.cfg.MaxChecksPerNamespace
		if (over && c.overQuota >= c.cfg.MaxChecks) || (!over && c.served >= c.cfg.MaxChecks) {
			c.skipLog.Log(zap.WarnLevel, "pod_network_health: more declared checks than checks.max_checks; not serving some", zap.String("check", key.String()))
			return
		}
		if over {
			c.overQuota++
			c.quotaDirty[key.namespace] = true
			c.skipLog.Log(zap.WarnLevel, "pod_network_health: a namespace has more declared checks than checks.max_checks_per_namespace; its newest are not served",
				zap.String("check", key.String()), zap.Int("max_checks_per_namespace", c.cfg.MaxChecksPerNamespace))
		} else {
			c.served++
			c.nsServed[key.namespace]++
		}
		cs = &checkState{key: key, overQuota: over}
		c.checks[key] = cs
		c.adoptLocked(cs, u, obj, st, flavour)
	case cs.uid != u.GetUID():
		// A re-created object: start from what the API holds.
		*cs = checkState{key: key, overQuota: cs.overQuota}
		c.adoptLocked(cs, u, obj, st, flavour)
	case fromAPI || !c.leading.Load():
		c.adoptLocked(cs, u, obj, st, flavour)
	}
	cs.created = u.GetCreationTimestamp().Time
	if g := u.GetGeneration(); g != cs.generation {
		cs.generation = g
		cs.wantResolve = true
	}
	cs.interval, cs.labels, cs.obj = interval, u.GetLabels(), obj
}

// adoptLocked resumes cs from what the API holds (st, the placement recorded in a
// NetworkCheck's status): that is what was written. Results this replica folded in that
// are newer than the API's are kept, folded onto it again (without Events: whoever held
// the Lease when they came emitted them).
func (c *checkController) adoptLocked(cs *checkState, u *unstructured.Unstructured, obj any, st checkstatus.Status, flavour checkstatus.Flavour) {
	var newer []checkstatus.Entry
	for _, es := range [][]checkstatus.Entry{cs.st.Successes, cs.st.Failures} {
		for _, e := range es {
			if e.Time.After(st.LastResultTime) {
				newer = append(newer, e)
			}
		}
	}
	cs.uid = u.GetUID()
	cs.written = st.DeepCopy()
	cs.st, _ = checkstatus.Apply(st, flavour, newer...)
	cs.lastWrite = time.Now()
	cs.rejected, cs.rejectedLabels = nil, ""
	if nc, ok := obj.(*v1alpha1.NetworkCheck); ok {
		cs.place, cs.writtenPlace = placementOfNC(&nc.Status), placementOfNC(&nc.Status)
		cs.placed = cs.place.sourcePod != "" || cs.place.reason != ""
		if cond := findCondition(nc.Status.Conditions, v1alpha1.ConditionAccepted); cond != nil {
			cs.placeSince = cond.LastTransitionTime.Time
		}
		cs.observerPod, cs.writtenSource = "", ""
		if nc.Status.Vantage != nil {
			cs.observerPod, cs.writtenSource = nc.Status.Vantage.ObserverPod, nc.Status.Vantage.SourceAddress
		}
		if len(newer) == 0 || cs.sourceAddress == "" {
			cs.sourceAddress = cs.writtenSource
		}
	}
	if !cs.placed {
		cs.wantResolve = true
	}
}

// forgetLocked drops a deleted check; a check of its namespace waiting for quota takes its
// place (the oldest first).
func (c *checkController) forgetLocked(key checkKey) {
	cs, ok := c.checks[key]
	if !ok {
		return
	}
	delete(c.checks, key)
	if cs.overQuota {
		c.overQuota--
		return
	}
	c.served--
	if c.nsServed[key.namespace]--; c.nsServed[key.namespace] <= 0 {
		delete(c.nsServed, key.namespace)
	}
	var next *checkState
	for _, o := range c.checks {
		if o.overQuota && o.key.namespace == key.namespace &&
			(next == nil || o.created.Before(next.created) || (o.created.Equal(next.created) && o.key.name < next.key.name)) {
			next = o
		}
	}
	if next != nil {
		next.overQuota = false
		next.wantResolve = true
		c.overQuota--
		c.served++
		c.nsServed[key.namespace]++
	}
}

// rebalanceLocked makes each namespace whose quota is in question serve its oldest checks
// (creation time, then name), whatever order the checks arrived in; a check that loses
// its slot is refused as NamespaceQuotaExceeded at once, one that gains one is placed.
// One pass over the checks.
func (c *checkController) rebalanceLocked() {
	if len(c.quotaDirty) == 0 {
		return
	}
	byNS := map[string][]*checkState{}
	for _, cs := range c.checks {
		if c.quotaDirty[cs.key.namespace] {
			byNS[cs.key.namespace] = append(byNS[cs.key.namespace], cs)
		}
	}
	clear(c.quotaDirty)
	for ns, list := range byNS {
		slices.SortFunc(list, func(a, b *checkState) int {
			if n := a.created.Compare(b.created); n != 0 {
				return n
			}
			return strings.Compare(a.key.String(), b.key.String())
		})
		served := min(len(list), c.nsServed[ns]) // the namespace keeps its number of slots
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

// resume re-reads every check from the API (a quorum read, paginated) at the start of a
// leadership term, so the new leader continues from what the previous one wrote — its
// successes, failures, outages and conditions — whatever this replica held before: a
// takeover neither rolls a status back nor emits an Event again.
func (c *checkController) resume(ctx context.Context) error {
	kinds := []struct {
		gvr  schema.GroupVersionResource
		kind string
	}{{networkCheckGVR, v1alpha1.NetworkCheckKind}}
	if c.cfg.OpenShift {
		kinds = append(kinds, struct {
			gvr  schema.GroupVersionResource
			kind string
		}{pnccGVR, ocv1alpha1.Kind})
	}
	var items []struct {
		kind string
		u    *unstructured.Unstructured
	}
	for _, k := range kinds {
		opts := metav1.ListOptions{Limit: 500}
		for {
			list, err := c.dyn.Resource(k.gvr).List(ctx, opts)
			if err != nil {
				return fmt.Errorf("list %s: %w", k.gvr.Resource, err)
			}
			for i := range list.Items {
				items = append(items, struct {
					kind string
					u    *unstructured.Unstructured
				}{k.kind, &list.Items[i]})
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	if !c.leading.Load() {
		return nil // the term ended meanwhile
	}
	for _, it := range items {
		c.upsertObject(it.kind, it.u, true)
	}
	c.mu.Lock()
	c.resumed = c.leading.Load()
	c.mu.Unlock()
	return nil
}

// endTerm: the next leadership term resumes from the API again.
func (c *checkController) endTerm() {
	c.mu.Lock()
	c.resumed = false
	c.leading.Store(false)
	c.mu.Unlock()
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// placementOfNC reads back the placement a previous writer recorded.
func placementOfNC(s *v1alpha1.NetworkCheckStatus) placement {
	var p placement
	if a := findCondition(s.Conditions, v1alpha1.ConditionAccepted); a != nil {
		p.accepted, p.reason, p.message = a.Status == metav1.ConditionTrue, a.Reason, a.Message
		if p.accepted {
			p.reason = ""
		}
	}
	if s.Vantage != nil {
		p.mode, p.sourcePod, p.node = s.Vantage.Mode, s.Vantage.SourcePod, s.Vantage.Node
	}
	if s.Target != nil {
		p.endpoint, p.targetKind = s.Target.Endpoint, s.Target.Kind
	}
	return p
}

// reconcile runs on the leader every reconcileEvery: resolve placements (a bounded batch of
// reads), fix labels, write statuses that are due, prune stale OpenShift checks.
func (c *checkController) reconcile(ctx context.Context, now time.Time) {
	c.mu.Lock()
	resumed := c.resumed
	c.mu.Unlock()
	if !resumed {
		// The re-read runs beside the lead loop, so a long list never delays the pairs'
		// reconcile; the checks wait for it.
		if c.resuming.CompareAndSwap(false, true) {
			go func() {
				defer c.resuming.Store(false)
				if err := c.resume(ctx); err != nil && ctx.Err() == nil {
					c.skipLog.Log(zap.WarnLevel, "pod_network_health: cannot re-read the declared checks at takeover; not writing them until it succeeds", zap.Error(err))
				}
			}()
		}
		return
	}
	c.mu.Lock()
	c.rebalanceLocked()
	var toResolve []*checkState
	for _, cs := range c.checks {
		if cs.overQuota {
			// No reads for a check beyond its namespace's quota: it is refused as it is.
			if p := c.quotaRefusal(); p != cs.place || !cs.placed {
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
			now.Sub(cs.placeAt) >= c.cfg.Heartbeat,
			!cs.place.accepted && now.Sub(cs.placeAt) >= checkRetryUnaccepted,
			silent && now.Sub(cs.placeAt) >= cs.interval:
			toResolve = append(toResolve, cs)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(toResolve, func(a, b *checkState) int { return a.placeAt.Compare(b.placeAt) })
	for i, cs := range toResolve {
		if i >= checkResolveBatch || ctx.Err() != nil {
			break
		}
		c.mu.Lock()
		obj, over := cs.obj, cs.overQuota
		c.mu.Unlock()
		if over {
			continue
		}
		p := c.resolve(ctx, cs.key, obj)
		c.mu.Lock()
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
		c.mu.Unlock()
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	policy := plan.CheckPolicy{Heartbeat: c.cfg.Heartbeat}
	byReason := map[string]int64{}
	for _, cs := range c.checks {
		if !cs.placed || cs.deleting {
			continue
		}
		if cs.place.accepted {
			byReason[v1alpha1.ReasonCheckAccepted]++
		} else {
			byReason[cs.place.reason]++
		}
		if cs.key.kind == ocv1alpha1.Kind && plan.CheckStale(cs.st.LastResultTime, cs.sourceGoneSince, now, c.cfg.PruneAfter) {
			cs.deleting = true
			c.enqueueDelete(cs)
			continue
		}
		c.syncLabels(cs)
		if cs.place.accepted {
			since := cs.placeSince
			if st, changed := checkstatus.Silence(cs.st, now, checkstatus.SilentAfter(cs.interval), since); changed {
				cs.st = st
			}
		}
		due, why := policy.DueWrite(plan.CheckWrite{Written: cs.written, LastWrite: cs.lastWrite, Current: cs.st,
			PlacementChanged: cs.key.kind == v1alpha1.NetworkCheckKind && cs.place != cs.writtenPlace,
			SourceChanged:    cs.key.kind == v1alpha1.NetworkCheckKind && cs.sourceAddress != cs.writtenSource,
			RejectedAsIs:     cs.rejected != nil && cs.rejected.place == cs.place && cs.rejected.source == cs.sourceAddress && cs.rejected.st.Equal(cs.st),
		}, now)
		if due {
			c.enqueueStatus(cs, why)
		}
	}
	c.recordChecks(ctx, byReason)
}

// recordChecks sets otelcol_pod_network_health_checks{accepted_reason} (c.mu held): a
// reason that no check has any more reads 0.
func (c *checkController) recordChecks(ctx context.Context, byReason map[string]int64) {
	if c.reasonsSeen == nil {
		c.reasonsSeen = map[string]bool{}
	}
	for r := range byReason {
		c.reasonsSeen[r] = true
	}
	for r := range c.reasonsSeen {
		c.e.tb.PodNetworkHealthChecks.Record(ctx, byReason[r], metric.WithAttributes(attribute.String("accepted_reason", r)))
	}
}

// quotaRefusal is the placement of a check beyond its namespace's quota.
func (c *checkController) quotaRefusal() placement {
	return refuse(v1alpha1.ReasonNamespaceQuotaExceeded, fmt.Sprintf(
		"not served: this namespace has more checks than the gateway serves per namespace (checks.max_checks_per_namespace: %d); the oldest are served first",
		c.cfg.MaxChecksPerNamespace))
}

// wantLabels are the labels that place cs on its vantage point (none unless accepted).
func wantLabels(p placement) map[string]string {
	if !p.accepted {
		return nil
	}
	l := map[string]string{v1alpha1.LabelVantageMode: string(p.mode), v1alpha1.LabelVantageNode: p.node}
	if p.mode == v1alpha1.VantageSidecar {
		l[v1alpha1.LabelVantagePod] = p.sourcePod
	}
	return l
}

func (c *checkController) syncLabels(cs *checkState) {
	want := wantLabels(cs.place)
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
		return
	}
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
	if cs.rejectedLabels == string(data) {
		return // refused by the API as it is
	}
	gvr, key := c.gvr(cs.key), cs.key
	c.e.writer.enqueue("checklabels/"+key.String(), writequeue.CheckVerdict, func(ctx context.Context) error {
		_, err := c.dyn.Resource(gvr).Namespace(key.namespace).Patch(ctx, key.name, types.MergePatchType, data, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if rejected(err) {
			c.mu.Lock()
			if cur, ok := c.checks[key]; ok {
				cur.rejectedLabels = string(data)
			}
			c.mu.Unlock()
		}
		return err
	}, checkWriteReasonPrefix+"placement")
}

func (c *checkController) gvr(k checkKey) schema.GroupVersionResource {
	if k.kind == ocv1alpha1.Kind {
		return pnccGVR
	}
	return networkCheckGVR
}

// enqueueStatus replaces the check's status (one JSON patch on the status subresource: no
// resourceVersion, no conflicts). The status is built when the write runs, so a queued
// write always carries the newest state; what it wrote becomes the written state.
func (c *checkController) enqueueStatus(cs *checkState, why string) {
	key := cs.key
	// A check's significant changes (after the pairs' verdicts and Events), then its
	// routine writes, all within the checks' share of the budget. A check beyond its
	// namespace's quota is routine whatever changed.
	prio := writequeue.CheckUpdate
	if plan.CheckWriteSignificant(why) && !cs.overQuota {
		prio = writequeue.CheckVerdict
	}
	c.e.writer.enqueue("checkstatus/"+key.String(), prio, func(ctx context.Context) error {
		c.mu.Lock()
		cur, ok := c.checks[key]
		if !ok {
			c.mu.Unlock()
			return nil
		}
		st, place, src := cur.st.DeepCopy(), cur.place, cur.sourceAddress
		var status any
		if key.kind == ocv1alpha1.Kind {
			status = pnccStatus(st)
		} else {
			status = ncStatus(cur)
		}
		c.mu.Unlock()
		data, err := json.Marshal([]map[string]any{{"op": "add", "path": "/status", "value": status}})
		if err != nil {
			return err
		}
		_, err = c.dyn.Resource(c.gvr(key)).Namespace(key.namespace).Patch(ctx, key.name, types.JSONPatchType, data, metav1.PatchOptions{}, "status")
		if apierrors.IsNotFound(err) {
			return nil
		}
		if rejected(err) {
			// Marked: not queued again until the state changes (the writer counts it
			// and logs it once).
			c.mu.Lock()
			if cur, ok := c.checks[key]; ok {
				cur.rejected = &rejectedWrite{st: st, place: place, source: src}
			}
			c.mu.Unlock()
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		if cur, ok := c.checks[key]; ok {
			cur.written, cur.writtenPlace, cur.writtenSource, cur.lastWrite, cur.rejected = st, place, src, time.Now(), nil
		}
		c.mu.Unlock()
		return nil
	}, checkWriteReasonPrefix+why)
}

func (c *checkController) enqueueDelete(cs *checkState) {
	key := cs.key
	c.logger.Info("pod_network_health: pruning a PodNetworkConnectivityCheck whose source pod is gone",
		zap.String("check", key.String()), zap.Time("source_gone_since", cs.sourceGoneSince))
	c.e.writer.enqueue("checkstatus/"+key.String(), writequeue.CheckUpdate, func(ctx context.Context) error {
		err := c.dyn.Resource(pnccGVR).Namespace(key.namespace).Delete(ctx, key.name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}, checkWriteReasonPrefix+"prune")
}

// resolve places one check: its source pod (and so its vantage point) and its target. It
// reads pods and Services on demand (bounded: checkResolveBatch per second, and each
// check at most once per heartbeat unless it changes, is refused or falls silent).
func (c *checkController) resolve(ctx context.Context, key checkKey, obj any) placement {
	kube := c.e.kube
	var p placement
	var sourceName, endpoint, targetKind string
	var selector *metav1.LabelSelector
	cross := false // the target is another namespace's pod or Service (opted in)
	switch o := obj.(type) {
	case *ocv1alpha1.PodNetworkConnectivityCheck:
		sourceName, endpoint, targetKind = o.Spec.SourcePod, o.Spec.TargetEndpoint, "Address"
	case *v1alpha1.NetworkCheck:
		sourceName, selector = o.Spec.Source.PodName, o.Spec.Source.PodSelector
		t := o.Spec.Target
		probe := o.Spec.Probe
		switch {
		case t.Pod != nil:
			ns := t.Pod.Namespace
			if ns == "" {
				ns = key.namespace
			}
			if ns != key.namespace {
				if !c.cfg.AllowCrossNamespaceTargets {
					return refuseOutsideNamespace("pod")
				}
				// Opted in: one message whatever the reason, so a namespace editor learns
				// nothing of other namespaces' pods from a refusal.
				pod, err := kube.CoreV1().Pods(ns).Get(ctx, t.Pod.Name, metav1.GetOptions{})
				if err != nil || pod.Status.PodIP == "" {
					return refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target pod %s/%s: not found, not readable or without an IP yet", ns, t.Pod.Name))
				}
				endpoint, targetKind, cross = hostPort(pod.Status.PodIP, t.Pod.Port, probe), "Pod", true
				break
			}
			pod, err := kube.CoreV1().Pods(ns).Get(ctx, t.Pod.Name, metav1.GetOptions{})
			if err != nil {
				return refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target pod %s/%s: %v", ns, t.Pod.Name, shortErr(err)))
			}
			if pod.Status.PodIP == "" {
				return refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target pod %s/%s has no IP yet", ns, t.Pod.Name))
			}
			endpoint, targetKind = hostPort(pod.Status.PodIP, t.Pod.Port, probe), "Pod"
		case t.Service != nil:
			ns := t.Service.Namespace
			if ns == "" {
				ns = key.namespace
			}
			if ns != key.namespace {
				if !c.cfg.AllowCrossNamespaceTargets {
					return refuseOutsideNamespace("service")
				}
				svc, err := kube.CoreV1().Services(ns).Get(ctx, t.Service.Name, metav1.GetOptions{})
				if err != nil || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone ||
					!slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Port == t.Service.Port }) {
					return refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target service %s/%s port %d: not found, not readable, headless or without that port", ns, t.Service.Name, t.Service.Port))
				}
				endpoint, targetKind, cross = hostPort(svc.Spec.ClusterIP, t.Service.Port, probe), "Service", true
				break
			}
			svc, err := kube.CoreV1().Services(ns).Get(ctx, t.Service.Name, metav1.GetOptions{})
			if err != nil {
				return refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target service %s/%s: %v", ns, t.Service.Name, shortErr(err)))
			}
			if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
				return refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target service %s/%s has no ClusterIP (headless); name a pod instead", ns, t.Service.Name))
			}
			if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Port == t.Service.Port }) {
				return refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target service %s/%s has no port %d", ns, t.Service.Name, t.Service.Port))
			}
			endpoint, targetKind = hostPort(svc.Spec.ClusterIP, t.Service.Port, probe), "Service"
		case t.Address != "":
			endpoint, targetKind = t.Address, "Address"
		case t.URL != "":
			endpoint, targetKind = t.URL, "URL"
		default:
			return refuse(v1alpha1.ReasonInvalidCheck, "no target")
		}
	default:
		return refuse(v1alpha1.ReasonInvalidCheck, "unknown check kind")
	}
	if err := c.vet(endpoint); err != nil {
		if cross {
			return refuse(v1alpha1.ReasonTargetRefused, "target refused by the target policy, nothing is sent")
		}
		return refuse(v1alpha1.ReasonTargetRefused, fmt.Sprintf("target %s refused by the target policy, nothing is sent: %v", endpoint, err))
	}
	pod, err := c.sourcePod(ctx, key.namespace, sourceName, selector)
	if err != nil {
		if apierrors.IsNotFound(err) || err == errNoPodSelected {
			return refuse(v1alpha1.ReasonSourceNotFound, fmt.Sprintf("source pod %s", describeSource(key.namespace, sourceName, selector, err)))
		}
		return refuse(v1alpha1.ReasonSourceNotFound, fmt.Sprintf("source pod %s: %v", describeSource(key.namespace, sourceName, selector, nil), shortErr(err)))
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
		return refuse(v1alpha1.ReasonSourceNotReady, fmt.Sprintf("source pod %s/%s is %s", pod.Namespace, pod.Name, pod.Status.Phase))
	}
	p = placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: pod.Name, node: pod.Spec.NodeName, endpoint: endpoint, targetKind: targetKind}
	if pod.Labels[v1alpha1.LabelSidecar] == "true" {
		p.mode = v1alpha1.VantageSidecar
		p.message = "probed from the source pod by its netpulse sidecar"
	} else {
		p.message = fmt.Sprintf("probed from the netpulse agent on node %s (the source pod has no netpulse sidecar)", pod.Spec.NodeName)
	}
	return p
}

// refuseOutsideNamespace refuses a pod or Service target in another namespace without
// looking it up: the message is the same whether it exists or not.
func refuseOutsideNamespace(what string) placement {
	return refuse(v1alpha1.ReasonTargetOutsideNamespace, fmt.Sprintf(
		"the target %s is in another namespace: a check may only target pods and Services of its own namespace (the cluster admin can allow others with the gateway's checks.allow_cross_namespace_targets); nothing was looked up", what))
}

var errNoPodSelected = fmt.Errorf("no running pod matches the selector")

func describeSource(ns, name string, sel *metav1.LabelSelector, err error) string {
	what := ns + "/" + name
	if sel != nil {
		what = ns + " selector " + metav1.FormatLabelSelector(sel)
	}
	if err != nil {
		return what + ": " + shortErr(err)
	}
	return what
}

func (c *checkController) sourcePod(ctx context.Context, ns, name string, sel *metav1.LabelSelector) (*corev1.Pod, error) {
	if sel == nil {
		return c.e.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	list, err := c.e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.String(), ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	var best *corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			continue
		}
		if best == nil || p.CreationTimestamp.Before(&best.CreationTimestamp) ||
			(p.CreationTimestamp.Equal(&best.CreationTimestamp) && p.Name < best.Name) {
			best = p
		}
	}
	if best == nil {
		return nil, errNoPodSelected
	}
	return best, nil
}

func refuse(reason, msg string) placement {
	return placement{reason: reason, message: v1alpha1.TruncateMessage(msg, v1alpha1.MaxMessageLength)}
}

func shortErr(err error) string {
	if apierrors.IsNotFound(err) {
		return "not found"
	}
	return err.Error()
}

// hostPort is the endpoint of a resolved pod or Service: the address (icmp) or address:port.
func hostPort(ip string, port int32, probe v1alpha1.ProbeType) string {
	if probe == v1alpha1.ProbeTypeICMP || port == 0 {
		return ip
	}
	return net.JoinHostPort(ip, strconv.Itoa(int(port)))
}

// vet applies the target policy to an endpoint whose host is an IP literal (names are
// vetted where they are resolved, by the runner).
func (c *checkController) vet(endpoint string) error {
	host := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return err
		}
		host = u.Hostname()
	} else if h, _, err := net.SplitHostPort(endpoint); err == nil {
		host = h
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return c.policy.Check(a)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return c.policy.Check(netip.MustParseAddr("127.0.0.1"))
	}
	return nil
}

// consumeLogs folds check results into their checks' status. It never waits for the API.
func (c *checkController) consumeLogs(ctx context.Context, ld plog.Logs) {
	info := client.FromContext(ctx)
	skipped := map[string]int{}
	var events []checkEvent
	now := time.Now()
	c.mu.Lock()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		ra := rl.Resource().Attributes()
		str := func(k string) string {
			if v, ok := ra.Get(k); ok {
				return v.Str()
			}
			return ""
		}
		rNs, rPod, rUID, rNode := str(contract.K8sNamespaceName), str(contract.K8sPodName), str(contract.K8sPodUID), str(contract.K8sNodeName)
		var bd *identity.Binding // nil: no binding required
		if c.e.cfg.RequireAuthenticatedObservers {
			b := identity.Match(info, identity.Source{Namespace: rNs, PodName: rPod, PodUID: rUID, NodeName: rNode})
			bd = &b
		}
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				if lr.EventName() != contract.CheckResultEvent {
					continue
				}
				if bd != nil && bd.Refused != "" {
					skipped[SkipCheckUnauthentic]++
					continue
				}
				ev, reason := c.apply(lr, rNs, rPod, rNode, bd, now)
				if reason != "" {
					skipped[reason]++
					continue
				}
				events = append(events, ev...)
			}
		}
	}
	// Events only from a leader that has resumed from the API (decided under c.mu, so
	// they were derived from the resumed state).
	emit := c.leading.Load() && c.resumed
	c.mu.Unlock()
	for reason, n := range skipped {
		c.e.tb.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", reason)))
		c.skipLog.Log(zap.WarnLevel, "pod_network_health: check results not used", zap.String("reason", reason), zap.Int("records", n))
	}
	if emit {
		c.emitEvents(events)
	}
}

// validResult checks what a sender reports against the API schema of the status it ends
// up in, before anything is queued: the reason (the Reachable condition's reason pattern,
// at most 64 characters), the source address (an IP address, at most 64 characters) and
// the reporter's namespace and pod name (status.vantage.observerPod, at most 317). One
// record that the API would refuse would otherwise make every status write of its check
// fail with 422. Messages need no check: they are cut to the schema's length.
func validResult(reason, src, rNs, rPod string) bool {
	if !checkstatus.ValidReason(reason) {
		return false
	}
	if src != "" {
		if len(src) > maxSourceAddressLength {
			return false
		}
		if _, err := netip.ParseAddr(src); err != nil {
			return false
		}
	}
	if rNs != "" && len(validation.IsDNS1123Label(rNs)) > 0 {
		return false
	}
	if rPod != "" && len(validation.IsDNS1123Subdomain(rPod)) > 0 {
		return false
	}
	return true
}

type checkEvent struct {
	key checkKey
	uid types.UID
	ev  checkstatus.Event
}

// apply folds one record into its check (c.mu held); it returns the Events to emit, or a
// skip reason. bd is the reporter's binding (nil without require_authenticated_observers).
func (c *checkController) apply(lr plog.LogRecord, rNs, rPod, rNode string, bd *identity.Binding, now time.Time) ([]checkEvent, string) {
	attr := func(k string) string {
		if v, ok := lr.Attributes().Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	kind, ns, name := attr(contract.CheckKind), attr(contract.CheckNamespace), attr(contract.CheckName)
	succ, okSucc := lr.Attributes().Get(contract.CheckSuccess)
	if kind == "" || ns == "" || name == "" || !okSucc || lr.Timestamp() == 0 {
		return nil, SkipCheckMalformed
	}
	cs, ok := c.checks[checkKey{kind, ns, name}]
	if !ok || !cs.place.accepted || (attr(contract.CheckUID) != "" && types.UID(attr(contract.CheckUID)) != cs.uid) {
		return nil, SkipCheckUnknown
	}
	// Only the vantage point the check was placed on may report for it: its sidecar (the
	// source pod itself) or the agent of the source pod's node.
	switch cs.place.mode {
	case v1alpha1.VantageSidecar:
		if rNs != ns || rPod != cs.place.sourcePod {
			return nil, SkipCheckWrongVantage
		}
	default:
		if rNode != cs.place.node {
			return nil, SkipCheckWrongVantage
		}
	}
	// A check placed on a node's agent takes results from an agent only: a sidecar vouches
	// for its own pod's checks, never for agent-mode checks placed on its node.
	if bd != nil && cs.place.mode != v1alpha1.VantageSidecar {
		if refusal, ok := bd.Agent(); !ok {
			return nil, string(refusal)
		}
	}
	t := lr.Timestamp().AsTime()
	if t.After(now.Add(time.Minute)) {
		return nil, SkipCheckMalformed
	}
	reason, src := attr(contract.CheckReason), attr(contract.SourceAddress)
	if !validResult(reason, src, rNs, rPod) {
		return nil, SkipCheckInvalid
	}
	lat := 0.0
	if v, ok := lr.Attributes().Get(contract.CheckLatency); ok {
		lat = v.Double()
	}
	if !(lat >= 0 && lat <= 3600) { // NaN too
		lat = 0
	}
	entry := checkstatus.Entry{Time: t, Success: succ.Bool(), Reason: reason, Message: lr.Body().AsString(),
		Latency: time.Duration(lat * float64(time.Second))}
	flavour := checkstatus.FlavourNetpulse
	if kind == ocv1alpha1.Kind {
		flavour = checkstatus.FlavourOpenShift
	}
	var evs []checkstatus.Event
	cs.st, evs = checkstatus.Apply(cs.st, flavour, entry)
	cs.seenAt = now
	cs.observerPod = rNs + "/" + rPod
	if src != "" {
		cs.sourceAddress = src
	}
	out := make([]checkEvent, 0, len(evs))
	for _, ev := range evs {
		out = append(out, checkEvent{key: cs.key, uid: cs.uid, ev: ev})
	}
	return out, ""
}

// emitEvents writes ConnectivityOutageDetected / ConnectivityRestored on the check, through
// the writer: CheckEvent priority (after the pairs' verdicts and Events, within the checks'
// share of the budget) and the checks' own limiter (checks.events_per_minute), so flapping
// checks never drop or delay a pair's Event.
func (c *checkController) emitEvents(evs []checkEvent) {
	e := c.e
	if c.eventsRL == nil {
		return
	}
	for _, ce := range evs {
		if !c.eventsRL.Allow() {
			e.tb.PodNetworkHealthWritesDropped.Add(context.Background(), 1, metric.WithAttributes(attribute.String("priority", writequeue.CheckEvent.String())))
			e.logger.Info("pod_network_health: event rate limit reached; check event dropped", zap.String("check", ce.key.String()), zap.String("reason", ce.ev.Reason))
			continue
		}
		apiVersion := v1alpha1.SchemeGroupVersion.String()
		if ce.key.kind == ocv1alpha1.Kind {
			apiVersion = ocv1alpha1.SchemeGroupVersion.String()
		}
		e.enqueueEvent(corev1.ObjectReference{APIVersion: apiVersion, Kind: ce.key.kind, Namespace: ce.key.namespace,
			Name: ce.key.name, UID: ce.uid}, ce.ev.Type, ce.ev.Reason, ce.ev.Message, ce.ev.Time, writequeue.CheckEvent)
	}
}
