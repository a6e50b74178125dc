// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"

	"go.uber.org/zap"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/client/informers/externalversions"
	pnhlisters "github.com/netpulse/netpulse/api/client/listers/api/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// Desired is the latest state an object should have (the plan stage renders it). Only the
// newest is kept per object, so memory stays bounded by the number of pairs however long
// the API is unreachable.
type Desired = plan.Desired

// WriteResult tells the exporter what reached the API (or failed to; a failed write is
// retried with back-off unless a newer state replaced it).
type WriteResult struct {
	Key      string                           // ObjectKey, NodeKey, PodKey or EventKey
	Status   *v1alpha1.PodNetworkHealthStatus // objects only; nil after a delete
	Reason   string
	Priority writequeue.Priority
	Err      error
	// Rejected: the API answered 4xx (other than 401, 403, 408, 409, 429): not retried.
	Rejected bool
	// Forbidden: the API answered 403; the write is held and written once its kind is
	// allowed again (refusals.go).
	Forbidden bool
	// NotOurs: the object of that name is not the one this writer decided on (another
	// shard's, or another pair's: object names omit the target's UID and node), so it was
	// left alone: not written, not deleted, not retried (ErrNotOurs).
	NotOurs bool
}

// ErrNotOurs: the object of the name is another writer's or another pair's (NotOurs).
var ErrNotOurs = errors.New("the object of this name is not the one this writer decided on; left alone")

// maxDeleteConflicts bounds a delete's retries after its preconditions failed (the object
// changed between the read and the delete): each retry re-reads it from the API and deletes
// it only if it is still this writer's and still the pair's; past the bound it is left.
const maxDeleteConflicts = 3

// writeItem is one pending write: an object's Desired state, or one API request built by
// the exporter (an Event, a node or pod condition patch).
type writeItem struct {
	obj    *Desired
	apply  func(context.Context) error
	reason string
}

// Queue keys. Objects, nodes and pods coalesce to their latest state; events do not.
func ObjectKey(ns, name string) string { return "pnh/" + ns + "/" + name }
func NodeKey(name string) string       { return "node/" + name }

// NodeConditionKey keys one condition type of a node: the gray condition's patch never
// replaces a pending outage one.
func NodeConditionKey(name, condType string) string { return NodeKey(name) + "/" + condType }
func PodKey(ns, name string) string                 { return "pod/" + ns + "/" + name }

const (
	// maxPendingWrites bounds the pending writes (memory while the API is unreachable).
	// Objects, nodes and pods coalesce, so this is only reached beyond ~25,000 nodes
	// (2 objects + 1 node per node) or by a pile of Events; then the least urgent, newest
	// writes are dropped first and verdicts never for something less urgent.
	maxPendingWrites = 75_000
	// Per-key back-off after a failed write.
	retryBase = 200 * time.Millisecond
	retryMax  = 5 * time.Second
	// heartbeatShare of the budget is what heartbeats may use (heartbeatInterval).
	heartbeatShare = 0.5
	// DefaultCheckShare of the budget is what declared checks may use (checks.write_share).
	DefaultCheckShare = 0.2
	// sourceShare of the budget is the most one source's pair verdicts take (1/s at the
	// default 5/s), after a burst of sourceBurst (the admission's 16 stable targets per
	// source): writequeue.Fair. A real outage flips at most a source's stable pairs and one
	// followed failing pair at once, so an honest source's verdicts never wait for it; one
	// compromised agent flipping its pairs as fast as the engine lets it leaves the other
	// 4/s to every other write (issue 40, item 1).
	sourceShare = 0.2
	sourceBurst = 16
)

// priorityOf is the priority of an object write by its reason (plan.Decide's reasons).
func priorityOf(reason string) writequeue.Priority {
	switch reason {
	case "verdict", "observer":
		return writequeue.Verdict
	case "heartbeat":
		return writequeue.Heartbeat
	case "delete":
		return writequeue.Cleanup
	default: // "initial", "latency", "loss", ...
		return writequeue.Update
	}
}

// writer applies Desired states to the API under one write budget shared by every kind of
// write (objects, Events, node and pod conditions): a priority queue that keeps only the
// latest state per key (verdict changes first, then Events, updates, heartbeats, deletes),
// per-key exponential back-off, conflict re-reads from its own informer, and never a
// rewrite of an identical status. Every API request a worker makes takes a budget token
// first; a worker picks its next item only once a token is available, so what it writes is
// the most urgent write at that moment.
type Writer struct {
	client   versioned.Interface
	factory  externalversions.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   pnhlisters.PodNetworkHealthLister
	zones    *zoneCache // nil unless WatchZones
	budget   *writequeue.Budget
	// checkBudget is the declared checks' own share of budget: a check write takes a token
	// from both, and is handed out only while this one has a token, so checks never take
	// more than their share and never pass a pair verdict or Event.
	checkBudget *writequeue.Budget
	// objectLabels: WithObjectLabels.
	objectLabels map[string]string
	logger       *zap.Logger
	done         func(WriteResult)
	now          func() time.Time
	popped       func(key string) // tests: the order the queue hands items out
	onForbidden  func(kind string, held int, err error)

	mu    sync.Mutex
	queue *writequeue.Queue[*writeItem] // survives leadership terms
	// retries: the per-key exponential back-off of failed writes (client-go workqueue's
	// rate limiter: retryBase doubling to retryMax), forgotten when the key is done.
	retries workqueue.TypedRateLimiter[string]
	// stale: keys whose last write hit a conflict; their retry reads the object from the
	// API instead of the informer, which can lag for minutes after an API server restart
	// (its watch refused with "too large resource version") and would conflict forever.
	stale map[string]bool
	// refusals: the kinds of write the API answers 403 (refusals.go).
	refusals map[string]*refusal
	changed  chan struct{} // closed and replaced when the queue changes

	events   atomic.Uint64
	life     context.Context // ends with stop
	kill     context.CancelFunc
	stopOnce sync.Once
	stopCh   chan struct{}
	workers  atomic.Int32 // running workers (0 while not leading)
	wg       sync.WaitGroup
}

// WriterOption configures a Writer.
type WriterOption func(*Writer)

// WithObjectLabels makes every PodNetworkHealth the writer creates or updates carry extra
// labels, and its informer (what it resumes from and prunes) see only the objects that
// carry them: a gateway shard's own (v1alpha1.LabelShard). An existing object without them, of
// another shard count, is adopted when this writer writes it.
func WithObjectLabels(extra map[string]string) WriterOption {
	return func(w *Writer) { w.objectLabels = extra }
}

// NewWriter: qps and burst are the exporter's write budget (requests per second, bucket).
func NewWriter(client versioned.Interface, namespace string, qps float64, burst int, logger *zap.Logger, done func(WriteResult), opts ...WriterOption) *Writer {
	var o Writer
	for _, opt := range opts {
		opt(&o)
	}
	selector := labels.Set{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}
	for k, v := range o.objectLabels {
		selector[k] = v
	}
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0,
		externalversions.WithNamespace(namespace),
		externalversions.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = selector.String()
		}))
	inf := factory.Netpulse().V1alpha1().PodNetworkHealths()
	life, kill := context.WithCancel(context.Background())
	return &Writer{
		client:       client,
		factory:      factory,
		informer:     inf.Informer(),
		lister:       inf.Lister(),
		budget:       writequeue.NewBudget(qps, burst),
		checkBudget:  checkShareBudget(qps, burst, DefaultCheckShare),
		logger:       logger,
		done:         done,
		now:          time.Now,
		queue:        writequeue.New[*writeItem](writequeue.MaxItems(maxPendingWrites), writequeue.Fair(sourceOf, sourceShareOf(qps))),
		retries:      workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax),
		stale:        map[string]bool{},
		refusals:     map[string]*refusal{},
		changed:      make(chan struct{}),
		life:         life,
		kill:         kill,
		stopCh:       make(chan struct{}),
		objectLabels: o.objectLabels,
	}
}

// sourceOf is the fairness group of a write in the verdict lane: the source pod of a
// PodNetworkHealth (its pairs' verdicts); other writes (node and pod conditions, zones,
// Events) are no one source's.
func sourceOf(_ string, it *writeItem) string {
	if it == nil || it.obj == nil || it.obj.Obj == nil {
		return ""
	}
	ref := it.obj.Obj.Spec.SourcePodRef
	if ref.UID != "" {
		return string(ref.UID)
	}
	if ref.Name != "" {
		return ref.Namespace + "/" + ref.Name
	}
	return ""
}

// sourceShareOf is each source's share of a budget of qps (nil: unlimited).
func sourceShareOf(qps float64) *writequeue.Share {
	if !(qps > 0) {
		return nil
	}
	return writequeue.NewShare(qps*sourceShare, sourceBurst)
}

// checkShareBudget is share of a budget of qps requests per second and burst.
func checkShareBudget(qps float64, burst int, share float64) *writequeue.Budget {
	if qps <= 0 {
		return writequeue.NewBudget(0, 1) // unlimited, as the whole budget
	}
	return writequeue.NewBudget(qps*share, max(1, int(float64(burst)*share)))
}

// Client is the client the writer writes through (tests reach its fake through it).
func (w *Writer) Client() versioned.Interface { return w.client }

// SetCheckShare sets the declared checks' share of the write budget (before run).
func (w *Writer) SetCheckShare(share float64) {
	w.checkBudget = checkShareBudget(w.budget.Rate(), w.budget.Burst(), share)
}

// OnDeleted calls fn for every object that disappears from the API (garbage-collected with
// its source pod, deleted by a user, or by this writer). Register before startInformer.
func (w *Writer) OnDeleted(fn func(*v1alpha1.PodNetworkHealth)) {
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(*v1alpha1.PodNetworkHealth); ok {
			fn(o)
		}
	}})
}

// StartInformer begins watching netpulse's own objects (list + watch, never periodic LISTs).
func (w *Writer) StartInformer() { w.factory.Start(w.stopCh) }

// Synced waits for the first list.
func (w *Writer) Synced(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced)
}

// Existing returns the objects netpulse wrote, from the informer cache.
func (w *Writer) Existing() []*v1alpha1.PodNetworkHealth {
	objs, _ := w.lister.List(labels.Everything())
	return objs
}

// Set records the latest Desired state of an object and schedules its write, with the
// priority p, or without p the priority of d.Reason (priorityOf). A pending state of the
// same object is replaced and keeps the more urgent priority of the two.
func (w *Writer) Set(d *Desired, p ...writequeue.Priority) {
	prio := priorityOf(d.Reason)
	if len(p) > 0 {
		prio = p[0]
	}
	w.put(ObjectKey(d.Obj.Namespace, d.Obj.Name), prio, &writeItem{obj: d, reason: d.Reason})
}

// Enqueue schedules one API request (an Event, a node or pod condition patch) under the
// write budget: apply must make exactly one request (it is given one token). Keys
// nodeKey/podKey coalesce to the latest apply; eventKey is unique. reason labels the
// WriteResult.
func (w *Writer) Enqueue(key string, p writequeue.Priority, apply func(context.Context) error, reason string) {
	w.put(key, p, &writeItem{apply: apply, reason: reason})
}

// EventKey is a new, unique key for an Event (Events are not coalesced).
func (w *Writer) EventKey() string { return "event/" + strconv.FormatUint(w.events.Add(1), 10) }

func (w *Writer) put(key string, p writequeue.Priority, it *writeItem) {
	w.mu.Lock()
	drop, dropped := w.queue.Set(key, p, it, w.now())
	if dropped {
		w.forgetLocked(drop.Key)
	}
	w.notifyLocked()
	w.mu.Unlock()
	if dropped {
		w.logger.Debug("pod_network_health: write queue full; write dropped", zap.String("key", drop.Key),
			zap.Stringer("priority", drop.Priority), zap.String("write_reason", drop.Value.reason))
	}
}

// forgetLocked drops the back-off state of a key that is no longer queued.
func (w *Writer) forgetLocked(key string) {
	if !w.queue.Contains(key) {
		w.retries.Forget(key)
		delete(w.stale, key)
		w.reprobeLocked(key)
	}
}

func (w *Writer) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// PendingCount is the number of writes not yet done (waiting or in flight).
func (w *Writer) PendingCount() int {
	n := 0
	for _, c := range w.PendingByPriority() {
		n += c
	}
	return n
}

// PendingByPriority is pendingCount by priority.
func (w *Writer) PendingByPriority() [writequeue.NumPriorities]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.queue.LenByPriority()
	for p, n := range w.queue.InFlightByPriority() {
		out[p] += n
	}
	return out
}

// DroppedByPriority counts the writes the queue bound dropped since the start.
func (w *Writer) DroppedByPriority() [writequeue.NumPriorities]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queue.DroppedByPriority()
}

// HeartbeatInterval stretches the configured heartbeat so the heartbeats of objects
// use at most half of the write budget.
func (w *Writer) HeartbeatInterval(configured time.Duration, objects int) time.Duration {
	return writequeue.HeartbeatInterval(configured, objects, w.budget.Rate(), heartbeatShare)
}

// Run starts n workers; they stop when ctx ends (the end of a leadership term) or at stop.
// Pending writes survive for the next term (a write cut off by the end of the term is
// given back without back-off).
func (w *Writer) Run(ctx context.Context, n int) {
	if w.life.Err() != nil {
		return // stopped
	}
	ctx, cancel := context.WithCancel(ctx)
	stopOnKill := context.AfterFunc(w.life, cancel)
	n = max(n, 1)
	var left atomic.Int32
	left.Store(int32(n))
	w.workers.Add(int32(n))
	w.wg.Add(n)
	for range n {
		go func() {
			defer w.wg.Done()
			defer w.workers.Add(-1)
			defer func() {
				if left.Add(-1) == 0 {
					stopOnKill()
					cancel()
				}
			}()
			w.work(ctx)
		}()
	}
}

// Flush waits, while workers run, until no write of priority upTo or more urgent is
// pending or in flight, or ctx ends; it reports whether they all reached the API (or
// failed for good). Used on shutdown: the outgoing leader's verdicts and Events are not
// left for the next one to re-derive.
func (w *Writer) Flush(ctx context.Context, upTo writequeue.Priority) bool {
	for {
		pending := w.PendingByPriority()
		n := 0
		for p := writequeue.Priority(0); p <= upTo; p++ {
			n += pending[p]
		}
		if n == 0 {
			return true
		}
		if w.workers.Load() == 0 {
			return false // not leading: nobody writes
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop ends the workers and the informer. Safe to call more than once.
func (w *Writer) Stop() {
	w.stopOnce.Do(func() {
		w.kill()
		w.wg.Wait()
		close(w.stopCh)
		w.factory.Shutdown()
	})
}

// work: wait for a ready item, wait for the budget, take the most urgent item, write it.
// A declared check's write is handed out only while the checks' share has a token; until
// then the pairs' writes pass it.
func (w *Writer) work(ctx context.Context) {
	for w.waitReady(ctx) && w.sleep(ctx, w.budget.Delay(w.now())) {
		w.mu.Lock()
		now := w.now()
		key, p, it, ok := w.queue.PopFunc(now, w.allow(now))
		if ok && w.popped != nil {
			w.popped(key)
		}
		w.mu.Unlock()
		if ok {
			w.process(ctx, key, p, it)
		}
	}
}

// allow is the filter of the priorities a worker may take now: all but the checks' while
// their share has no token.
func (w *Writer) allow(now time.Time) func(writequeue.Priority) bool {
	if w.checkBudget.Delay(now) == 0 {
		return nil
	}
	return func(p writequeue.Priority) bool { return !p.IsCheck() }
}

// waitReady sleeps until an item a worker may take is ready (a retry time passes, the
// queue changes, or the checks' share refills while only check writes are ready).
func (w *Writer) waitReady(ctx context.Context) bool {
	for {
		w.mu.Lock()
		now := w.now()
		allow := w.allow(now)
		next, ok := w.queue.NextReadyAt(now, allow)
		if allow != nil {
			// Check writes wait for their share: wake when it refills.
			if _, pending := w.queue.NextReady(); pending {
				refill := now.Add(w.checkBudget.Delay(now))
				if !ok || refill.Before(next) {
					next, ok = refill, true
				}
			}
		}
		changed := w.changed
		w.mu.Unlock()
		if ok && !next.After(now) {
			return true
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if ok {
			timer = time.NewTimer(next.Sub(now))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return false
		}
	}
}

// sleep waits d; false when ctx ended first.
func (w *Writer) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Rejected reports whether err is an API answer that a retry of the same request cannot
// change: every 4xx except 401 (a credential being rotated), 408 (a timeout), 409 (a
// conflict: the retry re-reads the object) and 429 (the server asks to retry). The writer
// holds a 403 instead (refusals.go): a restarted API server denies everything until its
// RBAC caches sync.
func Rejected(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := int(st.Status().Code)
	if code < 400 || code >= 500 {
		return false
	}
	switch code {
	case http.StatusUnauthorized, http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return true
}

// takeFor takes the tokens of one request of priority p: the checks' share first for a
// check write, then the budget.
func (w *Writer) takeFor(ctx context.Context, p writequeue.Priority) error {
	if p.IsCheck() {
		for {
			ok, wait := w.checkBudget.Take(w.now())
			if ok {
				break
			}
			if !w.sleep(ctx, wait) {
				return ctx.Err()
			}
		}
	}
	return w.take(ctx)
}

// take blocks until the budget gives a token for one API request.
func (w *Writer) take(ctx context.Context) error {
	for {
		ok, wait := w.budget.Take(w.now())
		if ok {
			return nil
		}
		if !w.sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

func (w *Writer) process(ctx context.Context, key string, p writequeue.Priority, it *writeItem) {
	var status *v1alpha1.PodNetworkHealthStatus
	var err error
	if it.obj != nil {
		status, err = w.apply(ctx, it.obj)
	} else if err = w.takeFor(ctx, p); err == nil {
		err = it.apply(ctx)
	}
	if err != nil && it.obj != nil && it.obj.Delete && apierrors.IsConflict(err) {
		w.mu.Lock()
		if w.retries.NumRequeues(key) >= maxDeleteConflicts-1 {
			err = fmt.Errorf("%w: %w", ErrNotOurs, err) // the object keeps changing: leave it
		}
		w.mu.Unlock()
	}
	if err != nil && ctx.Err() != nil {
		// The term ended during the write: give it back for the next term, no back-off.
		w.mu.Lock()
		if drop, dropped := w.queue.Retry(key, p, it, time.Time{}); dropped {
			w.forgetLocked(drop.Key)
		}
		w.notifyLocked()
		w.mu.Unlock()
		return
	}
	if err != nil && apierrors.IsForbidden(err) {
		w.forbidden(key, p, it, err)
		return
	}
	if errors.Is(err, ErrNotOurs) {
		// Another writer's object, or another pair's: left alone. A newer state of the key
		// is tried when it comes.
		w.mu.Lock()
		w.retries.Forget(key)
		delete(w.stale, key)
		w.queue.Done(key)
		w.notifyLocked()
		w.mu.Unlock()
		w.done(WriteResult{Key: key, Reason: it.reason, Priority: p, Err: err, NotOurs: true})
		return
	}
	if err != nil && Rejected(err) {
		// The API refused this request for what it is (invalid, too large...): the same
		// request would be refused again, so it is not retried; a newer state of the key
		// is written when it comes.
		w.mu.Lock()
		w.retries.Forget(key)
		delete(w.stale, key)
		w.queue.Done(key)
		w.reprobeLocked(key)
		w.notifyLocked()
		w.mu.Unlock()
		w.done(WriteResult{Key: key, Reason: it.reason, Priority: p, Err: err, Rejected: true})
		return
	}
	if err != nil {
		w.mu.Lock()
		backoff := w.retries.When(key)
		if apierrors.IsConflict(err) {
			w.stale[key] = true
		}
		if drop, dropped := w.queue.Retry(key, p, it, w.now().Add(backoff)); dropped {
			w.forgetLocked(drop.Key)
		}
		w.notifyLocked()
		w.mu.Unlock()
		w.done(WriteResult{Key: key, Reason: it.reason, Priority: p, Err: err})
		return
	}
	w.mu.Lock()
	w.retries.Forget(key)
	delete(w.stale, key)
	w.queue.Done(key)
	cleared := w.allowedLocked(key)
	w.notifyLocked()
	w.mu.Unlock()
	if cleared != nil {
		w.logCleared(key, cleared)
	}
	w.done(WriteResult{Key: key, Status: status, Reason: it.reason, Priority: p})
}

// apply writes one Desired state. It returns the status now in the API (nil after delete).
// Each API request takes a budget token; reads from the informer cache take none.
func (w *Writer) apply(ctx context.Context, d *Desired) (*v1alpha1.PodNetworkHealthStatus, error) {
	api := w.client.NetpulseV1alpha1().PodNetworkHealths(d.Obj.Namespace)
	cur, err := w.lister.PodNetworkHealths(d.Obj.Namespace).Get(d.Obj.Name)
	w.mu.Lock()
	stale := w.stale[ObjectKey(d.Obj.Namespace, d.Obj.Name)]
	w.mu.Unlock()
	if stale || (d.Delete && apierrors.IsNotFound(err)) {
		// A read, not a write: outside the write budget. A delete the cache cannot place
		// (not yet seen, or another shard's label) reads what the API holds.
		cur, err = api.Get(ctx, d.Obj.Name, metav1.GetOptions{})
	}
	if d.Delete {
		return nil, w.delete(ctx, d, cur, err)
	}
	if err == nil && w.foreign(cur) {
		return nil, fmt.Errorf("%s/%s labelled %s=%s: %w", d.Obj.Namespace, d.Obj.Name, v1alpha1.LabelShard, cur.Labels[v1alpha1.LabelShard], ErrNotOurs)
	}
	if d.Restate != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		upd := cur.DeepCopy()
		d.Restate(&upd.Status)
		if apiequality.Semantic.DeepEqual(cur.Status, upd.Status) {
			st := cur.Status
			return &st, nil
		}
		if err := w.take(ctx); err != nil {
			return nil, err
		}
		res, err := api.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("update status %s/%s: %w", d.Obj.Namespace, d.Obj.Name, err)
		}
		st := res.Status
		return &st, nil
	}
	if apierrors.IsNotFound(err) {
		if err := w.take(ctx); err != nil {
			return nil, err
		}
		create := withoutStatus(d.Obj)
		if len(w.objectLabels) > 0 && create.Labels == nil {
			create.Labels = map[string]string{}
		}
		for k, v := range w.objectLabels {
			create.Labels[k] = v
		}
		created, err := api.Create(ctx, create, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// The informer has not seen it yet, or it is another shard's: read it and fall
			// through to the update.
			if err := w.take(ctx); err != nil {
				return nil, err
			}
			created, err = api.Get(ctx, d.Obj.Name, metav1.GetOptions{})
			if err == nil && w.foreign(created) {
				return nil, fmt.Errorf("%s/%s labelled %s=%s: %w", d.Obj.Namespace, d.Obj.Name, v1alpha1.LabelShard, created.Labels[v1alpha1.LabelShard], ErrNotOurs)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("create %s/%s: %w", d.Obj.Namespace, d.Obj.Name, err)
		}
		cur = created
	} else if err != nil {
		return nil, err
	}
	if !apiequality.Semantic.DeepEqual(cur.Spec, d.Obj.Spec) || !apiequality.Semantic.DeepEqual(cur.OwnerReferences, d.Obj.OwnerReferences) ||
		!hasLabels(cur.Labels, w.objectLabels) {
		upd := cur.DeepCopy()
		upd.Spec = d.Obj.Spec
		upd.OwnerReferences = d.Obj.OwnerReferences
		if len(w.objectLabels) > 0 && upd.Labels == nil {
			upd.Labels = map[string]string{}
		}
		for k, v := range w.objectLabels {
			upd.Labels[k] = v
		}
		if err := w.take(ctx); err != nil {
			return nil, err
		}
		if cur, err = api.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("update %s/%s: %w", d.Obj.Namespace, d.Obj.Name, err)
		}
	}
	if apiequality.Semantic.DeepEqual(cur.Status, d.Obj.Status) {
		st := cur.Status
		return &st, nil // identical status is never rewritten
	}
	upd := cur.DeepCopy()
	upd.Status = d.Obj.Status
	if err := w.take(ctx); err != nil {
		return nil, err
	}
	res, err := api.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status %s/%s: %w", d.Obj.Namespace, d.Obj.Name, err)
	}
	st := res.Status
	return &st, nil
}

// delete deletes the object d names if cur (what the cache or the API holds, or getErr)
// is this writer's and the pair's, with preconditions on the UID and resourceVersion read:
// if it changed since (another shard relabelled it for a same-named target, or it was
// deleted and recreated), the API answers 409 instead of deleting it, and the retry reads
// it again (maxDeleteConflicts).
func (w *Writer) delete(ctx context.Context, d *Desired, cur *v1alpha1.PodNetworkHealth, getErr error) error {
	if apierrors.IsNotFound(getErr) {
		return nil // gone already
	}
	if getErr != nil {
		return getErr
	}
	if !w.owns(cur, d.Obj) {
		return fmt.Errorf("delete %s/%s: %w", d.Obj.Namespace, d.Obj.Name, ErrNotOurs)
	}
	if err := w.take(ctx); err != nil {
		return err
	}
	uid, rv := cur.UID, cur.ResourceVersion
	err := w.client.NetpulseV1alpha1().PodNetworkHealths(d.Obj.Namespace).Delete(ctx, d.Obj.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsConflict(err) {
			w.mu.Lock()
			w.stale[ObjectKey(d.Obj.Namespace, d.Obj.Name)] = true
			w.mu.Unlock()
		}
		return fmt.Errorf("delete %s/%s (uid %s, resourceVersion %s): %w", d.Obj.Namespace, d.Obj.Name, uid, rv, err)
	}
	return nil
}

// owns: cur is an object this writer may delete for want: netpulse's, labelled with this
// writer's labels (its shard), and of the same pair as far as want says (the source pod's
// UID, the target's kind and, for a pod, its UID).
func (w *Writer) owns(cur, want *v1alpha1.PodNetworkHealth) bool {
	if cur.Labels[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue || !hasLabels(cur.Labels, w.objectLabels) {
		return false
	}
	ws, cs := want.Spec, cur.Spec
	if ws.SourcePodRef.UID != "" && ws.SourcePodRef.UID != cs.SourcePodRef.UID {
		return false
	}
	if ws.TargetKind != "" && ws.TargetKind != cs.TargetKind {
		return false
	}
	if ws.TargetPodRef != nil && ws.TargetPodRef.UID != "" && (cs.TargetPodRef == nil || cs.TargetPodRef.UID != ws.TargetPodRef.UID) {
		return false
	}
	return true
}

// foreign: o is labelled as another live shard's of this writer's shard count (the same
// "-of-<count>"): that shard writes it, so this one neither relabels, updates nor deletes
// it. Two shards want one name when a pod is recreated under the same name on another
// shard's node (names omit the target's UID and node): without this they would relabel it
// back and forth, a write each per heartbeat. The other shard's pair goes (its target is
// gone) and deletes it; then this one creates its own. An object of another count (before
// or after a change of it) or without the label is adopted as before.
func (w *Writer) foreign(o *v1alpha1.PodNetworkHealth) bool {
	mine, ok := w.objectLabels[v1alpha1.LabelShard]
	if !ok {
		return false
	}
	theirs, ok := o.Labels[v1alpha1.LabelShard]
	if !ok || theirs == mine {
		return false
	}
	_, mineCount, ok1 := strings.Cut(mine, "-of-")
	_, theirCount, ok2 := strings.Cut(theirs, "-of-")
	return ok1 && ok2 && mineCount == theirCount
}

// hasLabels: have carries every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func withoutStatus(o *v1alpha1.PodNetworkHealth) *v1alpha1.PodNetworkHealth {
	c := o.DeepCopy()
	c.Status = v1alpha1.PodNetworkHealthStatus{}
	c.ResourceVersion = ""
	return c
}
