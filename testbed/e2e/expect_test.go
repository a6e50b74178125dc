// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// pair is an ordered pair of nodes: the agent on from probes the agent on to.
type pair struct{ from, to string }

func (p pair) String() string { return p.from + "→" + p.to }

// pathExpect is what the PodNetworkHealth object of a path (source pod → target pod) must
// read.
type pathExpect struct {
	reachable bool
	// stable: the object must never read the opposite verdict while the expectation is
	// awaited (one that does fails the scenario at once); otherwise the latest status must
	// agree.
	stable bool
	// ongoingOutage: the newest outage has a start at or after the expectation's start and
	// no end. endedOutage: the newest outage started at or after the expectation's
	// outageSince and has ended.
	ongoingOutage, endedOutage bool
	// minP50 / maxP50 bound status.latency.p50 (0 = unchecked); minMax bounds latency.max
	// from below.
	minP50, maxP50 time.Duration
	// zeroLoss: status.lossRatio must read "0".
	zeroLoss bool
	// observerUnhealthy: the path's observer is on a node the quorum found cut off, so
	// the exporter attributes its failures to the observer: reachability Unknown, condition
	// Reachable=Unknown with reason ObserverUnhealthy.
	observerUnhealthy bool
	// observerSilent: the path's observer stopped reporting (its pod stays): reachability
	// Unknown, condition Reachable=Unknown with reason ObserverSilent.
	observerSilent bool
	// disruption: the path's target was reported going away or down (a drain, ...) before
	// it failed: reachability Unknown, condition Reachable=Unknown with this reason.
	disruption string
	// mustExist: the object must exist at every check (a missing one fails at once).
	mustExist bool
}

// lossExpect bounds status.lossRatio of every path towards a node.
type lossExpect struct{ min, max float64 }

// eventExpect asks for an Event with reason on the object of path, newer than the
// expectation's start.
type eventExpect struct {
	path   pair
	reason string
}

// expectation is the state a scenario expects, in terms of pods and paths only, so every
// checker can judge it.
type expectation struct {
	name string
	// start is when the fault was injected (detection times count from here).
	start time.Time
	// outageSince is the earliest start an outage of this expectation may have (ended
	// outages of a recovery started with the fault, before the expectation's start).
	outageSince time.Time
	// agents are the pods the expectation is about (the cluster's current ones).
	agents []simcluster.Agent
	paths  map[pair]pathExpect
	loss   map[string]lossExpect // by target node
	// nodeProblem is the expected status of the netpulse.io/PodNetworkProblem condition by
	// node: true = True, false = False. Nodes not listed must not be True (when
	// nodeProblemOthers is set).
	nodeProblem       map[string]bool
	nodeProblemOthers bool
	events            []eventExpect
	// gone lists deleted source pods whose objects must have been garbage-collected;
	// goneTargets deleted target pods whose objects must have been pruned (target_ttl).
	gone, goneTargets []simcluster.Agent

	// maxObjects bounds the number of PodNetworkHealth objects at every check (0 =
	// unchecked); more fails the scenario at once (apiChecker).
	maxObjects int

	// Judged from the gateway's own telemetry (gatewayChecker):
	// targetReachable is the per-target verdict gauge by target node (every address
	// family): true = 1, false = 0. With targetsOthers, every target not listed must read
	// 1 at every check (a 0 fails the scenario at once).
	targetReachable map[string]bool
	targetsOthers   bool
	// observerReporting is the per-observer gauge by observer node: true = 1, false = 0.
	observerReporting map[string]bool
}

func (e *env) expect(name string, start time.Time) *expectation {
	return &expectation{name: name, start: start, outageSince: start, agents: e.cl.Agents(),
		paths: map[pair]pathExpect{}, loss: map[string]lossExpect{}, nodeProblem: map[string]bool{},
		targetReachable: map[string]bool{}, observerReporting: map[string]bool{}}
}

// all sets pe on every ordered pair of agents for which keep is true (nil: every pair).
func (x *expectation) all(pe pathExpect, keep func(p pair) bool) *expectation {
	for _, a := range x.agents {
		for _, b := range x.agents {
			p := pair{a.Node, b.Node}
			if a.Node != b.Node && (keep == nil || keep(p)) {
				x.paths[p] = pe
			}
		}
	}
	return x
}

func involves(node string) func(pair) bool {
	return func(p pair) bool { return p.from == node || p.to == node }
}

func not(f func(pair) bool) func(pair) bool { return func(p pair) bool { return !f(p) } }

func towards(node string) func(pair) bool { return func(p pair) bool { return p.to == node } }

func observedFrom(node string) func(pair) bool { return func(p pair) bool { return p.from == node } }

func (x *expectation) agent(node string) (simcluster.Agent, bool) {
	for _, a := range x.agents {
		if a.Node == node {
			return a, true
		}
	}
	return simcluster.Agent{}, false
}

// checker judges an expectation from one vantage point.
type checker interface {
	name() string
	// check reports whether exp holds now; progress says what is still missing. A
	// non-nil error means it cannot hold any more (a stable path flipped): the scenario
	// fails at once.
	check(exp *expectation) (ok bool, progress string, err error)
}

// await polls every checker until each sees exp hold, and logs and returns how long after
// exp.start each did: `E2E <verb> <name>: 3.2s (api)`.
func (e *env) await(t *testing.T, verb string, exp *expectation, timeout time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	done := map[string]time.Duration{}
	progress := map[string]string{}
	checkers := relevantCheckers(e.checkers, exp)
	for {
		for _, c := range checkers {
			if _, ok := done[c.name()]; ok {
				continue
			}
			ok, why, err := c.check(exp)
			if err != nil {
				t.Fatalf("%s [%s]: %v", exp.name, c.name(), err)
			}
			if ok {
				d := time.Since(exp.start)
				done[c.name()] = d
				label := verb
				if exp.name != "" {
					label += " " + exp.name
				}
				t.Logf("E2E %s: %.1fs (%s)", label, d.Seconds(), c.name())
			} else {
				progress[c.name()] = why
			}
		}
		if len(done) == len(checkers) {
			return slices.Max(slices.Collect(maps.Values(done)))
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, c := range checkers {
				if _, ok := done[c.name()]; !ok {
					fmt.Fprintf(&b, "\n  [%s] %s", c.name(), progress[c.name()])
				}
			}
			t.Fatalf("%s: not observed within %v:%s", exp.name, timeout, b.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// apiChecker judges expectations from what the gateway wrote to the Kubernetes API:
// PodNetworkHealth objects (typed client), the nodes' netpulse.io/PodNetworkProblem
// condition and the Events on the objects. It reads with admin credentials.
type apiChecker struct {
	pnh  versioned.Interface
	core kubernetes.Interface

	mu         sync.Mutex
	maxObjects int // the most objects any check saw since resetMaxObjects
}

func (a *apiChecker) noteObjects(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.maxObjects = max(a.maxObjects, n)
}

// resetMaxObjects returns the most objects seen since the last call and starts again.
func (a *apiChecker) resetMaxObjects() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.maxObjects
	a.maxObjects = 0
	return n
}

func (a *apiChecker) name() string { return "api" }

// relevant: the expectation says something about objects, nodes or Events.
func (a *apiChecker) relevant(exp *expectation) bool {
	return len(exp.paths) > 0 || len(exp.loss) > 0 || len(exp.nodeProblem) > 0 || exp.nodeProblemOthers ||
		len(exp.events) > 0 || len(exp.gone) > 0 || len(exp.goneTargets) > 0 || exp.maxObjects > 0
}

// nodeProblemType is the node condition the shipped gateway.yaml enables (the exporter's
// default type).
const nodeProblemType = corev1.NodeConditionType("netpulse.io/PodNetworkProblem")

// objectName is the name the exporter gives the object of src → dst.
func objectName(src, dst simcluster.Agent) string {
	return v1alpha1.ObjectName(src.Namespace, src.Pod, string(v1alpha1.TargetKindPod), dst.Namespace, dst.Pod, "")
}

func (a *apiChecker) objects(ctx context.Context) (map[string]*v1alpha1.PodNetworkHealth, error) {
	list, err := a.pnh.NetpulseV1alpha1().PodNetworkHealths(simcluster.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*v1alpha1.PodNetworkHealth, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

func (a *apiChecker) check(exp *expectation) (bool, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	objs, err := a.objects(ctx)
	if err != nil {
		return false, fmt.Sprintf("list podnetworkhealths: %v", err), nil
	}
	if exp.maxObjects > 0 && len(objs) > exp.maxObjects {
		return false, "", fmt.Errorf("%d PodNetworkHealth objects, more than the bound %d", len(objs), exp.maxObjects)
	}
	a.noteObjects(len(objs))
	var pending []string
	paths := slices.SortedFunc(maps.Keys(exp.paths), func(a, b pair) int { return strings.Compare(a.String(), b.String()) })
	for _, p := range paths {
		pe := exp.paths[p]
		src, ok1 := exp.agent(p.from)
		dst, ok2 := exp.agent(p.to)
		if !ok1 || !ok2 {
			return false, "", fmt.Errorf("path %s: no agent pod on one of its nodes", p)
		}
		o := objs[objectName(src, dst)]
		why, err := judgeObject(o, src, dst, exp, pe)
		if err != nil {
			return false, "", fmt.Errorf("%s (%s): %w", p, objectName(src, dst), err)
		}
		if why == "" {
			if le, ok := exp.loss[p.to]; ok && p.from != p.to {
				why = judgeLoss(o, le)
			}
		}
		if why != "" {
			pending = append(pending, p.String()+": "+why)
		}
	}
	for _, g := range exp.gone {
		for _, o := range objs {
			if o.Spec.SourcePodRef.Name == g.Pod || o.Spec.SourcePodRef.UID == types.UID(g.UID) {
				pending = append(pending, fmt.Sprintf("%s (source %s, deleted) still exists", o.Name, g.Pod))
			}
		}
	}
	for _, g := range exp.goneTargets {
		for _, o := range objs {
			if r := o.Spec.TargetPodRef; r != nil && (r.Name == g.Pod || r.UID == types.UID(g.UID)) {
				pending = append(pending, fmt.Sprintf("%s (target %s, deleted) still exists", o.Name, g.Pod))
			}
		}
	}
	if len(exp.nodeProblem) > 0 || exp.nodeProblemOthers {
		nodes, err := a.core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Sprintf("list nodes: %v", err), nil
		}
		for _, n := range nodes.Items {
			st := nodeCondition(&n)
			want, listed := exp.nodeProblem[n.Name]
			switch {
			case listed && want && st != corev1.ConditionTrue:
				pending = append(pending, fmt.Sprintf("node %s: %s=%q, want True", n.Name, nodeProblemType, st))
			case listed && !want && st != corev1.ConditionFalse && st != "":
				// False once cleared; none on a node never marked (no problem is no news).
				pending = append(pending, fmt.Sprintf("node %s: %s=%q, want False or none", n.Name, nodeProblemType, st))
			case !listed && exp.nodeProblemOthers && st == corev1.ConditionTrue:
				return false, "", fmt.Errorf("node %s: %s is True, but only %v may be", n.Name, nodeProblemType, slices.Collect(maps.Keys(exp.nodeProblem)))
			}
		}
	}
	for _, ev := range exp.events {
		src, _ := exp.agent(ev.path.from)
		dst, _ := exp.agent(ev.path.to)
		name := objectName(src, dst)
		if !a.hasEvent(ctx, name, ev.reason, exp.start) {
			pending = append(pending, fmt.Sprintf("no Event %s on %s since %s", ev.reason, name, exp.start.Format("15:04:05")))
		}
	}
	if len(pending) > 0 {
		if len(pending) > 6 {
			pending = append(pending[:6], fmt.Sprintf("... and %d more", len(pending)-6))
		}
		return false, strings.Join(pending, "; "), nil
	}
	return true, "", nil
}

func (a *apiChecker) hasEvent(ctx context.Context, object, reason string, since time.Time) bool {
	return a.hasEventIn(ctx, simcluster.Namespace, object, reason, since)
}

// hasEventIn is hasEvent for an object in namespace ns.
func (a *apiChecker) hasEventIn(ctx context.Context, ns, object, reason string, since time.Time) bool {
	evs, err := a.core.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + object + ",reason=" + reason,
	})
	if err != nil {
		return false
	}
	for _, ev := range evs.Items {
		last := ev.LastTimestamp.Time
		if ev.EventTime.After(last) {
			last = ev.EventTime.Time
		}
		if ev.Series != nil && ev.Series.LastObservedTime.After(last) {
			last = ev.Series.LastObservedTime.Time
		}
		// Event times have second (LastTimestamp) or microsecond precision.
		if !last.Before(since.Truncate(time.Second)) {
			return true
		}
	}
	return false
}

func nodeCondition(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == nodeProblemType {
			return c.Status
		}
	}
	return ""
}

// judgeObject returns "" when o meets pe, what is missing otherwise, and an error when it
// can no longer be met (a stable path flipped, an object owned by the wrong pod).
func judgeObject(o *v1alpha1.PodNetworkHealth, src, dst simcluster.Agent, exp *expectation, pe pathExpect) (string, error) {
	if o == nil {
		if pe.mustExist {
			return "", fmt.Errorf("the object is gone")
		}
		return "no object yet", nil
	}
	if o.Spec.SourcePodRef.Name != src.Pod || o.Spec.TargetPodRef == nil || o.Spec.TargetPodRef.Name != dst.Pod {
		return "", fmt.Errorf("spec names %s → %v, want %s → %s", o.Spec.SourcePodRef.Name, o.Spec.TargetPodRef, src.Pod, dst.Pod)
	}
	owned := false
	for _, ref := range o.OwnerReferences {
		if ref.Kind == "Pod" && ref.Name == src.Pod && string(ref.UID) == src.UID {
			owned = true
		}
	}
	if !owned {
		return "", fmt.Errorf("not owned by the source pod %s (uid %s): %+v", src.Pod, src.UID, o.OwnerReferences)
	}
	st := o.Status
	want := v1alpha1.Unreachable
	if pe.reachable {
		want = v1alpha1.Reachable
	}
	reason := ""
	switch {
	case pe.observerUnhealthy:
		want, reason = v1alpha1.ReachabilityUnknown, v1alpha1.ReasonObserverUnhealthy
	case pe.observerSilent:
		want, reason = v1alpha1.ReachabilityUnknown, v1alpha1.ReasonObserverSilent
	case pe.disruption != "":
		want, reason = v1alpha1.ReachabilityUnknown, pe.disruption
	}
	if st.Reachability != want {
		if pe.stable && st.Reachability != "" && st.Reachability != v1alpha1.ReachabilityUnknown {
			return "", fmt.Errorf("reads %s, want %s throughout", st.Reachability, want)
		}
		return fmt.Sprintf("%q, want %s", st.Reachability, want), nil
	}
	if !hasCondition(o, want, reason) {
		return fmt.Sprintf("condition Reachable does not agree with %s %s", want, reason), nil
	}
	if pe.ongoingOutage || pe.endedOutage {
		if len(st.Outages) == 0 {
			return "no outage recorded", nil
		}
		out := st.Outages[0]
		if out.Start.Time.Before(exp.outageSince.Add(-time.Second)) {
			return fmt.Sprintf("newest outage started %s, before %s", out.Start.Format(time.RFC3339), exp.outageSince.Format(time.RFC3339)), nil
		}
		if pe.ongoingOutage && out.End != nil {
			return "newest outage has ended", nil
		}
		if pe.endedOutage && (out.End == nil || out.End.Before(&out.Start)) {
			return "newest outage has no end", nil
		}
	}
	if pe.minP50 > 0 || pe.maxP50 > 0 || pe.reachable {
		if st.Latency == nil {
			return "no latency", nil
		}
		p50, err := st.Latency.P50.Duration()
		if err != nil {
			return "", fmt.Errorf("latency.p50 %q: %w", st.Latency.P50, err)
		}
		if pe.minP50 > 0 && p50 < pe.minP50 {
			return fmt.Sprintf("p50 %v < %v", p50, pe.minP50), nil
		}
		if pe.maxP50 > 0 && p50 > pe.maxP50 {
			return fmt.Sprintf("p50 %v > %v", p50, pe.maxP50), nil
		}
	}
	if pe.zeroLoss && st.LossRatio != "0" {
		return fmt.Sprintf("lossRatio %q, want \"0\"", st.LossRatio), nil
	}
	return "", nil
}

func judgeLoss(o *v1alpha1.PodNetworkHealth, le lossExpect) string {
	r, err := o.Status.LossRatio.Float64()
	if err != nil {
		return fmt.Sprintf("lossRatio %q: %v", o.Status.LossRatio, err)
	}
	if r < le.min || r > le.max {
		return fmt.Sprintf("lossRatio %s, want %.2f-%.2f", o.Status.LossRatio, le.min, le.max)
	}
	return ""
}

// hasCondition: the Reachable condition agrees with r (and, for Unknown, has reason).
func hasCondition(o *v1alpha1.PodNetworkHealth, r v1alpha1.Reachability, reason string) bool {
	want := metav1.ConditionTrue
	switch r {
	case v1alpha1.Unreachable:
		want = metav1.ConditionFalse
	case v1alpha1.ReachabilityUnknown:
		want = metav1.ConditionUnknown
	}
	for _, c := range o.Status.Conditions {
		if c.Type == v1alpha1.ConditionReachable {
			return c.Status == want && (r != v1alpha1.ReachabilityUnknown || c.Reason == reason)
		}
	}
	return false
}

// relevantCheckers leaves out the checkers that have nothing of exp to judge.
func relevantCheckers(all []checker, exp *expectation) []checker {
	var out []checker
	for _, c := range all {
		if r, ok := c.(interface{ relevant(*expectation) bool }); ok && !r.relevant(exp) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// hold checks for d that exp keeps holding from every vantage point (it must hold at the
// start): a check that fails or errs fails the scenario.
func (e *env) hold(t *testing.T, verb string, exp *expectation, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	checks := 0
	for {
		for _, c := range relevantCheckers(e.checkers, exp) {
			ok, why, err := c.check(exp)
			if err != nil {
				t.Fatalf("%s %s [%s]: %v", verb, exp.name, c.name(), err)
			}
			if !ok {
				t.Fatalf("%s %s [%s]: no longer holds after %.1fs: %s", verb, exp.name, c.name(), time.Since(end.Add(-d)).Seconds(), why)
			}
		}
		checks++
		if time.Now().After(end) {
			t.Logf("E2E %s %s: held %v (%d checks)", verb, exp.name, d, checks)
			return
		}
		time.Sleep(time.Second)
	}
}
