// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	pnhexporter "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter"
)

// summaryOf reads the NetworkHealthSummary of the Lease (nil: none yet).
func summaryOf(t *testing.T, lease string) *v1alpha1.NetworkHealthSummary {
	o, err := pnhClient.NetpulseV1alpha1().NetworkHealthSummaries("netpulse").Get(context.Background(), lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return o
}

func summaryText(o *v1alpha1.NetworkHealthSummary) string {
	if o == nil {
		return "no summary"
	}
	s := o.Status
	text := fmt.Sprintf("targets %d (reachable %d, unreachable %d on %v, unknown %d), observers %d (silent %d), pending %d/%d",
		s.Targets, s.ReachableTargets, s.UnreachableTargets, s.UnreachableNodes, s.UnknownTargets, s.Observers, s.SilentObservers, s.PendingVerdictWrites, s.PendingWrites)
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionComplete); c != nil {
		text += fmt.Sprintf("; Complete=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return text
}

// The writer's NetworkHealthSummary on a real API server, with the gateway's RBAC from
// deploy/ and pair_objects: problems: six agents in a mesh. The summary appears beside
// the writer's Lease, under its name; reads Complete once the term's targets are judged
// and their verdicts written; is not rewritten while nothing changes (the Lease says it is
// current); and names a partitioned node's target as Unreachable, then none after the
// heal. No PodNetworkHealth exists while the mesh is healthy; the partitioned node's pairs
// get objects that read Unreachable, then Reachable, and are deleted after the retention.
func TestSummaryObject(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const lease, ns = "pnh-summary", "summary"
	// The summary counts every target and observer its writer knows, and a writer resumes
	// every object in the API: the earlier tests' objects go first, so the counts are this
	// mesh's.
	deleteAllPairObjects(t)
	m := newMesh(t, ns, 6)
	cfg := testConfig(lease)
	cfg.MaxProbeInterval = 2 * time.Second // the warm-up: 3 intervals
	cfg.Summary.MinInterval = time.Second
	cfg.PairObjects = pnhexporter.PairObjectsProblems
	cfg.FailingPairRetention = time.Minute
	exp := startExporter(t, cfg, "gw-sum", nil)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	m.run(exp)
	defer m.close()

	var last *v1alpha1.NetworkHealthSummary
	await := func(what string, ok func(s v1alpha1.NetworkHealthSummaryStatus) bool) {
		t.Helper()
		if !assert.Eventually(t, func() bool {
			last = summaryOf(t, lease)
			if last == nil || !ok(last.Status) {
				return false
			}
			c := meta.FindStatusCondition(last.Status.Conditions, v1alpha1.ConditionComplete)
			return c != nil && c.Status == metav1.ConditionTrue
		}, 60*time.Second, 200*time.Millisecond) {
			t.Fatalf("%s: never; the summary reads %s", what, summaryText(last))
		}
		t.Logf("%s: %s", what, summaryText(last))
	}
	await("judged and written", func(s v1alpha1.NetworkHealthSummaryStatus) bool {
		return s.Targets == 6 && s.ReachableTargets == 6 && s.Observers == 6
	})
	require.Equal(t, lease, last.Status.LeaseName)
	require.Equal(t, "gw-sum", last.Status.Writer)
	require.Equal(t, v1alpha1.LabelManagedByValue, last.Labels[v1alpha1.LabelManagedBy])
	l, err := admin.CoordinationV1().Leases("netpulse").Get(ctx, lease, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "gw-sum", *l.Spec.HolderIdentity, "the summary's writer holds the Lease it names")

	// Nothing changes: no write, whatever the time (no heartbeat).
	rv := last.ResourceVersion
	time.Sleep(8 * time.Second)
	steady := summaryOf(t, lease)
	require.Equal(t, rv, steady.ResourceVersion, "a steady mesh rewrote its summary: %s", summaryText(steady))
	require.Empty(t, pairObjects(t, ns), "pair_objects: problems writes no object for a healthy pair")

	m.set(2, true)
	await("a node partitioned", func(s v1alpha1.NetworkHealthSummaryStatus) bool {
		return s.UnreachableTargets == 1 && len(s.UnreachableNodes) == 1 && s.UnreachableNodes[0] == m.targets[2].Node
	})
	require.Equal(t, int32(1), last.Status.UnreachableNodeCount)
	towards := func(verdict v1alpha1.Reachability) func() bool {
		return func() bool {
			n := 0
			for _, o := range pairObjects(t, ns) {
				if o.Spec.TargetPodRef != nil && o.Spec.TargetPodRef.Name == m.targets[2].Pod && o.Status.Reachability == verdict {
					n++
				}
			}
			return n > 0
		}
	}
	require.Eventually(t, towards(v1alpha1.Unreachable), 20*time.Second, 200*time.Millisecond, "no Unreachable object towards the partitioned pod")
	m.set(2, false)
	healed := time.Now()
	await("healed", func(s v1alpha1.NetworkHealthSummaryStatus) bool {
		return s.UnreachableTargets == 0 && s.ReachableTargets == 6 && len(s.UnreachableNodes) == 0
	})
	require.Eventually(t, towards(v1alpha1.Reachable), 20*time.Second, 200*time.Millisecond, "the recovery was not written")
	require.Eventually(t, func() bool { return len(pairObjects(t, ns)) == 0 }, 2*time.Minute, time.Second,
		"the healed pairs' objects outlived failing_pair_retention (1m)")
	t.Logf("FIGURE pair_objects: problems: the healed pairs' objects deleted %v after the heal (failing_pair_retention 1m)", time.Since(healed).Round(time.Second))
}

// deleteAllPairObjects deletes every PodNetworkHealth in the API and waits until none is
// left.
func deleteAllPairObjects(t *testing.T) {
	ctx := context.Background()
	l, err := pnhClient.NetpulseV1alpha1().PodNetworkHealths("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range l.Items {
		err := pnhClient.NetpulseV1alpha1().PodNetworkHealths(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
	require.Eventually(t, func() bool { return len(pairObjects(t, "")) == 0 }, 30*time.Second, 200*time.Millisecond)
}

// pairObjects lists the PodNetworkHealth objects of ns ("": all).
func pairObjects(t *testing.T, ns string) []v1alpha1.PodNetworkHealth {
	l, err := pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return l.Items
}
