// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

func TestStatusCurrencyIsTheLeases(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &v1alpha1.NetworkHealthSummary{Status: v1alpha1.NetworkHealthSummaryStatus{LeaseName: "netpulse-gateway-0", Writer: "gw-a",
		LastJudgedTime: &metav1.Time{Time: now.Add(-3 * time.Hour)}}}
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}}
	}
	ok, why := currency(s, lease("gw-a", 2*time.Second), nil, now)
	assert.True(t, ok, "written 3 hours ago, but its writer renews the Lease: current")
	assert.Equal(t, "Lease renewed 2s ago by gw-a", why)
	ok, why = currency(s, lease("gw-a", time.Minute), nil, now)
	assert.False(t, ok)
	assert.Equal(t, "Lease last renewed 60s ago (duration 15s): its writer stopped", why)
	ok, why = currency(s, lease("gw-b", time.Second), nil, now)
	assert.False(t, ok)
	assert.Contains(t, why, "Lease held by gw-b, not by gw-a that wrote this")
	ok, why = currency(s, nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "netpulse-gateway-0"), now)
	assert.False(t, ok)
	assert.Equal(t, "no Lease netpulse-gateway-0: its writer stopped", why)
}

func TestStatusTable(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := v1alpha1.NetworkHealthSummary{ObjectMeta: metav1.ObjectMeta{Namespace: "netpulse", Name: "netpulse-gateway-1"},
		Status: v1alpha1.NetworkHealthSummaryStatus{LeaseName: "netpulse-gateway-1", Writer: "gw-1", Shard: 1, Shards: 8,
			Targets: 8127, ReachableTargets: 8110, UnreachableTargets: 12, UnknownTargets: 5, DegradedTargets: 1,
			UnreachableNodes: []string{"n-01", "n-02"}, UnreachableNodeCount: 12, DegradedNodes: []string{"n-77"}, DegradedNodeCount: 1,
			Observers: 65000, SilentObservers: 3,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionComplete, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonVerdictWritesPending}}}}
	var out bytes.Buffer
	writeStatus(&out, []statusRow{{summary: s}}, now)
	text := out.String()
	t.Log("\n" + text)
	require.Contains(t, text, "netpulse/netpulse-gateway-1  1/8    8127     12           1         5        65000 (3 silent)  False (VerdictWritesPending)  NO")
	require.Contains(t, text, "netpulse/netpulse-gateway-1: Unreachable targets on n-01, n-02 and 10 more")
	require.Contains(t, text, "netpulse/netpulse-gateway-1: Degraded targets on n-77")
	require.Contains(t, text, "netpulse/netpulse-gateway-1: Lease held by nobody: no writer")
}
