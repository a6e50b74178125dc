// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// Labels on every object netpulse writes; the writer's informer watches only these.
const (
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	LabelManagedByValue = "netpulse"
	LabelSourcePod      = "netpulse.io/source-pod"
)

// desired is the latest state an object should have. Only the newest is kept per object,
// so memory stays bounded by the number of pairs however long the API is unreachable.
type desired struct {
	obj    *v1alpha1.PodNetworkHealth
	reason string
	delete bool
	// restate, when set, changes the existing object's status in place (obj names it; its
	// spec and status are not used); nothing is written when the object does not exist.
	restate func(*v1alpha1.PodNetworkHealthStatus)
}

// writeResult tells the exporter what reached the API (or failed to; a failed write is
// retried with back-off unless a newer state replaced it).
type writeResult struct {
	key      string                           // objectKey, nodeKey, podKey or eventKey
	status   *v1alpha1.PodNetworkHealthStatus // objects only; nil after a delete
	reason   string
	priority writequeue.Priority
	err      error
	// rejected: the API answered 4xx (other than 401, 408, 409, 429): not retried.
	rejected bool
}

// writeItem is one pending write: an object's desired state, or one API request built by
// the exporter (an Event, a node or pod condition patch).
type writeItem struct {
	obj    *desired
	apply  func(context.Context) error
	reason string
}

// Queue keys. Objects, nodes and pods coalesce to their latest state; events do not.
func objectKey(ns, name string) string { return "pnh/" + ns + "/" + name }
func nodeKey(name string) string       { return "node/" + name }
func podKey(ns, name string) string    { return "pod/" + ns + "/" + name }

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
	// defaultCheckShare of the budget is what declared checks may use (checks.write_share).
	defaultCheckShare = 0.2
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

// writer applies desired states to the API under one write budget shared by every kind of
// write (objects, Events, node and pod conditions): a priority queue that keeps only the
// latest state per key (verdict changes first, then Events, updates, heartbeats, deletes),
// per-key exponential back-off, conflict re-reads from its own informer, and never a
// rewrite of an identical status. Every API request a worker makes takes a budget token
// first; a worker picks its next item only once a token is available, so what it writes is
// the most urgent write at that moment.
type writer struct {
	client   versioned.Interface
	factory  externalversions.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   pnhlisters.PodNetworkHealthLister
	budget   *writequeue.Budget
	// checkBudget is the declared checks' own share of budget: a check write takes a token
	// from both, and is handed out only while this one has a token, so checks never take
	// more than their share and never pass a pair verdict or Event.
	checkBudget *writequeue.Budget
	logger      *zap.Logger
	done        func(writeResult)
	now         func() time.Time
	popped      func(key string) // tests: the order the queue hands items out

	mu       sync.Mutex
	queue    *writequeue.Queue[*writeItem] // survives leadership terms
	failures map[string]int                // consecutive failures of pending or in-flight keys
	// stale: keys whose last write hit a conflict; their retry reads the object from the
	// API instead of the informer, which can lag for minutes after an API server restart
	// (its watch refused with "too large resource version") and would conflict forever.
	stale   map[string]bool
	changed chan struct{} // closed and replaced when the queue changes

	events   atomic.Uint64
	life     context.Context // ends with stop
	kill     context.CancelFunc
	stopOnce sync.Once
	stopCh   chan struct{}
	workers  atomic.Int32 // running workers (0 while not leading)
	wg       sync.WaitGroup
}

// newWriter: qps and burst are the exporter's write budget (requests per second, bucket).
func newWriter(client versioned.Interface, namespace string, qps float64, burst int, logger *zap.Logger, done func(writeResult)) *writer {
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0,
		externalversions.WithNamespace(namespace),
		externalversions.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.Set{LabelManagedBy: LabelManagedByValue}.String()
		}))
	inf := factory.Netpulse().V1alpha1().PodNetworkHealths()
	life, kill := context.WithCancel(context.Background())
	return &writer{
		client:      client,
		factory:     factory,
		informer:    inf.Informer(),
		lister:      inf.Lister(),
		budget:      writequeue.NewBudget(qps, burst),
		checkBudget: checkShareBudget(qps, burst, defaultCheckShare),
		logger:      logger,
		done:        done,
		now:         time.Now,
		queue:       writequeue.New[*writeItem](writequeue.MaxItems(maxPendingWrites)),
		failures:    map[string]int{},
		stale:       map[string]bool{},
		changed:     make(chan struct{}),
		life:        life,
		kill:        kill,
		stopCh:      make(chan struct{}),
	}
}

// checkShareBudget is share of a budget of qps requests per second and burst.
func checkShareBudget(qps float64, burst int, share float64) *writequeue.Budget {
	if qps <= 0 {
		return writequeue.NewBudget(0, 1) // unlimited, as the whole budget
	}
	return writequeue.NewBudget(qps*share, max(1, int(float64(burst)*share)))
}

// setCheckShare sets the declared checks' share of the write budget (before run).
func (w *writer) setCheckShare(share float64) {
	w.checkBudget = checkShareBudget(w.budget.Rate(), w.budget.Burst(), share)
}

// onDeleted calls fn for every object that disappears from the API (garbage-collected with
// its source pod, deleted by a user, or by this writer). Register before startInformer.
func (w *writer) onDeleted(fn func(*v1alpha1.PodNetworkHealth)) {
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(*v1alpha1.PodNetworkHealth); ok {
			fn(o)
		}
	}})
}

// startInformer begins watching netpulse's own objects (list + watch, never periodic LISTs).
func (w *writer) startInformer() { w.factory.Start(w.stopCh) }

// synced waits for the first list.
func (w *writer) synced(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced)
}

// existing returns the objects netpulse wrote, from the informer cache.
func (w *writer) existing() []*v1alpha1.PodNetworkHealth {
	objs, _ := w.lister.List(labels.Everything())
	return objs
}

// set records the latest desired state of an object and schedules its write, with the
// priority p, or without p the priority of d.reason (priorityOf). A pending state of the
// same object is replaced and keeps the more urgent priority of the two.
func (w *writer) set(d *desired, p ...writequeue.Priority) {
	prio := priorityOf(d.reason)
	if len(p) > 0 {
		prio = p[0]
	}
	w.put(objectKey(d.obj.Namespace, d.obj.Name), prio, &writeItem{obj: d, reason: d.reason})
}

// enqueue schedules one API request (an Event, a node or pod condition patch) under the
// write budget: apply must make exactly one request (it is given one token). Keys
// nodeKey/podKey coalesce to the latest apply; eventKey is unique. reason labels the
// writeResult.
func (w *writer) enqueue(key string, p writequeue.Priority, apply func(context.Context) error, reason string) {
	w.put(key, p, &writeItem{apply: apply, reason: reason})
}

// eventKey is a new, unique key for an Event (Events are not coalesced).
func (w *writer) eventKey() string { return "event/" + strconv.FormatUint(w.events.Add(1), 10) }

func (w *writer) put(key string, p writequeue.Priority, it *writeItem) {
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
func (w *writer) forgetLocked(key string) {
	if !w.queue.Contains(key) {
		delete(w.failures, key)
		delete(w.stale, key)
	}
}

func (w *writer) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// pendingCount is the number of writes not yet done (waiting or in flight).
func (w *writer) pendingCount() int {
	n := 0
	for _, c := range w.pendingByPriority() {
		n += c
	}
	return n
}

// pendingByPriority is pendingCount by priority.
func (w *writer) pendingByPriority() [writequeue.NumPriorities]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.queue.LenByPriority()
	for p, n := range w.queue.InFlightByPriority() {
		out[p] += n
	}
	return out
}

// droppedByPriority counts the writes the queue bound dropped since the start.
func (w *writer) droppedByPriority() [writequeue.NumPriorities]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queue.DroppedByPriority()
}

// heartbeatInterval stretches the configured heartbeat so the heartbeats of objects
// use at most half of the write budget.
func (w *writer) heartbeatInterval(configured time.Duration, objects int) time.Duration {
	return writequeue.HeartbeatInterval(configured, objects, w.budget.Rate(), heartbeatShare)
}

// run starts n workers; they stop when ctx ends (the end of a leadership term) or at stop.
// Pending writes survive for the next term (a write cut off by the end of the term is
// given back without back-off).
func (w *writer) run(ctx context.Context, n int) {
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

// flush waits, while workers run, until no write of priority upTo or more urgent is
// pending or in flight, or ctx ends; it reports whether they all reached the API (or
// failed for good). Used on shutdown: the outgoing leader's verdicts and Events are not
// left for the next one to re-derive.
func (w *writer) flush(ctx context.Context, upTo writequeue.Priority) bool {
	for {
		pending := w.pendingByPriority()
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

// stop ends the workers and the informer. Safe to call more than once.
func (w *writer) stop() {
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
func (w *writer) work(ctx context.Context) {
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
func (w *writer) allow(now time.Time) func(writequeue.Priority) bool {
	if w.checkBudget.Delay(now) == 0 {
		return nil
	}
	return func(p writequeue.Priority) bool { return !p.IsCheck() }
}

// waitReady sleeps until an item a worker may take is ready (a retry time passes, the
// queue changes, or the checks' share refills while only check writes are ready).
func (w *writer) waitReady(ctx context.Context) bool {
	for {
		w.mu.Lock()
		now := w.now()
		allow := w.allow(now)
		next, ok := w.queue.NextReadyFunc(allow)
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
func (w *writer) sleep(ctx context.Context, d time.Duration) bool {
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

// rejected reports whether err is an API answer that a retry of the same request cannot
// change: every 4xx except 401 (a credential being rotated), 408 (a timeout), 409 (a
// conflict: the retry re-reads the object) and 429 (the server asks to retry).
func rejected(err error) bool {
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
func (w *writer) takeFor(ctx context.Context, p writequeue.Priority) error {
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
func (w *writer) take(ctx context.Context) error {
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

func (w *writer) process(ctx context.Context, key string, p writequeue.Priority, it *writeItem) {
	var status *v1alpha1.PodNetworkHealthStatus
	var err error
	if it.obj != nil {
		status, err = w.apply(ctx, it.obj)
	} else if err = w.takeFor(ctx, p); err == nil {
		err = it.apply(ctx)
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
	if err != nil && rejected(err) {
		// The API refused this request for what it is (invalid, forbidden, too large...):
		// the same request would be refused again, so it is not retried; a newer state of
		// the key is written when it comes.
		w.mu.Lock()
		delete(w.failures, key)
		delete(w.stale, key)
		w.queue.Done(key)
		w.notifyLocked()
		w.mu.Unlock()
		w.done(writeResult{key: key, reason: it.reason, priority: p, err: err, rejected: true})
		return
	}
	if err != nil {
		w.mu.Lock()
		n := w.failures[key]
		w.failures[key] = n + 1
		if apierrors.IsConflict(err) {
			w.stale[key] = true
		}
		backoff := retryMax
		if n < 5 {
			backoff = min(retryBase<<n, retryMax)
		}
		if drop, dropped := w.queue.Retry(key, p, it, w.now().Add(backoff)); dropped {
			w.forgetLocked(drop.Key)
		}
		w.notifyLocked()
		w.mu.Unlock()
		w.done(writeResult{key: key, reason: it.reason, priority: p, err: err})
		return
	}
	w.mu.Lock()
	delete(w.failures, key)
	delete(w.stale, key)
	w.queue.Done(key)
	w.notifyLocked()
	w.mu.Unlock()
	w.done(writeResult{key: key, status: status, reason: it.reason, priority: p})
}

// apply writes one desired state. It returns the status now in the API (nil after delete).
// Each API request takes a budget token; reads from the informer cache take none.
func (w *writer) apply(ctx context.Context, d *desired) (*v1alpha1.PodNetworkHealthStatus, error) {
	api := w.client.NetpulseV1alpha1().PodNetworkHealths(d.obj.Namespace)
	if d.delete {
		if err := w.take(ctx); err != nil {
			return nil, err
		}
		err := api.Delete(ctx, d.obj.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete %s/%s: %w", d.obj.Namespace, d.obj.Name, err)
		}
		return nil, nil
	}
	cur, err := w.lister.PodNetworkHealths(d.obj.Namespace).Get(d.obj.Name)
	w.mu.Lock()
	stale := w.stale[objectKey(d.obj.Namespace, d.obj.Name)]
	w.mu.Unlock()
	if stale {
		// A read, not a write: outside the write budget.
		cur, err = api.Get(ctx, d.obj.Name, metav1.GetOptions{})
	}
	if d.restate != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		upd := cur.DeepCopy()
		d.restate(&upd.Status)
		if apiequality.Semantic.DeepEqual(cur.Status, upd.Status) {
			st := cur.Status
			return &st, nil
		}
		if err := w.take(ctx); err != nil {
			return nil, err
		}
		res, err := api.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("update status %s/%s: %w", d.obj.Namespace, d.obj.Name, err)
		}
		st := res.Status
		return &st, nil
	}
	if apierrors.IsNotFound(err) {
		if err := w.take(ctx); err != nil {
			return nil, err
		}
		created, err := api.Create(ctx, withoutStatus(d.obj), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// The informer has not seen it yet: read it and fall through to the update.
			if err := w.take(ctx); err != nil {
				return nil, err
			}
			created, err = api.Get(ctx, d.obj.Name, metav1.GetOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("create %s/%s: %w", d.obj.Namespace, d.obj.Name, err)
		}
		cur = created
	} else if err != nil {
		return nil, err
	}
	if !apiequality.Semantic.DeepEqual(cur.Spec, d.obj.Spec) || !apiequality.Semantic.DeepEqual(cur.OwnerReferences, d.obj.OwnerReferences) {
		upd := cur.DeepCopy()
		upd.Spec = d.obj.Spec
		upd.OwnerReferences = d.obj.OwnerReferences
		if err := w.take(ctx); err != nil {
			return nil, err
		}
		if cur, err = api.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("update %s/%s: %w", d.obj.Namespace, d.obj.Name, err)
		}
	}
	if apiequality.Semantic.DeepEqual(cur.Status, d.obj.Status) {
		st := cur.Status
		return &st, nil // identical status is never rewritten
	}
	upd := cur.DeepCopy()
	upd.Status = d.obj.Status
	if err := w.take(ctx); err != nil {
		return nil, err
	}
	res, err := api.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status %s/%s: %w", d.obj.Namespace, d.obj.Name, err)
	}
	st := res.Status
	return &st, nil
}

func withoutStatus(o *v1alpha1.PodNetworkHealth) *v1alpha1.PodNetworkHealth {
	c := o.DeepCopy()
	c.Status = v1alpha1.PodNetworkHealthStatus{}
	c.ResourceVersion = ""
	return c
}
