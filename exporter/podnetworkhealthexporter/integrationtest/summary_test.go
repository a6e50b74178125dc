// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
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
// deploy/: six agents in a mesh. It appears beside the writer's Lease, under its name;
// reads Complete once the term's targets are judged and their verdicts written; is not
// rewritten while nothing changes (the Lease says it is current); and names a
// partitioned node's target as Unreachable, then none after the heal.
func TestSummaryObject(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const lease = "pnh-summary"
	m := newMesh(t, "summary", 6)
	cfg := testConfig(lease)
	cfg.MaxProbeInterval = 2 * time.Second // the warm-up: 3 intervals
	cfg.Summary.MinInterval = time.Second
	exp := startExporter(t, cfg, "gw-sum", nil)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	m.run(exp)
	defer m.close()

	var last *v1alpha1.NetworkHealthSummary
	await := func(what string, ok func(s v1alpha1.NetworkHealthSummaryStatus) bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			last = summaryOf(t, lease)
			if last == nil || !ok(last.Status) {
				return false
			}
			c := meta.FindStatusCondition(last.Status.Conditions, v1alpha1.ConditionComplete)
			return c != nil && c.Status == metav1.ConditionTrue
		}, 60*time.Second, 200*time.Millisecond, "%s: %s", what, summaryText(last))
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

	m.set(2, true)
	await("a node partitioned", func(s v1alpha1.NetworkHealthSummaryStatus) bool {
		return s.UnreachableTargets == 1 && len(s.UnreachableNodes) == 1 && s.UnreachableNodes[0] == m.targets[2].Node
	})
	require.Equal(t, int32(1), last.Status.UnreachableNodeCount)
	m.set(2, false)
	await("healed", func(s v1alpha1.NetworkHealthSummaryStatus) bool {
		return s.UnreachableTargets == 0 && s.ReachableTargets == 6 && len(s.UnreachableNodes) == 0
	})
}
