// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8sindex

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Scope limits what a watcher lists and watches (agents watch only what they need).
// The zero value is the whole cluster.
type Scope struct {
	// Namespace: only pods of this namespace.
	Namespace string
	// LabelSelector: only pods matching this selector.
	LabelSelector string
	// NodeName: only pods on this node (field selector spec.nodeName) and only this Node.
	NodeName string
	// NoNodes: do not watch Node objects (no node addresses, zones or regions; no RBAC on
	// nodes needed).
	NoNodes bool
}

// Validate checks the label selector.
func (s Scope) Validate() error {
	if s.LabelSelector != "" {
		if _, err := labels.Parse(s.LabelSelector); err != nil {
			return fmt.Errorf("label_selector: %w", err)
		}
	}
	return nil
}

// Watcher keeps an Index up to date with one reflector per resource type: an initial
// list (or watch-list stream) and then a watch, never a periodic relist (resync 0).
// Objects are decoded by client-go and immediately reduced to records by the watcher's
// own cache.Store; nothing else is retained.
type Watcher struct {
	ix     *Index
	logger *zap.Logger
	hc     *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	pods  *podStore
	nodes *nodeStore // nil with Scope.NoNodes
	stop  sync.Once
}

// Watch starts watching with cfg (copied; a private HTTP transport is created so Stop can
// close its connections) and returns at once; use WaitForSync to wait for the initial state.
func Watch(cfg *rest.Config, ix *Index, scope Scope, logger *zap.Logger) (*Watcher, error) {
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	c := rest.CopyConfig(cfg)
	if c.Dial == nil {
		// A custom dialer makes client-go build a transport for this watcher alone instead
		// of sharing its process-wide cached one, so Stop can close the connections.
		c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{ix: ix, logger: logger, hc: hc, cancel: cancel}
	w.pods = &podStore{ix: ix, labelKeys: ix.labelKeys, synced: make(chan struct{})}
	w.run(ctx, "pods", &corev1.Pod{}, w.pods, podListWatch(cs, scope))
	if !scope.NoNodes {
		w.nodes = &nodeStore{ix: ix, synced: make(chan struct{})}
		w.run(ctx, "nodes", &corev1.Node{}, w.nodes, nodeListWatch(cs, scope))
	}
	logger.Info("k8sindex: watching pods and nodes (list once, then watch)",
		zap.String("namespace", scope.Namespace), zap.String("label_selector", scope.LabelSelector),
		zap.String("node_name", scope.NodeName), zap.Bool("nodes", !scope.NoNodes))
	if ix.grace > 0 {
		interval := min(max(time.Duration(ix.grace)/2, time.Second), time.Minute)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					ix.Expire()
				}
			}
		}()
	}
	return w, nil
}

func (w *Watcher) run(ctx context.Context, what string, expected runtime.Object, store cache.ReflectorStore, lw *cache.ListWatch) {
	r := cache.NewReflectorWithOptions(lw, expected, store, cache.ReflectorOptions{
		Name:         "netpulse/k8sindex " + what,
		ResyncPeriod: 0, // informers only: no periodic resync, and the reflector never relists on its own
	})
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		r.RunWithContext(ctx)
	}()
}

func podListWatch(cs kubernetes.Interface, s Scope) *cache.ListWatch {
	apply := func(o *metav1.ListOptions) {
		o.LabelSelector = s.LabelSelector
		if s.NodeName != "" {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", s.NodeName).String()
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			apply(&o)
			return cs.CoreV1().Pods(s.Namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			apply(&o)
			return cs.CoreV1().Pods(s.Namespace).Watch(ctx, o)
		},
	}
}

func nodeListWatch(cs kubernetes.Interface, s Scope) *cache.ListWatch {
	apply := func(o *metav1.ListOptions) {
		if s.NodeName != "" {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.NodeName).String()
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			apply(&o)
			return cs.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			apply(&o)
			return cs.CoreV1().Nodes().Watch(ctx, o)
		},
	}
}

// HasSynced reports whether the initial state of every watched resource is in the index.
func (w *Watcher) HasSynced() bool {
	return isClosed(w.pods.synced) && (w.nodes == nil || isClosed(w.nodes.synced))
}

// WaitForSync blocks until HasSynced or ctx ends.
func (w *Watcher) WaitForSync(ctx context.Context) error {
	for _, ch := range w.syncChans() {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (w *Watcher) syncChans() []chan struct{} {
	if w.nodes == nil {
		return []chan struct{}{w.pods.synced}
	}
	return []chan struct{}{w.pods.synced, w.nodes.synced}
}

// Events returns how many add, update and delete events the watcher applied (pods, nodes).
func (w *Watcher) Events() (pods, nodes int64) {
	pods = w.pods.events.Load()
	if w.nodes != nil {
		nodes = w.nodes.events.Load()
	}
	return pods, nodes
}

// Stop stops the reflectors, waits for them and closes the watcher's connections. It is
// safe to call more than once.
func (w *Watcher) Stop() {
	w.stop.Do(func() {
		w.cancel()
		w.wg.Wait()
		w.hc.CloseIdleConnections()
	})
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// podStore is the reflector's store: it turns objects into records and applies them to
// the index. It implements cache.TransformingStore so that a watch-list initial sync
// keeps records, not pods, in the reflector's temporary store.
type podStore struct {
	ix        *Index
	labelKeys []string
	synced    chan struct{}
	once      sync.Once
	events    atomic.Int64
}

var _ cache.TransformingStore = (*podStore)(nil)

func (s *podStore) record(obj any) *PodRecord {
	switch o := obj.(type) {
	case *PodRecord:
		return o
	case *corev1.Pod:
		r := PodRecordFromPod(o, s.labelKeys)
		return &r
	case cache.DeletedFinalStateUnknown:
		return s.record(o.Obj)
	default:
		return nil
	}
}

func (s *podStore) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			r := PodRecordFromPod(p, s.labelKeys)
			return &r, nil
		}
		return obj, nil
	}
}

func (s *podStore) Add(obj any) error { return s.Update(obj) }

func (s *podStore) Update(obj any) error {
	if r := s.record(obj); r != nil {
		s.events.Add(1)
		s.ix.UpsertPod(r)
	}
	return nil
}

func (s *podStore) Delete(obj any) error {
	if r := s.record(obj); r != nil {
		s.events.Add(1)
		s.ix.DeletePod(r.UID)
	}
	return nil
}

func (s *podStore) Replace(list []any, _ string) error {
	records := make([]*PodRecord, 0, len(list))
	for _, obj := range list {
		if r := s.record(obj); r != nil {
			records = append(records, r)
		}
	}
	s.ix.ReplacePods(records)
	s.once.Do(func() { close(s.synced) })
	return nil
}

func (s *podStore) Resync() error { return nil }

type nodeStore struct {
	ix     *Index
	synced chan struct{}
	once   sync.Once
	events atomic.Int64
}

var _ cache.TransformingStore = (*nodeStore)(nil)

func (s *nodeStore) record(obj any) *NodeRecord {
	switch o := obj.(type) {
	case *NodeRecord:
		return o
	case *corev1.Node:
		r := NodeRecordFromNode(o)
		return &r
	case cache.DeletedFinalStateUnknown:
		return s.record(o.Obj)
	default:
		return nil
	}
}

func (s *nodeStore) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) {
		if n, ok := obj.(*corev1.Node); ok {
			r := NodeRecordFromNode(n)
			return &r, nil
		}
		return obj, nil
	}
}

func (s *nodeStore) Add(obj any) error { return s.Update(obj) }

func (s *nodeStore) Update(obj any) error {
	if r := s.record(obj); r != nil {
		s.events.Add(1)
		s.ix.UpsertNode(r)
	}
	return nil
}

func (s *nodeStore) Delete(obj any) error {
	if r := s.record(obj); r != nil {
		s.events.Add(1)
		s.ix.DeleteNode(r.Name)
	}
	return nil
}

func (s *nodeStore) Replace(list []any, _ string) error {
	records := make([]*NodeRecord, 0, len(list))
	for _, obj := range list {
		if r := s.record(obj); r != nil {
			records = append(records, r)
		}
	}
	s.ix.ReplaceNodes(records)
	s.once.Do(func() { close(s.synced) })
	return nil
}

func (s *nodeStore) Resync() error { return nil }
