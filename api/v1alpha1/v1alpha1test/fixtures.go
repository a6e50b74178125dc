/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package v1alpha1test builds PodNetworkHealth objects for tests: a realistic object with
// every field set (Valid) and the largest object the API accepts (WorstCase).
package v1alpha1test

import (
	"fmt"
	"math"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// Epoch is the time the fixtures are built around (whole seconds, UTC: metav1.Time
// serialises with second precision, so fixtures round-trip exactly).
var Epoch = time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)

// At returns Epoch+d as a metav1.Time.
func At(d time.Duration) metav1.Time { return metav1.NewTime(Epoch.Add(d)) }

// AtPtr returns a pointer to At(d).
func AtPtr(d time.Duration) *metav1.Time { t := At(d); return &t }

// TypeMeta is the TypeMeta of a PodNetworkHealth.
var TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind}

// PodSpec is the spec of a Pod-target pair in one namespace.
func PodSpec(namespace, source, target string) v1alpha1.PodNetworkHealthSpec {
	return v1alpha1.PodNetworkHealthSpec{
		SourcePodRef: v1alpha1.PodReference{Namespace: namespace, Name: source, UID: uid(source)},
		TargetKind:   v1alpha1.TargetKindPod,
		TargetPodRef: &v1alpha1.PodReference{Namespace: namespace, Name: target, UID: uid(target)},
	}
}

// NodeSpec is the spec of a pair whose target is a node.
func NodeSpec(namespace, source, node string) v1alpha1.PodNetworkHealthSpec {
	return v1alpha1.PodNetworkHealthSpec{
		SourcePodRef:  v1alpha1.PodReference{Namespace: namespace, Name: source, UID: uid(source)},
		TargetKind:    v1alpha1.TargetKindNode,
		TargetNodeRef: &v1alpha1.NodeReference{Name: node, UID: uid(node)},
	}
}

// ExternalSpec is the spec of a pair whose target is an external address.
func ExternalSpec(namespace, source, address string) v1alpha1.PodNetworkHealthSpec {
	return v1alpha1.PodNetworkHealthSpec{
		SourcePodRef:   v1alpha1.PodReference{Namespace: namespace, Name: source, UID: uid(source)},
		TargetKind:     v1alpha1.TargetKindExternal,
		TargetEndpoint: &v1alpha1.EndpointReference{Address: address},
	}
}

// uid derives a stable, UUID-shaped UID from a name (fixtures only).
func uid(name string) types.UID {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return types.UID(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(h>>32), uint16(h>>16), uint16(h)&0xfff, uint16(h>>4)&0xfff, h&0xffffffffffff))
}

// Valid is a realistic PodNetworkHealth with every spec and status field set: agent-a
// reaches agent-b over all four probe types, after two past outages.
func Valid(namespace, name string) *v1alpha1.PodNetworkHealth {
	return &v1alpha1.PodNetworkHealth{
		TypeMeta: TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels:    map[string]string{"app.kubernetes.io/managed-by": "netpulse"},
		},
		Spec:   PodSpec(namespace, "agent-a", "agent-b"),
		Status: ValidStatus(),
	}
}

// ValidStatus is the status of Valid: every field set.
func ValidStatus() v1alpha1.PodNetworkHealthStatus {
	lat := func(p50, p90, p99, mx time.Duration) *v1alpha1.LatencySummary {
		return v1alpha1.NewLatencySummary(p50, p90, p99, mx)
	}
	return v1alpha1.PodNetworkHealthStatus{
		Reachability:     v1alpha1.Reachable,
		Latency:          lat(850*time.Microsecond, 1250*time.Microsecond, 4*time.Millisecond, 12500*time.Microsecond),
		LossRatio:        v1alpha1.RatioOf(3, 240),
		Window:           v1alpha1.DurationOf(5 * time.Minute),
		LastObservedTime: AtPtr(0),
		FreshUntil:       AtPtr(20 * time.Minute),
		ObservedFromNode: "node-a",
		ObserverCount:    1,
		Probes: []v1alpha1.ProbeResult{
			{Type: v1alpha1.ProbeTypeICMP, Sent: 60, Lost: 0, Latency: lat(420*time.Microsecond, 610*time.Microsecond, 980*time.Microsecond, 1100*time.Microsecond), LastSuccessTime: AtPtr(0)},
			{Type: v1alpha1.ProbeTypeTCP, Sent: 60, Lost: 1, Latency: lat(850*time.Microsecond, 1200*time.Microsecond, 3*time.Millisecond, 4*time.Millisecond), LastSuccessTime: AtPtr(-time.Second),
				LastFailure: &v1alpha1.ProbeFailure{Time: At(-3 * time.Minute), Reason: v1alpha1.FailureReasonTimeout, Message: "dial tcp 10.244.1.7:8080: i/o timeout after 1s"}},
			{Type: v1alpha1.ProbeTypeHTTP, Sent: 60, Lost: 2, Latency: lat(1500*time.Microsecond, 2500*time.Microsecond, 6*time.Millisecond, 12500*time.Microsecond), LastSuccessTime: AtPtr(-2 * time.Second),
				LastFailure: &v1alpha1.ProbeFailure{Time: At(-2 * time.Minute), Reason: v1alpha1.FailureReasonHTTPStatus, Message: "GET http://10.244.1.7:8080/healthz: 503 Service Unavailable"}},
			{Type: v1alpha1.ProbeTypeDNS, Sent: 60, Lost: 0, Latency: lat(300*time.Microsecond, 450*time.Microsecond, 700*time.Microsecond, 900*time.Microsecond), LastSuccessTime: AtPtr(-3 * time.Second),
				LastFailure: &v1alpha1.ProbeFailure{Time: At(-50 * time.Minute), Reason: v1alpha1.FailureReasonDNSError, Message: "lookup agent-b.netpulse.svc: i/o timeout"}},
		},
		Outages: []v1alpha1.Outage{
			{Start: At(-50 * time.Minute), End: AtPtr(-48 * time.Minute), Reason: v1alpha1.FailureReasonTimeout, Message: "all probes failed for 2m0s (icmp, tcp, http, dns: Timeout)"},
			{Start: At(-6 * time.Hour), End: AtPtr(-6*time.Hour + 45*time.Second), Reason: v1alpha1.FailureReasonConnectionRefused, Message: "tcp and http refused, icmp timed out for 45s"},
		},
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: At(-48 * time.Minute), Reason: v1alpha1.ReasonProbesSucceeded, Message: "237 of 240 probes succeeded in the last 5m"},
			{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, ObservedGeneration: 1, LastTransitionTime: At(-48 * time.Minute), Reason: v1alpha1.ReasonWithinThresholds, Message: "every probed address family answers, without judged packet loss or latency"},
		},
	}
}

// Limits of the strings the schema bounds (characters).
const (
	maxNamespace = 63
	maxName      = 253
	maxUID       = 36
)

// WorstCase is the largest PodNetworkHealth the API accepts, apart from labels and
// annotations a writer adds: every list at its maxItems, every string at its maxLength (in
// ASCII, one byte per character), every integer at its widest, the largest target variant
// (Pod), an owner reference to the source pod and a metadata.name of 253 characters.
// namespace should be 63 characters long for a true worst case (see LongNamespace).
// sourceUID is the owner pod's UID, 36 characters (the real pod's UID when creating on a
// server; SourcePodName names that pod).
func WorstCase(namespace string, sourceUID types.UID) *v1alpha1.PodNetworkHealth {
	name := LongName("pnh")
	src := SourcePodName
	dst := LongName("dst")
	dur := v1alpha1.Duration("12345.123456789h12345.123456789m") // 32 characters
	lat := &v1alpha1.LatencySummary{P50: dur, P90: dur, P99: dur, Max: dur}
	msg := func(prefix string) string { return fill(prefix, v1alpha1.MaxMessageLength, 'm') }
	reason := func(prefix string) string { return fill(prefix, v1alpha1.MaxReasonLength, 'R') }

	status := v1alpha1.PodNetworkHealthStatus{
		Reachability:     v1alpha1.Unreachable, // the longest enum value
		Latency:          lat,
		LossRatio:        "0.123456",
		Window:           dur,
		LastObservedTime: AtPtr(0),
		FreshUntil:       AtPtr(20 * time.Minute),
		ObservedFromNode: LongName("node"),
		ObserverCount:    math.MaxInt32,
	}
	for _, pt := range []v1alpha1.ProbeType{v1alpha1.ProbeTypeICMP, v1alpha1.ProbeTypeHTTP, v1alpha1.ProbeTypeTCP, v1alpha1.ProbeTypeDNS} {
		status.Probes = append(status.Probes, v1alpha1.ProbeResult{
			Type: pt, Sent: math.MaxInt32, Lost: math.MaxInt32, Latency: lat, LastSuccessTime: AtPtr(-time.Second),
			LastFailure: &v1alpha1.ProbeFailure{Time: At(0), Reason: reason("Failure" + string(pt)), Message: msg(string(pt))},
		})
	}
	for i := 0; i < v1alpha1.MaxOutages; i++ {
		start := -time.Duration(i+1) * time.Hour
		status.Outages = append(status.Outages, v1alpha1.Outage{
			Start: At(start), End: AtPtr(start + 10*time.Minute),
			Reason: reason(fmt.Sprintf("Outage%d", i)), Message: msg(fmt.Sprintf("outage %d", i)),
			Flaps: math.MaxInt32,
		})
	}
	for i := 0; i < v1alpha1.MaxConditions; i++ {
		status.Conditions = append(status.Conditions, metav1.Condition{
			Type:               fill(fmt.Sprintf("Condition%d", i), 64, 'C'),
			Status:             metav1.ConditionUnknown, // the longest status
			ObservedGeneration: math.MaxInt64,
			LastTransitionTime: At(-time.Minute),
			Reason:             reason(fmt.Sprintf("Reason%d", i)),
			Message:            msg(fmt.Sprintf("condition %d", i)),
		})
	}
	return &v1alpha1.PodNetworkHealth{
		TypeMeta: TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: src, UID: sourceUID,
				Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
		},
		Spec: v1alpha1.PodNetworkHealthSpec{
			SourcePodRef: v1alpha1.PodReference{Namespace: namespace, Name: src, UID: sourceUID},
			TargetKind:   v1alpha1.TargetKindPod, // the largest variant: targetPodRef outweighs a longer kind name
			TargetPodRef: &v1alpha1.PodReference{Namespace: namespace, Name: dst, UID: types.UID(fill("", maxUID, 'f'))},
		},
		Status: status,
	}
}

// SourcePodName is the name of WorstCase's source pod (and owner).
var SourcePodName = LongName("src")

// LongNamespace is a namespace name of the maximum length (63) starting with prefix.
func LongNamespace(prefix string) string { return fill(prefix, maxNamespace, 'n') }

// LongName is an object name of the maximum length (253) starting with prefix.
func LongName(prefix string) string { return fill(prefix, maxName, 'x') }

// fill pads prefix with c to exactly n characters (truncating a longer prefix).
func fill(prefix string, n int, c byte) string {
	if len(prefix) >= n {
		return prefix[:n]
	}
	return prefix + strings.Repeat(string(c), n-len(prefix))
}

func ptr[T any](v T) *T { return &v }
