// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package viewserver serves netpulse's connectivity matrix as JSON and as an embedded,
// dependency-free web page. The netpulse_view extension runs it in the gateway;
// `kubectl netpulse serve` runs the same server on a workstation with the user's
// kubeconfig.
//
// What it shows comes from one LIST+WATCH each (informers, never a periodic LIST) of
// what the pod_network_health exporter writes: PodNetworkHealth objects, and of the
// nodes only their names, zone labels and netpulse condition; the agent pods' node
// places pod targets. Whether an object is current is its writer's Lease's to say: the
// writers' NetworkHealthSummary objects (one per shard) are watched and the Lease each
// names is read every few seconds (writers.go). The model is rebuilt on a request after
// an informer event or a writer's change of currency, at most once per change, and shared
// by every request until the next one.
package viewserver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/client/informers/externalversions"
	pnhlisters "github.com/netpulse/netpulse/api/client/listers/api/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/matrix"
)

// DefaultPodSelector selects netpulse's agent pods: the pod targets the matrix places.
const DefaultPodSelector = "app.kubernetes.io/part-of=netpulse,app.kubernetes.io/component=agent"

// SourceOptions configure a Source.
type SourceOptions struct {
	// Namespace restricts PodNetworkHealth objects and pods to one namespace ("": all).
	Namespace string
	// SummaryNamespace is where the writers' NetworkHealthSummary objects are watched:
	// the gateway's namespace, beside its Leases (default: Namespace, "" being all).
	SummaryNamespace string
	// ConditionType is the node condition to show (default matrix.DefaultConditionType).
	ConditionType string
	// PodSelector selects the pods whose node places pod targets (default
	// DefaultPodSelector); "-" watches no pods (targets are then placed by the node
	// they observe from). A pod target that is not selected is placed the same way.
	PodSelector string
	// Clock (default time.Now).
	Clock func() time.Time
}

// Snapshotter is what the HTTP handler reads: the current model, a version that changes
// whenever the model may have, and whether the first LIST has completed.
type Snapshotter interface {
	Snapshot() (m *matrix.Model, version uint64, synced bool)
}

// Source keeps informers on PodNetworkHealth objects, nodes and agent pods.
type Source struct {
	opts  SourceOptions
	pnhF  externalversions.SharedInformerFactory
	nodeF kinformers.SharedInformerFactory
	podF  kinformers.SharedInformerFactory
	pnhs  pnhlisters.PodNetworkHealthLister
	nodes corelisters.NodeLister
	pods  corelisters.PodLister
	// zones: the ZoneNetworkHealth objects (cluster-scoped, few). Not awaited: a reader
	// without the right to list them sees everything else.
	zones pnhlisters.ZoneNetworkHealthLister
	// The writers: their summaries (few, one per shard; not awaited either), the Leases
	// they name (read by GET, never watched: a cluster-wide Lease watch would carry every
	// node's heartbeat), and what those say, by shard key (writers.go).
	sumF        externalversions.SharedInformerFactory
	summaries   pnhlisters.NetworkHealthSummaryLister
	sumSynced   cache.InformerSynced
	leases      coordinationclient.LeasesGetter
	writers     atomic.Pointer[map[string]matrix.Writer]
	writerEvery time.Duration
	synced      []cache.InformerSynced
	version     atomic.Uint64

	mu       sync.Mutex
	model    *matrix.Model
	modelVer uint64
	started  bool
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup // the writers' refresh
}

// NewSource creates the clients and informers; nothing is contacted before Start.
func NewSource(cfg *rest.Config, opts SourceOptions) (*Source, error) {
	if opts.ConditionType == "" {
		opts.ConditionType = matrix.DefaultConditionType
	}
	if opts.PodSelector == "" {
		opts.PodSelector = DefaultPodSelector
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.PodSelector != "-" {
		if _, err := labels.Parse(opts.PodSelector); err != nil {
			return nil, fmt.Errorf("pod selector %q: %w", opts.PodSelector, err)
		}
	}
	pc, err := kubeclient.PodNetworkHealthClient(cfg)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return newSource(pc, kc, opts)
}

// newSource is NewSource on given clients (opts defaulted).
func newSource(pc versioned.Interface, kc kubernetes.Interface, opts SourceOptions) (*Source, error) {
	s := &Source{opts: opts, stop: make(chan struct{}), leases: kc.CoordinationV1(), writerEvery: writerRefresh}
	s.writers.Store(new(map[string]matrix.Writer))
	s.pnhF = externalversions.NewSharedInformerFactoryWithOptions(pc, 0,
		externalversions.WithNamespace(opts.Namespace), externalversions.WithTransform(stripPNH))
	pi := s.pnhF.Netpulse().V1alpha1().PodNetworkHealths()
	s.pnhs = pi.Lister()
	sumNS := opts.SummaryNamespace
	if sumNS == "" {
		sumNS = opts.Namespace
	}
	s.sumF = externalversions.NewSharedInformerFactoryWithOptions(pc, 0,
		externalversions.WithNamespace(sumNS), externalversions.WithTransform(stripSummary))
	si := s.sumF.Netpulse().V1alpha1().NetworkHealthSummaries()
	s.summaries, s.sumSynced = si.Lister(), si.Informer().HasSynced
	s.nodeF = kinformers.NewSharedInformerFactoryWithOptions(kc, 0, kinformers.WithTransform(stripNode(opts.ConditionType)))
	ni := s.nodeF.Core().V1().Nodes()
	s.nodes = ni.Lister()
	handlers := []cache.SharedIndexInformer{pi.Informer(), ni.Informer()}
	zi := s.pnhF.Netpulse().V1alpha1().ZoneNetworkHealths()
	s.zones = zi.Lister()
	if opts.PodSelector != "-" {
		s.podF = kinformers.NewSharedInformerFactoryWithOptions(kc, 0, kinformers.WithNamespace(opts.Namespace),
			kinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = opts.PodSelector }),
			kinformers.WithTransform(stripPod))
		podi := s.podF.Core().V1().Pods()
		s.pods = podi.Lister()
		handlers = append(handlers, podi.Informer())
	}
	for _, inf := range append(handlers, zi.Informer()) {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { s.version.Add(1) },
			UpdateFunc: func(o, n any) {
				if changed(o, n) {
					s.version.Add(1)
				}
			},
			DeleteFunc: func(any) { s.version.Add(1) },
		}); err != nil {
			return nil, err
		}
	}
	for _, inf := range handlers {
		s.synced = append(s.synced, inf.HasSynced)
	}
	return s, nil
}

// Start starts the informers (one LIST, then WATCH each) and the writers' refresh, and
// returns at once. Nothing starts after Shutdown.
func (s *Source) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped() {
		return
	}
	s.started = true
	s.pnhF.Start(s.stop)
	s.sumF.Start(s.stop)
	s.nodeF.Start(s.stop)
	if s.podF != nil {
		s.podF.Start(s.stop)
	}
	s.wg.Add(1)
	go s.runWriters()
}

// Shutdown stops the informers and the writers' refresh and waits for their goroutines.
// Safe without Start and more than once.
func (s *Source) Shutdown() {
	s.mu.Lock() // so that Start either ran before or starts nothing
	s.stopOnce.Do(func() { close(s.stop) })
	s.mu.Unlock()
	s.pnhF.Shutdown()
	s.sumF.Shutdown()
	s.nodeF.Shutdown()
	if s.podF != nil {
		s.podF.Shutdown()
	}
	s.wg.Wait()
}

// stopped: Shutdown has begun.
func (s *Source) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// Synced reports whether every informer has completed its first LIST.
func (s *Source) Synced() bool {
	for _, f := range s.synced {
		if !f() {
			return false
		}
	}
	return true
}

// WaitForSync waits until Synced or ctx ends.
func (s *Source) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.synced...)
}

// Snapshot returns the model of the informers' current state and the writers' last
// refresh, rebuilding it when an event or a writer's change arrived since the last build.
// It reads memory only.
func (s *Source) Snapshot() (*matrix.Model, uint64, bool) {
	if !s.Synced() {
		return nil, 0, false
	}
	v := s.version.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model != nil && s.modelVer == v {
		return s.model, v, true
	}
	in := matrix.Input{Now: s.opts.Clock(), Writers: *s.writers.Load()}
	objs, _ := s.pnhs.List(labels.Everything())
	in.Objects = objs
	nodes, _ := s.nodes.List(labels.Everything())
	for _, n := range nodes {
		in.Nodes = append(in.Nodes, matrix.NodeFrom(n, s.opts.ConditionType))
	}
	in.ZonePairs, _ = s.zones.List(labels.Everything())
	if s.pods != nil {
		pods, _ := s.pods.List(labels.Everything())
		for _, p := range pods {
			in.Pods = append(in.Pods, matrix.PodFrom(p))
		}
	}
	s.model, s.modelVer = matrix.Build(in), v
	return s.model, v, true
}

// changed reports whether an update changes what the view shows: a node's or pod's
// stripped copy (a node's condition heartbeat alone is no change), any write of a
// PodNetworkHealth.
func changed(o, n any) bool {
	switch on := o.(type) {
	case *corev1.Node:
		nn, ok := n.(*corev1.Node)
		return !ok || on.Name != nn.Name || !equality.Semantic.DeepEqual(on.Labels, nn.Labels) ||
			!equality.Semantic.DeepEqual(on.Status.Conditions, nn.Status.Conditions)
	case *corev1.Pod:
		nn, ok := n.(*corev1.Pod)
		return !ok || on.UID != nn.UID || on.Spec.NodeName != nn.Spec.NodeName
	case *v1alpha1.PodNetworkHealth:
		nn, ok := n.(*v1alpha1.PodNetworkHealth)
		return !ok || on.ResourceVersion != nn.ResourceVersion
	case *v1alpha1.ZoneNetworkHealth:
		nn, ok := n.(*v1alpha1.ZoneNetworkHealth)
		return !ok || on.ResourceVersion != nn.ResourceVersion
	}
	return true
}

// stripPNH drops managed fields and annotations: the view reads spec and status only.
func stripPNH(obj any) (any, error) {
	if o, ok := obj.(*v1alpha1.PodNetworkHealth); ok {
		o.ManagedFields = nil
		o.Annotations = nil
	}
	return obj, nil
}

// stripNode keeps a node's name, zone label and netpulse condition (without its
// heartbeat time, so a heartbeat alone is no change) and nothing else: no addresses,
// no other labels or conditions.
func stripNode(conditionType string) cache.TransformFunc {
	return func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
		if z, ok := n.Labels[corev1.LabelTopologyZone]; ok {
			out.Labels = map[string]string{corev1.LabelTopologyZone: z}
		}
		for _, c := range n.Status.Conditions {
			if string(c.Type) == conditionType {
				c.LastHeartbeatTime = metav1.Time{}
				out.Status.Conditions = []corev1.NodeCondition{c}
			}
		}
		return out, nil
	}
}

// stripPod keeps a pod's identity and node.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName},
	}, nil
}
