// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/ratelog"
	"github.com/netpulse/netpulse/internal/targetpolicy"
)

// Vantage modes of a runner.
const (
	VantageAgent   = "agent"
	VantageSidecar = "sidecar"
)

// Config of a Runner.
type Config struct {
	// Vantage is VantageAgent (checks placed on Node, all namespaces) or VantageSidecar
	// (checks placed on Pod, in Namespace).
	Vantage   string
	Node      string
	Pod       string
	Namespace string
	// OpenShift: also run PodNetworkConnectivityChecks.
	OpenShift bool
	// MaxChecks bounds the checks run at once; more are logged and left alone.
	MaxChecks int
	Policy    targetpolicy.Policy
}

// Selector is the label selector of the checks placed on this vantage point.
func (c Config) Selector() labels.Selector {
	if c.Vantage == VantageSidecar {
		return labels.SelectorFromSet(labels.Set{v1alpha1.LabelVantagePod: c.Pod, v1alpha1.LabelVantageMode: string(v1alpha1.VantageSidecar)})
	}
	return labels.SelectorFromSet(labels.Set{v1alpha1.LabelVantageNode: c.Node, v1alpha1.LabelVantageMode: string(v1alpha1.VantageAgent)})
}

var (
	networkCheckGVR = v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.NetworkCheckPlural)
	pnccGVR         = ocv1alpha1.GroupVersionResource
)

// Runner watches the checks placed on its vantage point and runs them.
type Runner struct {
	cfg      Config
	client   dynamic.Interface
	logger   *zap.Logger
	emit     func(Result)
	resolver Resolver
	skipped  *ratelog.Logger

	mu      sync.Mutex
	running map[string]*running
	stopped bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

type running struct {
	a      Assignment
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Runner; emit receives every run's result (from the runs' goroutines).
func New(cfg Config, client dynamic.Interface, logger *zap.Logger, emit func(Result)) *Runner {
	if cfg.MaxChecks <= 0 {
		cfg.MaxChecks = 100
	}
	return &Runner{cfg: cfg, client: client, logger: logger, emit: emit, resolver: net.DefaultResolver,
		skipped: ratelog.New(logger, 30*time.Second, 1), running: map[string]*running{}, stop: make(chan struct{})}
}

// Start starts the watches (list+watch with the vantage point's label selector); it does
// not wait for them.
func (r *Runner) Start() {
	ns := metav1.NamespaceAll
	if r.cfg.Vantage == VantageSidecar {
		ns = r.cfg.Namespace
	}
	r.watch(networkCheckGVR, ns, &v1alpha1.NetworkCheck{})
	if r.cfg.OpenShift {
		r.watch(pnccGVR, ns, &ocv1alpha1.PodNetworkConnectivityCheck{})
	}
}

func (r *Runner) watch(gvr schema.GroupVersionResource, ns string, typed runtime.Object) {
	sel := r.cfg.Selector().String()
	res := r.client.Resource(gvr).Namespace(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return res.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.upsert(o, typed) },
		UpdateFunc: func(_, o any) { r.upsert(o, typed) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if u, ok := o.(*unstructured.Unstructured); ok {
				r.remove(kindOf(typed) + "/" + u.GetNamespace() + "/" + u.GetName())
			}
		},
	})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		inf.Run(r.stop)
	}()
}

func kindOf(typed runtime.Object) string {
	if _, ok := typed.(*ocv1alpha1.PodNetworkConnectivityCheck); ok {
		return KindPNCC
	}
	return KindNetworkCheck
}

func (r *Runner) upsert(o any, typed runtime.Object) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	key := kindOf(typed) + "/" + u.GetNamespace() + "/" + u.GetName()
	var (
		a   Assignment
		err error
	)
	switch typed.(type) {
	case *ocv1alpha1.PodNetworkConnectivityCheck:
		var c ocv1alpha1.PodNetworkConnectivityCheck
		if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err == nil {
			if a, err = FromPNCC(&c); err == nil {
				err = r.pnccPlacedHere(&c)
			}
		}
	default:
		var nc v1alpha1.NetworkCheck
		if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc); err == nil {
			if a, err = FromNetworkCheck(&nc); err == nil {
				err = r.cfg.PlacedHere(&nc)
			}
		}
	}
	if err != nil {
		r.logger.Debug("check not runnable", zap.String("check", key), zap.Error(err))
		r.remove(key)
		return
	}
	r.start(a)
}

// pnccPlacedHere: a PodNetworkConnectivityCheck's status has no field for the gateway's
// placement. A sidecar runs only its own pod's checks. An agent relies on the placement
// label: on OpenShift, PodNetworkConnectivityChecks are written by the cluster's network
// operator and cluster admins, not by namespace editors (controlplane.operator.openshift.io
// is not aggregated into the edit and admin roles), and the agent may not read other
// namespaces' pods to check the label against the source pod's node.
func (r *Runner) pnccPlacedHere(c *ocv1alpha1.PodNetworkConnectivityCheck) error {
	if r.cfg.Vantage == VantageSidecar && (c.Namespace != r.cfg.Namespace || c.Spec.SourcePod != r.cfg.Pod) {
		return fmt.Errorf("source pod %s/%s is not this sidecar's pod", c.Namespace, c.Spec.SourcePod)
	}
	return nil
}

// start (re)starts a's schedule unless it already runs unchanged.
func (r *Runner) start(a Assignment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	key := a.Key()
	if cur, ok := r.running[key]; ok {
		if cur.a == a {
			return
		}
		cur.cancel()
		<-cur.done
		delete(r.running, key)
	}
	if len(r.running) >= r.cfg.MaxChecks {
		r.skipped.Log(zap.WarnLevel, "more checks placed on this vantage point than max_checks; not running some",
			zap.Int("max_checks", r.cfg.MaxChecks), zap.String("check", key))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{a: a, cancel: cancel, done: make(chan struct{})}
	r.running[key] = run
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(run.done)
		r.loop(ctx, a)
	}()
}

// loop runs a at its interval, the first run after a short jitter (so that a restarted
// agent does not run all its checks at once).
func (r *Runner) loop(ctx context.Context, a Assignment) {
	first := time.Duration(rand.Int64N(int64(min(a.Interval/10, 2*time.Second)) + 1))
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		res := Run(ctx, a, r.cfg.Policy, r.resolver)
		if ctx.Err() != nil {
			return
		}
		r.emit(res)
		t.Reset(max(a.Interval-time.Since(start), 0))
	}
}

func (r *Runner) remove(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.running[key]; ok {
		cur.cancel()
		<-cur.done
		delete(r.running, key)
	}
}

// Running lists the keys of the checks being run.
func (r *Runner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.running))
	for k := range r.running {
		keys = append(keys, k)
	}
	return keys
}

// Stop stops the watches and every run, and waits for them. Safe twice.
func (r *Runner) Stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	close(r.stop)
	for k, cur := range r.running {
		cur.cancel()
		delete(r.running, k)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// String describes the runner for logs.
func (c Config) String() string {
	return fmt.Sprintf("%s checks with selector %q", c.Vantage, c.Selector().String())
}
