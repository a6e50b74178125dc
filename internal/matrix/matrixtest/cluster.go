// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package matrixtest builds what the pod_network_health exporter would have written for a
// cluster — Nodes with zones and the netpulse condition, one agent Pod per node, and the
// PodNetworkHealth objects of each agent's stable pairs — optionally with one node
// partitioned. The matrix unit tests, the 1,000-node benchmark and the web view's and the
// plugin's tests against a real API server use it.
package matrixtest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// Options of a fixture cluster. Zero values take the defaults.
type Options struct {
	// Nodes (default 4) named node-1 .. node-N, spread round-robin over Zones (default 1)
	// named zone-a, zone-b, ...
	Nodes, Zones int
	// Stable peers per agent (M, default 1): agent i observes agents i+1 .. i+M on a ring.
	// With Stable >= Nodes-1 every pair has an object (the full mesh of small clusters).
	Stable int
	// Scatter orders the ring by a hash of the agents' names, as the receiver's hash ring
	// does, so stable pairs cross zones at random (otherwise node i's peer is node i+1).
	Scatter bool
	// Namespace of the agents and the objects (default netpulse).
	Namespace string
	// Partitioned (a node name, optional): every pair towards its agent is Unreachable
	// with an ongoing outage since Now-PartitionedFor (default 2m), two more observers
	// (rotating pairs that failed) report it too, the pairs it observes read Unknown
	// (ObserverUnhealthy) and its condition is True (UnreachableFromPeers).
	Partitioned      string
	PartitionedFor   time.Duration
	Now              time.Time
	ConditionType    string
	NoNodeConditions bool
}

// Fixture is a cluster's objects.
type Fixture struct {
	Nodes   []*corev1.Node
	Pods    []*corev1.Pod
	Objects []*v1alpha1.PodNetworkHealth
}

// Condition reasons and messages the exporter writes (quorum's reasons).
const (
	ReasonUnreachable = "UnreachableFromPeers"
	ReasonReachable   = "ReachableFromPeers"
)

// NodeName, ZoneName and AgentName name the fixture's i-th (1-based) node, zone, agent.
func NodeName(i int) string  { return fmt.Sprintf("node-%d", i) }
func ZoneName(i int) string  { return "zone-" + string(rune('a'+i%26)) + suffix(i/26) }
func AgentName(i int) string { return fmt.Sprintf("netpulse-agent-%d", i) }

func suffix(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

// UID is the fixture's UID of a name.
func UID(name string) types.UID {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return types.UID(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(h>>32), uint16(h>>16), uint16(h)&0xfff, uint16(h>>4)&0xfff, h&0xffffffffffff))
}

// Cluster builds the fixture.
func Cluster(o Options) Fixture {
	if o.Nodes == 0 {
		o.Nodes = 4
	}
	if o.Zones == 0 {
		o.Zones = 1
	}
	if o.Stable == 0 {
		o.Stable = 1
	}
	o.Stable = min(o.Stable, o.Nodes-1)
	if o.Namespace == "" {
		o.Namespace = "netpulse"
	}
	if o.PartitionedFor == 0 {
		o.PartitionedFor = 2 * time.Minute
	}
	if o.Now.IsZero() {
		o.Now = time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)
	}
	if o.ConditionType == "" {
		o.ConditionType = "netpulse.io/PodNetworkProblem"
	}
	now := metav1.NewTime(o.Now.Truncate(time.Second))
	since := metav1.NewTime(now.Add(-o.PartitionedFor))
	var f Fixture
	part := 0
	for i := 1; i <= o.Nodes; i++ {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName(i), UID: UID(NodeName(i)),
			Labels: map[string]string{corev1.LabelTopologyZone: ZoneName((i - 1) % o.Zones), corev1.LabelHostname: NodeName(i)}}}
		if NodeName(i) == o.Partitioned {
			part = i
		}
		if !o.NoNodeConditions {
			c := corev1.NodeCondition{Type: corev1.NodeConditionType(o.ConditionType), Status: corev1.ConditionFalse,
				Reason: ReasonReachable, Message: "pods on this node are reachable from their observers on other nodes",
				LastHeartbeatTime: now, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
			if NodeName(i) == o.Partitioned {
				c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionTrue, ReasonUnreachable, metav1.NewTime(since.Add(5*time.Second))
				c.Message = "pods on this node are unreachable from healthy observers on other nodes (a quorum of them, and more than still reach it)"
			}
			n.Status.Conditions = []corev1.NodeCondition{c}
		}
		f.Nodes = append(f.Nodes, n)
		f.Pods = append(f.Pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: AgentName(i), UID: UID(AgentName(i)),
				Labels: map[string]string{"app.kubernetes.io/name": "netpulse-agent", "app.kubernetes.io/part-of": "netpulse", "app.kubernetes.io/component": "agent"}},
			Spec: corev1.PodSpec{NodeName: NodeName(i), Containers: []corev1.Container{{Name: "agent", Image: "netpulse"}}},
		})
	}
	ring := func(i int) int { return (i-1+o.Nodes)%o.Nodes + 1 }
	// order[p] is the agent at ring position p (1-based); pos is its inverse.
	order, pos := make([]int, o.Nodes+1), make([]int, o.Nodes+1)
	for i := range order {
		order[i] = i
	}
	if o.Scatter {
		slices.SortFunc(order[1:], func(a, b int) int { return strings.Compare(string(UID(AgentName(a))), string(UID(AgentName(b)))) })
	}
	for p := 1; p <= o.Nodes; p++ {
		pos[order[p]] = p
	}
	for i := 1; i <= o.Nodes; i++ {
		for k := 1; k <= o.Stable; k++ {
			f.Objects = append(f.Objects, pair(o, i, order[ring(pos[i]+k)], part, now, since))
		}
	}
	if part > 0 {
		// Two rotating observers whose pairs towards the partitioned node failed twice.
		for _, d := range []int{-2, -3} {
			i := ring(part + d)
			if i == part {
				continue
			}
			dup := false
			for _, obj := range f.Objects {
				if obj.Spec.SourcePodRef.Name == AgentName(i) && obj.Spec.TargetPodRef.Name == AgentName(part) {
					dup = true
				}
			}
			if !dup {
				f.Objects = append(f.Objects, pair(o, i, part, part, now, since))
			}
		}
	}
	return f
}

func pair(o Options, i, j, part int, now, since metav1.Time) *v1alpha1.PodNetworkHealth {
	src, dst := AgentName(i), AgentName(j)
	obj := &v1alpha1.PodNetworkHealth{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: src + "-to-" + dst,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "netpulse", "netpulse.io/source-pod": src}},
		Spec: v1alpha1.PodNetworkHealthSpec{
			SourcePodRef: v1alpha1.PodReference{Namespace: o.Namespace, Name: src, UID: UID(src)},
			TargetKind:   v1alpha1.TargetKindPod,
			TargetPodRef: &v1alpha1.PodReference{Namespace: o.Namespace, Name: dst, UID: UID(dst)},
		},
	}
	// Deterministic, varied figures: p50 300us .. 1.2ms, every 7th pair with some loss.
	p50 := time.Duration(300+(i*37+j*11)%900) * time.Microsecond
	lost := int32(0)
	if (i+j)%7 == 0 {
		lost = 3
	}
	st := &obj.Status
	st.Window = v1alpha1.DurationOf(5 * time.Minute)
	st.LastObservedTime = &now
	fresh := metav1.NewTime(now.Add(20 * time.Minute))
	st.FreshUntil = &fresh
	st.ObservedFromNode = NodeName(i)
	st.ObserverCount = 1
	cond := func(status metav1.ConditionStatus, reason, msg string, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionReachable, Status: status, Reason: reason, Message: msg, LastTransitionTime: at, ObservedGeneration: 1}
	}
	switch {
	case j == part:
		st.Reachability = v1alpha1.Unreachable
		st.LossRatio = "1"
		fail := &v1alpha1.ProbeFailure{Time: now, Reason: v1alpha1.FailureReasonTimeout, Message: fmt.Sprintf("no echo reply from %s within 500ms", dst)}
		st.Probes = []v1alpha1.ProbeResult{
			{Type: v1alpha1.ProbeTypeICMP, Sent: 120, Lost: 120, LastSuccessTime: &since, LastFailure: fail},
			{Type: v1alpha1.ProbeTypeTCP, Sent: 120, Lost: 120, LastSuccessTime: &since,
				LastFailure: &v1alpha1.ProbeFailure{Time: now, Reason: v1alpha1.FailureReasonTimeout, Message: "dial tcp: i/o timeout after 500ms"}},
		}
		end := metav1.NewTime(now.Add(-50 * time.Minute))
		st.Outages = []v1alpha1.Outage{
			{Start: since, Reason: v1alpha1.FailureReasonTimeout, Message: "all probes failed (icmp, tcp: Timeout)"},
			{Start: metav1.NewTime(end.Add(-40 * time.Second)), End: &end, Reason: v1alpha1.FailureReasonTimeout, Message: "all probes failed for 40s"},
		}
		st.Conditions = []metav1.Condition{cond(metav1.ConditionFalse, v1alpha1.ReasonProbesFailed, "240 of 240 probes failed in the last 5m", since)}
	case i == part:
		st.Reachability = v1alpha1.ReachabilityUnknown
		st.LossRatio = "1"
		st.Probes = []v1alpha1.ProbeResult{{Type: v1alpha1.ProbeTypeICMP, Sent: 120, Lost: 120, LastSuccessTime: &since,
			LastFailure: &v1alpha1.ProbeFailure{Time: now, Reason: v1alpha1.FailureReasonTimeout, Message: "no echo reply within 500ms"}}}
		st.Outages = []v1alpha1.Outage{{Start: since, Reason: v1alpha1.FailureReasonTimeout}}
		st.Conditions = []metav1.Condition{cond(metav1.ConditionUnknown, v1alpha1.ReasonObserverUnhealthy,
			"the failures are attributed to the observer: its node is cut off", since)}
	default:
		st.Reachability = v1alpha1.Reachable
		st.Latency = v1alpha1.NewLatencySummary(p50, p50*3/2, p50*4, p50*5)
		st.LossRatio = v1alpha1.RatioOf(int64(lost), 240)
		st.Probes = []v1alpha1.ProbeResult{
			{Type: v1alpha1.ProbeTypeICMP, Sent: 120, Lost: 0, Latency: v1alpha1.NewLatencySummary(p50*2/3, p50, p50*3, p50*4), LastSuccessTime: &now},
			{Type: v1alpha1.ProbeTypeTCP, Sent: 120, Lost: lost, Latency: st.Latency, LastSuccessTime: &now},
		}
		st.Conditions = []metav1.Condition{cond(metav1.ConditionTrue, v1alpha1.ReasonProbesSucceeded, "probes succeeded in the last 5m", metav1.NewTime(now.Add(-time.Hour)))}
	}
	return obj
}

// Degrade sets o's Degraded condition True with reason and message (as the exporter writes
// a gray verdict, PacketLoss or HighLatency, or MTUBlackHole, AddressFamilyUnreachable),
// changed at since; the Reachable verdict is left as it is.
func Degrade(o *v1alpha1.PodNetworkHealth, reason, message string, since time.Time) {
	c := metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(since), ObservedGeneration: 1}
	for i := range o.Status.Conditions {
		if o.Status.Conditions[i].Type == v1alpha1.ConditionDegraded {
			o.Status.Conditions[i] = c
			return
		}
	}
	o.Status.Conditions = append(o.Status.Conditions, c)
}

// Find is the fixture's object from agent i to agent j (1-based), nil when none.
func (f Fixture) Find(i, j int) *v1alpha1.PodNetworkHealth {
	for _, o := range f.Objects {
		if o.Spec.SourcePodRef.Name == AgentName(i) && o.Spec.TargetPodRef != nil && o.Spec.TargetPodRef.Name == AgentName(j) {
			return o
		}
	}
	return nil
}
