// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package discovery watches the Kubernetes objects pod_probe needs — its peers (the pods of
// its own DaemonSet, by label), the pods behind configured selectors, and optionally node
// labels and addresses — with label-scoped informers (never periodic LISTs, never an
// all-pods watch) and serves filtered snapshots of them. Every cached object is stripped
// to what probing reads, and nodes are watched as metadata only unless their addresses are
// probed: a Node's status (images, conditions) is most of its size, and the informer's
// first LIST holds all of them at once.
package discovery

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// ZoneLabel and RegionLabel are the well-known node topology labels.
const (
	ZoneLabel   = "topology.kubernetes.io/zone"
	RegionLabel = "topology.kubernetes.io/region"
)

// Pod is the part of a pod that probing needs.
type Pod struct {
	UID        string
	Name       string
	Namespace  string
	Node       string
	IPs        []netip.Addr
	ReadySince time.Time
	// Ports are the named TCP container ports (for named selector ports): a slice, not a
	// map, since a pod has a few and every peer's is cached (~70 bytes against ~300).
	Ports []NamedPort
}

// NamedPort is a named container port.
type NamedPort struct {
	Name string
	Port int32
}

// Node is the part of a node that probing needs.
type Node struct {
	Name string
	Zone string
	IPs  []netip.Addr // InternalIP first, then ExternalIP
}

// Selector is one label-scoped pod watch.
type Selector struct {
	Namespace     string
	LabelSelector string
}

// Options configure a Watcher.
type Options struct {
	Peers     *Selector  // nil: no peer watch
	Selectors []Selector // selector targets
	// Nodes enables a node watch for their zones: metadata only (PartialObjectMetadata),
	// stripped to the name and the topology labels before it is cached.
	Nodes bool
	// NodeAddresses also reads the nodes' addresses, which are in their status: the watch
	// is then of whole Node objects, stripped to the name, the topology labels and the
	// addresses before they are cached.
	NodeAddresses bool
}

// informerFactory is what the Watcher needs of a typed or a metadata informer factory.
type informerFactory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// Watcher runs the informers.
type Watcher struct {
	opts      Options
	factories []informerFactory
	peers     cache.SharedIndexInformer
	selectors []cache.SharedIndexInformer
	nodes     cache.SharedIndexInformer
	version   atomic.Uint64
	stopCh    chan struct{}
	stopOnce  sync.Once
}

// New builds the informers; Start runs them. meta serves the metadata-only node watch
// (opts.Nodes without opts.NodeAddresses).
func New(client kubernetes.Interface, meta metadata.Interface, opts Options) *Watcher {
	w := &Watcher{opts: opts, stopCh: make(chan struct{})}
	bump := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { w.version.Add(1) },
		UpdateFunc: func(old, cur any) {
			if !samePlanInput(old, cur) {
				w.version.Add(1)
			}
		},
		DeleteFunc: func(any) { w.version.Add(1) },
	}
	podInformer := func(sel Selector) cache.SharedIndexInformer {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithNamespace(sel.Namespace),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = sel.LabelSelector }),
			informers.WithTransform(stripPod))
		w.factories = append(w.factories, f)
		inf := f.Core().V1().Pods().Informer()
		_, _ = inf.AddEventHandler(bump)
		return inf
	}
	if opts.Peers != nil {
		w.peers = podInformer(*opts.Peers)
	}
	for _, s := range opts.Selectors {
		w.selectors = append(w.selectors, podInformer(s))
	}
	switch {
	case opts.NodeAddresses:
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripNode))
		w.factories = append(w.factories, f)
		w.nodes = f.Core().V1().Nodes().Informer()
	case opts.Nodes:
		f := metadatainformer.NewSharedInformerFactoryWithOptions(meta, 0, metadatainformer.WithTransform(stripNodeMetadata))
		w.factories = append(w.factories, f)
		w.nodes = f.ForResource(nodesResource).Informer()
	}
	if w.nodes != nil {
		_, _ = w.nodes.AddEventHandler(bump)
	}
	return w
}

// samePlanInput reports whether an update leaves what plans are made of as it was: a pod's
// cached record, a node's topology labels and addresses (their resource versions aside).
// Nodes report their status every few minutes and pods change annotations; at 65,000
// nodes each of those was a plan rebuild (144 ms and ~80 MB of garbage at that size,
// BenchmarkAgentStateAtScale) every round.
func samePlanInput(old, cur any) bool {
	switch o := old.(type) {
	case *cachedPod:
		c, ok := cur.(*cachedPod)
		return ok && o.probeable == c.probeable && o.Name == c.Name && o.Namespace == c.Namespace && o.UID == c.UID &&
			reflect.DeepEqual(o.pod, c.pod)
	case *corev1.Node:
		c, ok := cur.(*corev1.Node)
		return ok && o.Name == c.Name && maps.Equal(o.Labels, c.Labels) && slices.Equal(o.Status.Addresses, c.Status.Addresses)
	case *metav1.PartialObjectMetadata:
		c, ok := cur.(*metav1.PartialObjectMetadata)
		return ok && o.Name == c.Name && maps.Equal(o.Labels, c.Labels)
	}
	return false
}

// Start runs the informers in the background; it does not wait for them to sync.
func (w *Watcher) Start() {
	for _, f := range w.factories {
		f.Start(w.stopCh)
	}
}

// WaitForSync waits until every informer has listed once, or ctx ends.
func (w *Watcher) WaitForSync(ctx context.Context) bool {
	var synced []cache.InformerSynced
	for _, inf := range w.all() {
		synced = append(synced, inf.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// Stop ends the informers and waits for their goroutines. Safe to call twice or unstarted.
func (w *Watcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.stopCh)
		for _, f := range w.factories {
			f.Shutdown()
		}
	})
}

// Version changes whenever a watched object changes; callers rebuild plans when it moves.
func (w *Watcher) Version() uint64 { return w.version.Load() }

func (w *Watcher) all() []cache.SharedIndexInformer {
	var all []cache.SharedIndexInformer
	if w.peers != nil {
		all = append(all, w.peers)
	}
	all = append(all, w.selectors...)
	if w.nodes != nil {
		all = append(all, w.nodes)
	}
	return all
}

// Peers returns the probe-able peers: Ready, not terminating, with at least one IP, and
// Ready for at least grace at now. Sorted by UID. The Pods' IPs and Ports are the cache's:
// read-only.
func (w *Watcher) Peers(now time.Time, grace time.Duration) []Pod {
	pods, _ := w.PeersUntil(now, grace)
	return pods
}

// PeersUntil is Peers, and when the first peer still in its grace period at now leaves it
// (zero: none is): the plan must be rebuilt then, even if nothing else changes.
func (w *Watcher) PeersUntil(now time.Time, grace time.Duration) ([]Pod, time.Time) {
	if w.peers == nil {
		return nil, time.Time{}
	}
	return readyPods(w.peers.GetStore().List(), now, grace)
}

// SelectorPods returns the Ready pods of selector i (no grace period).
func (w *Watcher) SelectorPods(i int, now time.Time) []Pod {
	pods, _ := readyPods(w.selectors[i].GetStore().List(), now, 0)
	return pods
}

// Nodes returns the watched nodes by name; their IPs only with Options.NodeAddresses.
func (w *Watcher) Nodes() map[string]Node {
	out := map[string]Node{}
	if w.nodes == nil {
		return out
	}
	for _, obj := range w.nodes.GetStore().List() {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			out[m.Name] = Node{Name: m.Name, Zone: m.Labels[ZoneLabel]}
			continue
		}
		n := obj.(*corev1.Node)
		node := Node{Name: n.Name, Zone: n.Labels[ZoneLabel]}
		for _, want := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
			for _, a := range n.Status.Addresses {
				if a.Type != want {
					continue
				}
				if ip, err := netip.ParseAddr(a.Address); err == nil {
					node.IPs = append(node.IPs, ip.Unmap())
				}
			}
		}
		out[n.Name] = node
	}
	return out
}

// readyPods returns the cached pods that are probe-able at now, sorted by UID, and when the
// first one still within grace leaves it (zero: none).
func readyPods(objs []any, now time.Time, grace time.Duration) ([]Pod, time.Time) {
	out := make([]Pod, 0, len(objs))
	var next time.Time
	for _, obj := range objs {
		c, ok := obj.(*cachedPod)
		if !ok || !c.probeable {
			continue
		}
		if grace > 0 && !c.pod.ReadySince.IsZero() && now.Sub(c.pod.ReadySince) < grace {
			if at := c.pod.ReadySince.Add(grace); next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		out = append(out, c.pod)
	}
	slices.SortFunc(out, func(a, b Pod) int {
		switch {
		case a.UID < b.UID:
			return -1
		case a.UID > b.UID:
			return 1
		}
		return 0
	})
	return out, next
}

// ResolvePort turns a selector port (number or container port name) into a number for pod.
func ResolvePort(pod Pod, port string) (uint16, error) {
	if n, err := strconv.Atoi(port); err == nil {
		return uint16(n), nil
	}
	for _, p := range pod.Ports {
		if p.Name == port {
			return uint16(p.Port), nil
		}
	}
	return 0, fmt.Errorf("pod %s/%s has no container port named %q", pod.Namespace, pod.Name, port)
}

// cachedPod is what the pod caches keep of a pod: the keys the informer needs and the Pod
// probing reads, decided once when the pod arrives. ~0.5 KB a pod, where a corev1.Pod
// stripped to the same fields kept ~2.4 KB (its PodSpec and PodStatus structs are large
// even empty): at 65,000 peers, ~40 MB of an agent's cache instead of ~200 MB
// (BenchmarkAgentStateAtScale).
type cachedPod struct {
	metav1.ObjectMeta // name, namespace, UID and resource version only
	// probeable: running, not terminating, Ready (or its containers ready while it waits
	// on a readiness gate), with an IP.
	probeable bool
	pod       Pod
}

// stripPod turns a pod into its cachedPod (anything else, a tombstone or an object already
// turned, passes through: the informer may transform an object twice).
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	c := &cachedPod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion}}
	c.pod = Pod{UID: string(p.UID), Name: p.Name, Namespace: p.Namespace, Node: p.Spec.NodeName}
	ready := false
	for _, cond := range p.Status.Conditions {
		switch {
		case cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue:
			ready, c.pod.ReadySince = true, cond.LastTransitionTime.Time
		case cond.Type == corev1.ContainersReady && cond.Status == corev1.ConditionTrue && len(p.Spec.ReadinessGates) > 0 && !ready:
			// Its containers are ready and it waits on a readiness gate - possibly the
			// network-readiness gate, which needs this very probe to open.
			ready, c.pod.ReadySince = true, cond.LastTransitionTime.Time
		}
	}
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			c.pod.IPs = append(c.pod.IPs, a.Unmap())
		}
	}
	for _, ctr := range p.Spec.Containers {
		for _, cp := range ctr.Ports {
			if cp.Name != "" && (cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP) && !slices.ContainsFunc(c.pod.Ports, func(p NamedPort) bool { return p.Name == cp.Name }) {
				c.pod.Ports = append(c.pod.Ports, NamedPort{Name: cp.Name, Port: cp.ContainerPort})
			}
		}
	}
	c.probeable = p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && ready && len(c.pod.IPs) > 0
	return c, nil
}

func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{ObjectMeta: stripNodeMeta(n.ObjectMeta)}
	out.Status.Addresses = n.Status.Addresses
	return out, nil
}

func stripNodeMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: stripNodeMeta(m.ObjectMeta)}, nil
}

// stripNodeMeta keeps a node's identity and topology labels (not its other labels,
// annotations or managed fields).
func stripNodeMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion}
	for _, l := range []string{ZoneLabel, RegionLabel} {
		if v, ok := m.Labels[l]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[l] = v
		}
	}
	return out
}
