// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix_test

import (
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
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

// TestTheWritersLeaseKeepsAStatusCurrent: an object whose writer is known is current while
// its writer's Lease is renewed, however far past its freshUntil (at scale a healthy pair's
// object is rewritten every few hours); it reads Unknown / StatusStale once the Lease is
// not, however fresh. An object of a writer not known (another shard's, no summary), or
// whose writer's Lease could not be read, is judged by its freshUntil, as before; without
// one (written for a Lease to keep current) it is stale when no summary names its writer,
// and current when the Lease could not be read.
func TestTheWritersLeaseKeepsAStatusCurrent(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 7, Stable: 1, Now: now})
	require.GreaterOrEqual(t, len(f.Objects), 7)
	old := metav1.NewTime(now.Add(-3 * time.Hour))
	past := metav1.NewTime(now.Add(-2 * time.Hour))
	future := metav1.NewTime(now.Add(time.Hour))
	// Objects 0 and 1: shard 0 of 2, past freshUntil / within it; 2: shard 1 of 2, within
	// it; 3: shard 3 of 8 (no summary), past it; 4: shard 3 of 8, none; 5 and 6: shard 2 of
	// 8 (its Lease unreadable), past it / none.
	shards := []string{"0-of-2", "0-of-2", "1-of-2", "3-of-8", "3-of-8", "2-of-8", "2-of-8"}
	fresh := []*metav1.Time{&past, &future, &future, &past, nil, &past, nil}
	for i, o := range f.Objects[:7] {
		o.Labels = map[string]string{v1alpha1.LabelShard: shards[i]}
		o.Status.LastObservedTime, o.Status.FreshUntil = &old, fresh[i]
	}
	lease := func(renewed time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("gw-b"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}}
	}
	sum := func(shard int32) *v1alpha1.NetworkHealthSummary {
		return &v1alpha1.NetworkHealthSummary{ObjectMeta: metav1.ObjectMeta{Namespace: "netpulse", Name: "gw"},
			Status: v1alpha1.NetworkHealthSummaryStatus{LeaseName: "netpulse-gateway", Writer: "gw-a", Shard: shard, Shards: 2}}
	}
	in := matrix.Input{Objects: f.Objects, Now: now, Writers: map[string]matrix.Writer{
		// Held by another pod than the summary's writer (a takeover): the objects are its.
		matrix.ShardKey(0, 2): matrix.WriterOf(sum(0), lease(2*time.Second), nil, now),
		matrix.ShardKey(1, 2): matrix.WriterOf(sum(1), lease(time.Minute), nil, now),
		matrix.ShardKey(2, 8): {Lease: "netpulse/netpulse-gateway-2", Unread: true, Why: "Lease unreadable: forbidden"},
	}}
	for _, n := range f.Nodes {
		in.Nodes = append(in.Nodes, matrix.NodeFrom(n, ""))
	}
	m := matrix.Build(in)
	byName := map[string]matrix.Pair{}
	for _, p := range m.Pairs {
		byName[p.Name] = p
	}
	p := byName[f.Objects[0].Name]
	assert.Equal(t, matrix.Reachable, p.Verdict, "2 hours past freshUntil, its writer's Lease renewed: current")
	assert.Equal(t, "netpulse/netpulse-gateway", p.Writer)
	assert.Equal(t, matrix.Reachable, byName[f.Objects[1].Name].Verdict)
	p = byName[f.Objects[2].Name]
	assert.Equal(t, matrix.Unknown, p.Verdict, "within freshUntil, but its writer's Lease expired")
	assert.Equal(t, matrix.ReasonStatusStale, p.Reason)
	assert.Contains(t, p.Message, "Lease last renewed 60s ago (duration 15s): its writer stopped (netpulse/netpulse-gateway)")
	p = byName[f.Objects[3].Name]
	assert.Equal(t, matrix.Unknown, p.Verdict, "no writer known: past its freshUntil")
	assert.Contains(t, p.Message, "status not rewritten since")
	assert.Empty(t, p.Writer)
	p = byName[f.Objects[4].Name]
	assert.Equal(t, matrix.Unknown, p.Verdict, "no freshUntil and no summary names its shard: nothing keeps it current")
	assert.Contains(t, p.Message, "no writer's NetworkHealthSummary names its shard (3-of-8)")
	p = byName[f.Objects[5].Name]
	assert.Equal(t, matrix.Unknown, p.Verdict, "its writer's Lease unreadable: past its freshUntil")
	assert.Contains(t, p.Message, "status not rewritten since")
	assert.Equal(t, matrix.Reachable, byName[f.Objects[6].Name].Verdict, "its writer's Lease unreadable, no freshUntil: nothing says it is stale")

	assert.Empty(t, matrix.ShardKey(0, 1), "an unsharded gateway's objects carry no shard label")
	assert.Equal(t, "2-of-8", matrix.ShardKey(2, 8))
}

// TestWritersFrom: each summary's Lease read by its name (status.leaseName, else the
// summary's), by shard: a Lease not found is a writer that stopped, one that cannot be read
// is Unread (freshUntil decides), and of two summaries of one shard the current writer's
// counts.
func TestWritersFrom(t *testing.T) {
	sum := func(ns, name, lease string, shard, shards int32) *v1alpha1.NetworkHealthSummary {
		return &v1alpha1.NetworkHealthSummary{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status: v1alpha1.NetworkHealthSummaryStatus{LeaseName: lease, Shard: shard, Shards: shards}}
	}
	renewed := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("gw-a"), LeaseDurationSeconds: ptr.To[int32](15),
		RenewTime: &metav1.MicroTime{Time: now.Add(-time.Second)}}}
	leases := map[string]*coordinationv1.Lease{"gw/lease-0": renewed, "gw/old-1": renewed}
	var read []string
	get := func(ns, name string) (*coordinationv1.Lease, error) {
		read = append(read, ns+"/"+name)
		switch name {
		case "forbidden":
			return nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, name, nil)
		case "timeout":
			return nil, apierrors.NewTimeoutError("slow", 1)
		}
		if l, ok := leases[ns+"/"+name]; ok {
			return l, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, name)
	}
	ws := matrix.WritersFrom([]*v1alpha1.NetworkHealthSummary{
		sum("gw", "lease-0", "", 0, 4),    // named after its Lease
		sum("gw", "gone-1", "", 1, 4),     // an earlier writer's of shard 1, its Lease gone ...
		sum("gw", "sum-1", "old-1", 1, 4), // ... and the current one's
		sum("gw", "forbidden", "", 2, 4),
		sum("gw", "timeout", "", 3, 4),
		sum("other", "solo", "", 0, 1),
	}, get, now)
	assert.Equal(t, []string{"gw/lease-0", "gw/gone-1", "gw/old-1", "gw/forbidden", "gw/timeout", "other/solo"}, read)
	assert.Equal(t, map[string]matrix.Writer{
		"0-of-4": {Lease: "gw/lease-0", Current: true, Why: "Lease renewed 1s ago by gw-a"},
		"1-of-4": {Lease: "gw/old-1", Current: true, Why: "Lease renewed 1s ago by gw-a"},
		"2-of-4": {Lease: "gw/forbidden", Unread: true, Why: `Lease unreadable: leases.coordination.k8s.io "forbidden" is forbidden: <nil>`},
		"3-of-4": {Lease: "gw/timeout", Unread: true, Why: "Lease unreadable: Timeout: slow"},
		"":       {Lease: "other/solo", Why: "Lease is gone: its writer stopped"},
	}, ws)
}
