// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/netpolicy"
)

// The edge of the NetworkPolicy explanation (checks.explain_network_policy): the watch of
// NetworkPolicies and Namespaces feeding the policy index, and the reads of a failing
// check's pods. Only failing checks are explained, so a healthy cluster's checks cost no
// read; each failing check's pods are read again at most once per placement (heartbeat).

// startPolicyWatch watches NetworkPolicies and Namespaces into c.policies. The informers
// keep only what the evaluator needs (a transform strips everything else before caching):
// a policy's name, namespace and spec; a namespace's name and labels.
func (c *Controller) startPolicyWatch(kube kubernetes.Interface) {
	c.policies = netpolicy.NewIndex()
	c.policyFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(stripForPolicies))
	ix := c.policies
	npInf, nsInf := c.policyFactory.Networking().V1().NetworkPolicies().Informer(), c.policyFactory.Core().V1().Namespaces().Informer()
	// A watch that fails (most often: no RBAC for it) is said once in a while through the
	// collector's logger, naming the option, instead of client-go's line every retry.
	for what, inf := range map[string]cache.SharedIndexInformer{"networkpolicies": npInf, "namespaces": nsInf} {
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			c.skipLog.Log(zap.WarnLevel, "pod_network_health: cannot watch "+what+" for checks.explain_network_policy; failing checks are not explained until it can (RBAC: deploy/rbac/checks.yaml; or turn the option off)",
				zap.Error(err))
		})
	}
	npReg, _ := npInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { setPolicy(ix, o) },
		UpdateFunc: func(_, o any) { setPolicy(ix, o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if np, ok := o.(*networkingv1.NetworkPolicy); ok {
				ix.DeletePolicy(netpolicy.Ref{Namespace: np.Namespace, Name: np.Name})
			}
		},
	})
	nsReg, _ := nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { setNamespace(ix, o) },
		UpdateFunc: func(_, o any) { setNamespace(ix, o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if ns, ok := o.(*corev1.Namespace); ok {
				ix.DeleteNamespace(ns.Name)
			}
		},
	})
	c.policiesSynced = func() bool { return npReg != nil && nsReg != nil && npReg.HasSynced() && nsReg.HasSynced() }
	c.policyFactory.Start(c.stop)
}

func setPolicy(ix *netpolicy.Index, o any) {
	if np, ok := o.(*networkingv1.NetworkPolicy); ok {
		ix.SetPolicy(netpolicy.Compile(np))
	}
}

func setNamespace(ix *netpolicy.Index, o any) {
	if ns, ok := o.(*corev1.Namespace); ok {
		ix.SetNamespace(ns.Name, ns.Labels)
	}
}

// stripForPolicies is the informers' transform: what the evaluator does not need is
// dropped before the object is cached (managed fields, annotations such as
// last-applied-configuration, a namespace's spec and status).
func stripForPolicies(o any) (any, error) {
	meta := func(m metav1.ObjectMeta, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: labels}
	}
	switch o := o.(type) {
	case *networkingv1.NetworkPolicy:
		return &networkingv1.NetworkPolicy{ObjectMeta: meta(o.ObjectMeta, nil), Spec: o.Spec}, nil
	case *corev1.Namespace:
		return &corev1.Namespace{ObjectMeta: meta(o.ObjectMeta, o.Labels)}, nil
	}
	return o, nil
}

// explainBatch bounds the pod reads of the explanation per reconcile tick (two a check).
const explainBatch = 10

// explain evaluates every failing check's path against the policy index and sets its
// Reachable reason and message (policy.go): its pods are read when the check starts
// failing and again after each placement; the evaluation runs again when the index or
// the path changes. Nothing is explained until the index has its initial state: a policy
// not yet seen could admit what the others deny.
func (c *Controller) explain(ctx context.Context) {
	if c.policies == nil || c.policiesSynced == nil || !c.policiesSynced() {
		return
	}
	results, ok := c.readPaths(ctx, c.pendingPathReads())
	if !ok {
		return
	}
	gen := c.policies.Generation()
	now := c.d.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyPathReads(results, now)
	c.evaluatePaths(gen)
}

// pathRead is one check whose path's pods are to be read.
type pathRead struct {
	key     checkKey
	vantage string
	place   placement
	target  *podRef // a pod target
	service *podRef // a Service target (its namespace and name)
	svcPort int32
	probe   v1alpha1.ProbeType
}

// pathGot is what a pathRead read.
type pathGot struct {
	pathRead
	vantagePod, targetPod *corev1.Pod
	svc                   *corev1.Service
	backends              []corev1.Pod
	err                   error
}

// pendingPathReads lists the failing checks whose path is not read for their current
// placement, at most explainBatch.
func (c *Controller) pendingPathReads() []pathRead {
	var reads []pathRead
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cs := range c.book.checks {
		if !cs.place.accepted || cs.st.Reachable.Status != checkstatus.ConditionFalse {
			continue
		}
		v := vantagePod(cs)
		if v == "" {
			continue
		}
		if !cs.policy.pathRead || cs.policy.readFor != v || cs.policy.readAt.Before(cs.placeAt) {
			if len(reads) < explainBatch {
				r := pathRead{key: cs.key, vantage: v, place: cs.place, target: targetPodOf(cs), probe: cs.spec.probe}
				if t := cs.spec.target.Service; t != nil && cs.place.targetKind == "Service" {
					r.service, r.svcPort = &podRef{namespace: t.Namespace, name: t.Name}, t.Port
					if r.service.namespace == "" {
						r.service.namespace = cs.key.namespace
					}
				}
				reads = append(reads, r)
			}
		}
	}
	return reads
}

// readPaths reads the pods (and Service endpoints) of each path from the API server's
// cache; false when ctx ended.
func (c *Controller) readPaths(ctx context.Context, reads []pathRead) ([]pathGot, bool) {
	results := make([]pathGot, 0, len(reads))
	for _, r := range reads {
		if ctx.Err() != nil {
			return nil, false
		}
		g := pathGot{pathRead: r}
		ns, name, _ := strings.Cut(r.vantage, "/")
		g.vantagePod, g.err = c.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
		if g.err == nil && r.target != nil {
			g.targetPod, g.err = c.kube.CoreV1().Pods(r.target.namespace).Get(ctx, r.target.name, metav1.GetOptions{ResourceVersion: "0"})
		}
		if g.err == nil && r.service != nil {
			g.svc, g.backends, g.err = c.serviceEndpoints(ctx, r.service)
		}
		results = append(results, g)
	}
	return results, true
}

// applyPathReads records each read path (caller holds mu).
func (c *Controller) applyPathReads(results []pathGot, now time.Time) {
	for _, g := range results {
		cs, ok := c.book.checks[g.key]
		if !ok {
			continue
		}
		ps := &cs.policy
		ps.pathRead, ps.readFor, ps.readAt, ps.known = true, g.vantage, now, false
		if g.err != nil {
			ps.valid, ps.why = false, "a pod of the path could not be read: "+shortErr(g.err)
			continue
		}
		if g.place.mode != v1alpha1.VantageSidecar && g.vantagePod.Spec.NodeName != g.place.node {
			// The reporter named a pod that is not on the check's node: not the path the
			// probe takes (only the gateway's reads decide what is evaluated).
			ps.valid, ps.why = false, "the reporting pod "+g.vantage+" is not on node "+g.place.node
			continue
		}
		if g.service != nil {
			ps.paths, ps.why = policyServicePaths(g.probe, g.svcPort, g.svc, g.vantagePod, g.backends)
		} else {
			var p netpolicy.Path
			p, ps.why = policyPath(g.place, g.probe, g.vantagePod, g.targetPod)
			ps.paths = []netpolicy.Path{p}
		}
		ps.valid = ps.why == ""
	}
}

// evaluatePaths evaluates each failing check's read path whose evaluation is older than
// the index's generation gen, and sets its Reachable reason (caller holds mu).
func (c *Controller) evaluatePaths(gen uint64) {
	for _, cs := range c.book.checks {
		ps := &cs.policy
		if !cs.place.accepted || cs.st.Reachable.Status != checkstatus.ConditionFalse || !ps.pathRead {
			continue
		}
		if ps.known && ps.generation == gen {
			continue
		}
		ps.denial = ""
		if ps.valid {
			ds := make([]netpolicy.Decision, 0, len(ps.paths))
			for _, p := range ps.paths {
				ds = append(ds, c.policies.Evaluate(p))
			}
			if d := netpolicy.All(ds...); d.Verdict == netpolicy.Denied {
				ps.denial = d.Message()
				switch n := len(ps.paths); {
				case cs.place.targetKind != "Service":
				case n == 1:
					ps.denial += " for the Service's one endpoint"
				default:
					ps.denial += fmt.Sprintf(" for each of the Service's %d endpoints", n)
				}
			}
		}
		ps.known, ps.generation = true, gen
		explainReachable(cs, cs.st.Reachable)
	}
}

type podRef struct{ namespace, name string }

// serviceEndpoints reads a Service target and the Running pods its selector selects (from
// the API server's cache), at most maxServiceEndpoints of them.
func (c *Controller) serviceEndpoints(ctx context.Context, r *podRef) (*corev1.Service, []corev1.Pod, error) {
	svc, err := c.kube.CoreV1().Services(r.namespace).Get(ctx, r.name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil || len(svc.Spec.Selector) == 0 {
		return svc, nil, err
	}
	list, err := c.kube.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String(), ResourceVersion: "0"})
	if err != nil {
		return nil, nil, err
	}
	var out []corev1.Pod
	for i := range list.Items {
		if isEndpoint(&list.Items[i]) && len(out) < maxServiceEndpoints {
			out = append(out, list.Items[i])
		}
	}
	return svc, out, nil
}

// targetPodOf is the pod a check targets by name, nil for other targets.
func targetPodOf(cs *checkState) *podRef {
	t := cs.spec.target.Pod
	if t == nil {
		return nil
	}
	ns := t.Namespace
	if ns == "" {
		ns = cs.key.namespace
	}
	return &podRef{namespace: ns, name: t.Name}
}

// PolicyIndexLen is the number of NetworkPolicies and namespaces the explanation holds
// (0, 0 without checks.explain_network_policy).
func (c *Controller) PolicyIndexLen() (policies, namespaces int) {
	if c.policies == nil {
		return 0, 0
	}
	return c.policies.Len()
}
