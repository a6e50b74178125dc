// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/client/informers/externalversions"
	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/netpolicy"
	"github.com/netpulse/netpulse/internal/ratelog"
	"github.com/netpulse/netpulse/internal/targetpolicy"
)

const writeReasonPrefix = "check_"

// Config is the controller's part of the exporter's checks configuration.
type Config struct {
	OpenShift                  bool
	Heartbeat, PruneAfter      time.Duration
	MaxChecks                  int
	MaxChecksPerNamespace      int
	AllowCrossNamespaceTargets bool
	AllowLoopback              bool
	AllowLinkLocal             bool
	EventsPerMinute            int
	// ExplainNetworkPolicy: a failing check whose path the cluster's NetworkPolicies deny
	// reads NetworkPolicyDenied, naming them (explain.go).
	ExplainNetworkPolicy bool
}

// Deps is what the controller is given by the exporter: no pointer to it.
type Deps struct {
	Logger    *zap.Logger
	Telemetry *metadata.TelemetryBuilder
	// Enqueue queues one write under the exporter's one write budget, coalesced by key.
	Enqueue func(key string, p writequeue.Priority, write func(context.Context) error, reason string)
	// Event queues an Event about obj at writequeue.CheckEvent priority; nil: no Events.
	Event func(obj corev1.ObjectReference, typ, reason, msg string, at time.Time)
	// Bind binds a result's reporter (its resource attributes) to the caller's
	// authenticated identity, or to the one a relay vouches for on the Resource
	// (identity.MatchResourceContext); nil: no binding required.
	Bind func(ctx context.Context, src identity.Source, attrs pcommon.Map) identity.Binding
	// Refused says whether the API refused a write for good (not worth a retry).
	Refused func(error) bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Controller places declared checks, folds their results into their status and writes it
// through the exporter's writer, under its one write budget.
type Controller struct {
	cfg     Config
	d       Deps
	policy  targetpolicy.Policy
	write   plan.CheckPolicy
	skipLog *ratelog.Logger
	// eventsRL is the checks' own Event limiter (checks.events_per_minute); nil without
	// Events.
	eventsRL *rate.Limiter

	kube    kubernetes.Interface
	nc      versioned.Interface
	factory externalversions.SharedInformerFactory

	// The NetworkPolicy explanation (nil without checks.explain_network_policy).
	policies       *netpolicy.Index
	policyFactory  informers.SharedInformerFactory
	policiesSynced func() bool

	leading atomic.Bool
	// resuming: a re-read of the checks at takeover is in flight.
	resuming atomic.Bool

	mu   sync.Mutex
	book *book
	// resumed: this leadership term has re-read every check's status from the API (a
	// quorum read at takeover); until then nothing of the checks is written or emitted.
	resumed     bool
	reasonsSeen map[string]bool // accepted_reason values recorded so far
	stop        chan struct{}
	stopOnce    sync.Once
}

// New builds a controller; Start gives it its clients.
func New(cfg Config, d Deps) *Controller {
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	c := &Controller{cfg: cfg, d: d,
		policy:  targetpolicy.Policy{AllowLoopback: cfg.AllowLoopback, AllowLinkLocal: cfg.AllowLinkLocal},
		write:   plan.CheckPolicy{Heartbeat: cfg.Heartbeat},
		skipLog: ratelog.New(d.Logger, 30*time.Second, 2),
		book:    newBook(cfg), reasonsSeen: map[string]bool{}, stop: make(chan struct{})}
	if d.Event != nil && cfg.EventsPerMinute > 0 {
		c.eventsRL = rate.NewLimiter(rate.Limit(float64(cfg.EventsPerMinute)/60), cfg.EventsPerMinute)
	}
	return c
}

// Start watches the checks (every replica: a standby keeps the state warm) through nc's
// typed informers: NetworkChecks, and PodNetworkConnectivityChecks with checks.openshift.
// kube serves the placements' reads.
func (c *Controller) Start(kube kubernetes.Interface, nc versioned.Interface) {
	c.kube, c.nc = kube, nc
	c.factory = externalversions.NewSharedInformerFactory(nc, 0)
	_, _ = c.factory.Netpulse().V1alpha1().NetworkChecks().Informer().AddEventHandler(c.handler(v1alpha1.NetworkCheckKind))
	if c.cfg.OpenShift {
		_, _ = c.factory.Controlplane().V1alpha1().PodNetworkConnectivityChecks().Informer().AddEventHandler(c.handler(ocv1alpha1.Kind))
	}
	c.factory.Start(c.stop)
	if c.cfg.ExplainNetworkPolicy {
		c.startPolicyWatch(kube)
	}
}

// Shutdown stops the informers. Safe without Start and twice.
func (c *Controller) Shutdown() {
	c.stopOnce.Do(func() { close(c.stop) })
	if c.factory != nil {
		c.factory.Shutdown()
	}
	if c.policyFactory != nil {
		c.policyFactory.Shutdown()
	}
}

func (c *Controller) handler(kind string) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.observe(kind, o, false) },
		UpdateFunc: func(_, o any) { c.observe(kind, o, false) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if m, ok := o.(metav1.Object); ok {
				c.mu.Lock()
				c.book.forget(checkKey{kind, m.GetNamespace(), m.GetName()})
				c.mu.Unlock()
			}
		},
	}
}

// observe tracks one check object as an informer or the re-read gives it.
func (c *Controller) observe(kind string, o any, fromAPI bool) {
	ob, ok := c.convert(kind, o)
	if !ok {
		return
	}
	c.mu.Lock()
	note := c.book.upsert(ob, fromAPI, c.leading.Load(), c.d.Now())
	c.mu.Unlock()
	switch note {
	case notTrackedMaxChecks:
		c.skipLog.Log(zap.WarnLevel, "pod_network_health: more declared checks than checks.max_checks; not serving some", zap.String("check", ob.key.String()))
	case overNamespaceQuota:
		c.skipLog.Log(zap.WarnLevel, "pod_network_health: a namespace has more declared checks than checks.max_checks_per_namespace; its newest are not served",
			zap.String("check", ob.key.String()), zap.Int("max_checks_per_namespace", c.cfg.MaxChecksPerNamespace))
	}
}

// convert is the core's view of a check object.
func (c *Controller) convert(kind string, o any) (observed, bool) {
	switch o := o.(type) {
	case *ocv1alpha1.PodNetworkConnectivityCheck:
		return observedOfPNCC(o), kind == ocv1alpha1.Kind
	case *v1alpha1.NetworkCheck:
		return observedOfNC(o), kind == v1alpha1.NetworkCheckKind
	}
	return observed{}, false
}

func observedOfNC(nc *v1alpha1.NetworkCheck) observed {
	ob := observed{key: checkKey{v1alpha1.NetworkCheckKind, nc.Namespace, nc.Name}, uid: nc.UID, created: nc.CreationTimestamp.Time,
		generation: nc.Generation, labels: nc.Labels, interval: checkstatus.DefaultInterval, flavour: checkstatus.FlavourNetpulse,
		spec:   spec{sourcePod: nc.Spec.Source.PodName, selector: nc.Spec.Source.PodSelector, target: nc.Spec.Target, probe: nc.Spec.Probe},
		status: statusOfNC(&nc.Status), recorded: recordedOfNC(&nc.Status)}
	if nc.Spec.Interval != nil {
		ob.interval = nc.Spec.Interval.Duration
	}
	return ob
}

func observedOfPNCC(pc *ocv1alpha1.PodNetworkConnectivityCheck) observed {
	ob := observed{key: checkKey{ocv1alpha1.Kind, pc.Namespace, pc.Name}, uid: pc.UID, created: pc.CreationTimestamp.Time,
		generation: pc.Generation, labels: pc.Labels, interval: checkstatus.DefaultInterval, flavour: checkstatus.FlavourOpenShift,
		spec:   spec{sourcePod: pc.Spec.SourcePod, target: v1alpha1.CheckTarget{Address: pc.Spec.TargetEndpoint}},
		status: statusOfPNCC(&pc.Status)}
	if v, err := time.ParseDuration(pc.Annotations[v1alpha1.AnnotationCheckInterval]); err == nil && v >= checkstatus.MinInterval {
		ob.interval = v
	}
	return ob
}

// Lead starts a leadership term: the checks resume from the API at its first Reconcile (a
// quorum read, beside the lead loop); until then nothing of them is written or emitted.
func (c *Controller) Lead(context.Context) { c.leading.Store(true) }

// EndTerm ends a leadership term: the next one resumes from the API again.
func (c *Controller) EndTerm() {
	c.mu.Lock()
	c.resumed = false
	c.leading.Store(false)
	c.mu.Unlock()
}

// Resume re-reads every check from the API (a quorum read, paginated) at the start of a
// leadership term, so the new leader continues from what the previous one wrote — its
// successes, failures, outages and conditions — whatever this replica held before: a
// takeover neither rolls a status back nor emits an Event again.
func (c *Controller) Resume(ctx context.Context) error {
	type item struct {
		kind string
		o    any
	}
	var items []item
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.nc.NetpulseV1alpha1().NetworkChecks(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list networkchecks: %w", err)
		}
		for i := range list.Items {
			items = append(items, item{v1alpha1.NetworkCheckKind, &list.Items[i]})
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	if c.cfg.OpenShift {
		opts := metav1.ListOptions{Limit: 500}
		for {
			list, err := c.nc.ControlplaneV1alpha1().PodNetworkConnectivityChecks(metav1.NamespaceAll).List(ctx, opts)
			if err != nil {
				return fmt.Errorf("list podnetworkconnectivitychecks: %w", err)
			}
			for i := range list.Items {
				items = append(items, item{ocv1alpha1.Kind, &list.Items[i]})
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
	}
	if !c.leading.Load() {
		return nil // the term ended meanwhile
	}
	for _, it := range items {
		c.observe(it.kind, it.o, true)
	}
	c.mu.Lock()
	c.resumed = c.leading.Load()
	if c.resumed {
		c.book.termStart = c.d.Now()
	}
	c.mu.Unlock()
	return nil
}

// Reconcile runs on the leader every reconcile tick: resolve placements (a bounded batch
// of reads), fix labels, write statuses that are due, prune stale OpenShift checks.
func (c *Controller) Reconcile(ctx context.Context, now time.Time) {
	c.mu.Lock()
	resumed := c.resumed
	c.mu.Unlock()
	if !resumed {
		// The re-read runs beside the lead loop, so a long list never delays the pairs'
		// reconcile; the checks wait for it.
		if c.resuming.CompareAndSwap(false, true) {
			go func() {
				defer c.resuming.Store(false)
				if err := c.Resume(ctx); err != nil && ctx.Err() == nil {
					c.skipLog.Log(zap.WarnLevel, "pod_network_health: cannot re-read the declared checks at takeover; not writing them until it succeeds", zap.Error(err))
				}
			}()
		}
		return
	}
	c.mu.Lock()
	due := c.book.dueForPlacement(now)
	c.mu.Unlock()
	for _, key := range due {
		if ctx.Err() != nil {
			break
		}
		c.mu.Lock()
		sp, ok := c.book.resolvable(key)
		c.mu.Unlock()
		if !ok {
			continue
		}
		p := c.resolve(ctx, key, sp)
		c.mu.Lock()
		c.book.placed(key, p, now)
		c.mu.Unlock()
	}

	c.explain(ctx)

	c.mu.Lock()
	wp := c.book.plan(now, c.write)
	c.mu.Unlock()
	for _, key := range wp.prunes {
		c.enqueuePrune(key)
	}
	for _, lp := range wp.labels {
		c.enqueueLabels(lp)
	}
	for _, sw := range wp.statuses {
		c.enqueueStatus(sw)
	}
	c.recordChecks(ctx, wp.byReason)
}

// recordChecks sets otelcol_pod_network_health_checks{accepted_reason}: a reason that no
// check has any more reads 0.
func (c *Controller) recordChecks(ctx context.Context, byReason map[string]int64) {
	if c.d.Telemetry == nil {
		return
	}
	for r := range byReason {
		c.reasonsSeen[r] = true
	}
	for r := range c.reasonsSeen {
		c.d.Telemetry.PodNetworkHealthChecks.Record(ctx, byReason[r], metric.WithAttributes(attribute.String("accepted_reason", r)))
	}
}

func (c *Controller) refused(err error) bool { return c.d.Refused != nil && c.d.Refused(err) }

// patch sends a patch to the check, through its kind's client.
func (c *Controller) patch(ctx context.Context, key checkKey, pt types.PatchType, data []byte, subresources ...string) error {
	var err error
	if key.kind == ocv1alpha1.Kind {
		_, err = c.nc.ControlplaneV1alpha1().PodNetworkConnectivityChecks(key.namespace).Patch(ctx, key.name, pt, data, metav1.PatchOptions{}, subresources...)
	} else {
		_, err = c.nc.NetpulseV1alpha1().NetworkChecks(key.namespace).Patch(ctx, key.name, pt, data, metav1.PatchOptions{}, subresources...)
	}
	return err
}

func (c *Controller) enqueueLabels(lp labelPatch) {
	key, data := lp.key, lp.data
	c.d.Enqueue("checklabels/"+key.String(), writequeue.CheckVerdict, func(ctx context.Context) error {
		err := c.patch(ctx, key, types.MergePatchType, data)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if c.refused(err) {
			c.mu.Lock()
			c.book.labelsRefused(key, data)
			c.mu.Unlock()
		}
		return err
	}, writeReasonPrefix+plan.CheckWritePlacement)
}

// enqueueStatus replaces the check's status (one JSON patch on the status subresource: no
// resourceVersion, no conflicts). The status is built when the write runs, so a queued
// write always carries the newest state; what it wrote becomes the written state.
func (c *Controller) enqueueStatus(sw statusWrite) {
	key := sw.key
	// A check's significant changes (after the pairs' verdicts and Events), then its
	// routine writes, all within the checks' share of the budget.
	prio := writequeue.CheckUpdate
	if sw.significant {
		prio = writequeue.CheckVerdict
	}
	c.d.Enqueue("checkstatus/"+key.String(), prio, func(ctx context.Context) error {
		c.mu.Lock()
		snap, status, ok := c.book.snapshotOf(key)
		c.mu.Unlock()
		if !ok {
			return nil
		}
		data, err := json.Marshal([]map[string]any{{"op": "add", "path": "/status", "value": status}})
		if err != nil {
			return err
		}
		err = c.patch(ctx, key, types.JSONPatchType, data, "status")
		if apierrors.IsNotFound(err) {
			return nil
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case c.refused(err):
			// Marked: not queued again until the state changes (the writer counts it
			// and logs it once).
			c.book.refused(key, snap)
		case err == nil:
			c.book.written(key, snap, c.d.Now())
		}
		return err
	}, writeReasonPrefix+sw.why)
}

func (c *Controller) enqueuePrune(key checkKey) {
	c.mu.Lock()
	var gone time.Time
	var uid types.UID
	if cs, ok := c.book.checks[key]; ok {
		gone, uid = cs.sourceGoneSince, cs.uid
	}
	c.mu.Unlock()
	if uid == "" {
		return // not in the book (forgotten meanwhile): nothing this controller decided on
	}
	c.d.Logger.Info("pod_network_health: pruning a PodNetworkConnectivityCheck whose source pod is gone",
		zap.String("check", key.String()), zap.Time("source_gone_since", gone))
	c.d.Enqueue("checkstatus/"+key.String(), writequeue.CheckUpdate, func(ctx context.Context) error {
		// Only the check this controller decided to prune (its UID): one recreated under
		// the same name meanwhile is another check, and the API answers 409 instead of
		// deleting it. Not retried: the book sees the new check and decides afresh.
		err := c.nc.ControlplaneV1alpha1().PodNetworkConnectivityChecks(key.namespace).Delete(ctx, key.name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}, writeReasonPrefix+"prune")
}

// emitEvents writes ConnectivityOutageDetected / ConnectivityRestored on the check, through
// the writer: CheckEvent priority (after the pairs' verdicts and Events, within the checks'
// share of the budget) and the checks' own limiter (checks.events_per_minute), so flapping
// checks never drop or delay a pair's Event.
func (c *Controller) emitEvents(evs []checkEvent) {
	if c.eventsRL == nil {
		return
	}
	for _, ce := range evs {
		if !c.eventsRL.Allow() {
			if c.d.Telemetry != nil {
				c.d.Telemetry.PodNetworkHealthWritesDropped.Add(context.Background(), 1, metric.WithAttributes(attribute.String("priority", writequeue.CheckEvent.String())))
			}
			c.d.Logger.Info("pod_network_health: event rate limit reached; check event dropped", zap.String("check", ce.key.String()), zap.String("reason", ce.ev.Reason))
			continue
		}
		apiVersion := v1alpha1.SchemeGroupVersion.String()
		if ce.key.kind == ocv1alpha1.Kind {
			apiVersion = ocv1alpha1.SchemeGroupVersion.String()
		}
		c.d.Event(corev1.ObjectReference{APIVersion: apiVersion, Kind: ce.key.kind, Namespace: ce.key.namespace,
			Name: ce.key.name, UID: ce.uid}, ce.ev.Type, ce.ev.Reason, ce.ev.Message, ce.ev.Time)
	}
}
