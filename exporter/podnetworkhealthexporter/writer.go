package podnetworkhealthexporter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/client/informers/externalversions"
	pnhlisters "github.com/netpulse/netpulse/api/client/listers/api/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
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
	obj     *v1alpha1.PodNetworkHealth
	reason  string
	delete  bool
	version uint64
}

// writeResult tells the exporter what reached the API.
type writeResult struct {
	key    string
	status *v1alpha1.PodNetworkHealthStatus // nil after a delete
	reason string
	err    error
}

// writer applies desired states to the API: a rate-limited work queue (per-item exponential
// back-off under a global token bucket), latest-state coalescing, conflict re-reads from
// its own informer, and never a rewrite of an identical status.
type writer struct {
	client   versioned.Interface
	factory  externalversions.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   pnhlisters.PodNetworkHealthLister
	limiter  workqueue.TypedRateLimiter[string]
	logger   *zap.Logger
	done     func(writeResult)

	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[string] // one per leadership term; nil between
	pending map[string]*desired
	seq     uint64
	stopCh  chan struct{}
	wg      sync.WaitGroup
}

func newWriter(client versioned.Interface, namespace string, qps float64, burst int, logger *zap.Logger, done func(writeResult)) *writer {
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0,
		externalversions.WithNamespace(namespace),
		externalversions.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.Set{LabelManagedBy: LabelManagedByValue}.String()
		}))
	inf := factory.Netpulse().V1alpha1().PodNetworkHealths()
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 5*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(qps), burst)},
	)
	return &writer{
		client:   client,
		factory:  factory,
		informer: inf.Informer(),
		lister:   inf.Lister(),
		limiter:  limiter,
		logger:   logger,
		done:     done,
		pending:  map[string]*desired{},
		stopCh:   make(chan struct{}),
	}
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

// set records the latest desired state of an object and schedules a write.
func (w *writer) set(d *desired) {
	key := d.obj.Namespace + "/" + d.obj.Name
	w.mu.Lock()
	w.seq++
	d.version = w.seq
	w.pending[key] = d
	q := w.queue
	w.mu.Unlock()
	if q != nil {
		q.Add(key)
	}
}

func (w *writer) pendingCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// run starts n workers on a fresh queue holding every pending key; they stop when ctx
// ends (the end of a leadership term). Pending states survive for the next term.
func (w *writer) run(ctx context.Context, n int) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(w.limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "pod_network_health"})
	w.mu.Lock()
	w.queue = q
	for key := range w.pending {
		q.Add(key)
	}
	w.mu.Unlock()
	for range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for w.next(ctx, q) {
			}
		}()
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		<-ctx.Done()
		w.mu.Lock()
		if w.queue == q {
			w.queue = nil
		}
		w.mu.Unlock()
		q.ShutDown()
	}()
}

// stop waits for the workers (their ctx must be done) and ends the informer. Safe to call
// more than once.
func (w *writer) stop() {
	w.wg.Wait()
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
	w.factory.Shutdown()
}

func (w *writer) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	w.mu.Lock()
	d := w.pending[key]
	w.mu.Unlock()
	if d == nil {
		q.Forget(key)
		return true
	}
	status, err := w.apply(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		w.done(writeResult{key: key, reason: d.reason, err: err})
		q.AddRateLimited(key) // d stays pending unless a newer state replaced it
		return true
	}
	w.mu.Lock()
	if cur := w.pending[key]; cur != nil && cur.version == d.version {
		delete(w.pending, key)
	}
	w.mu.Unlock()
	q.Forget(key)
	w.done(writeResult{key: key, status: status, reason: d.reason})
	return true
}

// apply writes one desired state. It returns the status now in the API (nil after delete).
func (w *writer) apply(ctx context.Context, d *desired) (*v1alpha1.PodNetworkHealthStatus, error) {
	api := w.client.NetpulseV1alpha1().PodNetworkHealths(d.obj.Namespace)
	if d.delete {
		err := api.Delete(ctx, d.obj.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete %s/%s: %w", d.obj.Namespace, d.obj.Name, err)
		}
		return nil, nil
	}
	cur, err := w.lister.PodNetworkHealths(d.obj.Namespace).Get(d.obj.Name)
	if apierrors.IsNotFound(err) {
		created, err := api.Create(ctx, withoutStatus(d.obj), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// The informer has not seen it yet: read it and fall through to the update.
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
