// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/contract"
)

func unreachableSummary(now time.Time) observation.Summary {
	return observation.Summary{
		Key: observation.PairKey{SourceNamespace: "ns", SourcePod: "a", SourceUID: "ua", TargetKind: observation.TargetPod,
			TargetNamespace: "ns", TargetName: "b", TargetUID: "ub"},
		Verdict:          observation.VerdictUnreachable,
		VerdictSince:     now.Add(-time.Minute),
		LastObserved:     now,
		ObservedFromNode: "node-a",
		Outages:          []observation.Outage{{Start: now.Add(-time.Minute), Reason: "Timeout", Message: "timeout"}},
	}
}

func TestStatusOfUnreachable(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := statusOf(unreachableSummary(now))
	require.Equal(t, v1alpha1.Unreachable, st.Reachability)
	require.Equal(t, metav1.ConditionFalse, st.Conditions[0].Status)
	require.Equal(t, v1alpha1.ReasonProbesFailed, st.Conditions[0].Reason)
	require.Len(t, st.Outages, 1)
	require.Nil(t, st.Outages[0].End, "ongoing")
	require.Equal(t, statusOf(unreachableSummary(now)), st, "deterministic: an unchanged summary renders an identical status")
}

// An observer on a node the quorum found cut off: its failures are attributed to it, not
// to the target, while the outage it saw stays on record.
func TestMarkObserverUnhealthy(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := statusOf(unreachableSummary(now))
	markObserverUnhealthy(&st, "node-a")
	require.Equal(t, v1alpha1.ReachabilityUnknown, st.Reachability)
	require.Equal(t, metav1.ConditionUnknown, st.Conditions[0].Status)
	require.Equal(t, v1alpha1.ReasonObserverUnhealthy, st.Conditions[0].Reason)
	require.Contains(t, st.Conditions[0].Message, "node-a")
	require.Len(t, st.Outages, 1)
}

func TestKeyOfObjectRoundTrip(t *testing.T) {
	for _, k := range []observation.PairKey{
		{SourceNamespace: "ns", SourcePod: "a", SourceUID: "ua", TargetKind: observation.TargetPod, TargetNamespace: "other", TargetName: "b", TargetUID: "ub"},
		{SourceNamespace: "ns", SourcePod: "a", SourceUID: "ua", TargetKind: observation.TargetNode, TargetName: "node-1"},
		{SourceNamespace: "ns", SourcePod: "a", SourceUID: "ua", TargetKind: observation.TargetExternal, TargetAddress: "192.0.2.1"},
		{SourceNamespace: "ns", SourcePod: "a", SourceUID: "ua", TargetKind: observation.TargetExternal, TargetAddress: "192.0.2.1",
			TargetPort: 443, TargetEndpoint: "https://192.0.2.1/healthz"},
		{SourceNamespace: "ns", SourcePod: "a", SourceUID: "ua", TargetKind: observation.TargetExternal, TargetAddress: "10.96.0.10",
			TargetPort: 53, TargetEndpoint: "kubernetes.default.svc.cluster.local. A"},
	} {
		obj := objectOf(observation.Summary{Key: k})
		require.Equal(t, k, KeyOfObject(obj), "the pair survives a restart: %s", k)
		require.Equal(t, "ns", obj.Namespace, "objects live in the source pod's namespace")
		require.Equal(t, "ua", string(obj.OwnerReferences[0].UID))
	}
}

func TestDegradedCondition(t *testing.T) {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s := observation.Summary{Verdict: observation.VerdictReachable, VerdictSince: at, LastObserved: at.Add(time.Minute)}
	cond := func(st v1alpha1.PodNetworkHealthStatus) metav1.Condition {
		for _, c := range st.Conditions {
			if c.Type == v1alpha1.ConditionDegraded {
				return c
			}
		}
		t.Fatal("no Degraded condition")
		return metav1.Condition{}
	}
	var st v1alpha1.PodNetworkHealthStatus
	setDegraded(&st, s, []string{"ipv6"}, at.Add(30*time.Second), verdict.PairGray{})
	c := cond(st)
	require.Equal(t, metav1.ConditionTrue, c.Status)
	require.Equal(t, v1alpha1.ReasonAddressFamilyUnreachable, c.Reason)
	require.Contains(t, c.Message, "ipv6")
	require.Equal(t, at.Add(30*time.Second), c.LastTransitionTime.Time)

	st = v1alpha1.PodNetworkHealthStatus{}
	setDegraded(&st, s, nil, time.Time{}, verdict.PairGray{})
	require.Equal(t, metav1.ConditionFalse, cond(st).Status)
	require.Equal(t, v1alpha1.ReasonWithinThresholds, cond(st).Reason)

	// A path-MTU black hole: Degraded with the size that passes (families come first).
	st = v1alpha1.PodNetworkHealthStatus{}
	m := s
	m.MTUBlackHole, m.MTUPasses, m.MTUSince = true, 1280, at.Add(20*time.Second)
	setDegraded(&st, m, nil, time.Time{}, verdict.PairGray{})
	require.Equal(t, metav1.ConditionTrue, cond(st).Status)
	require.Equal(t, v1alpha1.ReasonMTUBlackHole, cond(st).Reason)
	require.Contains(t, cond(st).Message, "1280-byte packets pass")
	require.Equal(t, at.Add(20*time.Second), cond(st).LastTransitionTime.Time)
	obj := &v1alpha1.PodNetworkHealth{Status: st}
	p := PersistedOf(obj)
	require.Equal(t, 1280, p.MTUPasses, "a new writer resumes the black hole")
	st = v1alpha1.PodNetworkHealthStatus{}
	setDegraded(&st, m, []string{"ipv6"}, at, verdict.PairGray{})
	require.Equal(t, v1alpha1.ReasonAddressFamilyUnreachable, cond(st).Reason)

	st = v1alpha1.PodNetworkHealthStatus{}
	s.Verdict = observation.VerdictUnreachable
	setDegraded(&st, s, nil, time.Time{}, verdict.PairGray{})
	require.Equal(t, metav1.ConditionUnknown, cond(st).Status)
	require.Equal(t, v1alpha1.ReasonNotReachable, cond(st).Reason)
}

// What a writer puts in an object reads back as the state a new writer resumes from.
func TestPersistedRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s := observation.Summary{
		Key: observation.PairKey{SourceNamespace: "ns", SourcePod: "a", SourceUID: "ua", TargetKind: observation.TargetPod,
			TargetNamespace: "ns", TargetName: "b", TargetUID: "ub"},
		Verdict: observation.VerdictUnreachable, VerdictSince: at.Add(2 * time.Second), LastObserved: at.Add(time.Minute),
		ObservedFromNode: "node-a",
		Outages:          []observation.Outage{{Start: at, Reason: "Timeout", Message: "unreachable"}, {Start: at.Add(-time.Hour), End: at.Add(-50 * time.Minute), Reason: "Timeout"}},
	}
	obj := objectOf(s)
	p := PersistedOf(obj)
	require.Equal(t, s.Key, p.Key)
	require.Equal(t, observation.VerdictUnreachable, p.Verdict)
	require.Equal(t, at.Add(2*time.Second), p.Since)
	require.Equal(t, at.Add(time.Minute), p.LastObserved)
	require.Len(t, p.Outages, 2)
	require.True(t, p.Outages[0].Ongoing())
	require.Equal(t, at, p.Outages[0].Start)
	require.Empty(t, p.BadObserverNode)

	markObserverUnhealthy(&obj.Status, "node-a")
	p = PersistedOf(obj)
	require.Equal(t, observation.VerdictUnreachable, p.Verdict, "ObserverUnhealthy is an Unreachable pair blamed on its observer")
	require.Equal(t, "node-a", p.BadObserverNode)

	obj = objectOf(s)
	markObserverSilent(&obj.Status, "ns/a", at.Add(2*time.Minute))
	p = PersistedOf(obj)
	require.True(t, p.SilentObserver)
	require.Empty(t, p.Verdict, "a silent observer's object says nothing of the path")
	require.Len(t, p.Outages, 2, "the outage history is kept")

	s.Verdict = observation.VerdictReachable
	s.Outages = nil
	obj = objectOf(s)
	setDegraded(&obj.Status, s, []string{"ipv6"}, at, verdict.PairGray{})
	p = PersistedOf(obj)
	require.Equal(t, "ipv6", p.DegradedFamilies)
}

// Every disruption of the contract (the reasons markDisrupted writes) says why.
func TestEveryDisruptionHasAMessage(t *testing.T) {
	for _, d := range contract.Disruptions {
		if disruptionMessages[d] == "" {
			t.Errorf("disruption %s: no message in disruptionMessages", d)
		}
	}
	if len(disruptionMessages) != len(contract.Disruptions) {
		t.Errorf("disruptionMessages has %d entries; internal/contract has %d disruptions", len(disruptionMessages), len(contract.Disruptions))
	}
}
