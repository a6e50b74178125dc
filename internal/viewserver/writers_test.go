// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewserver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	pnhfake "github.com/netpulse/netpulse/api/client/clientset/versioned/fake"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

// clock is a Source's Clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// writersFixture: a 4-node cluster whose first object is shard 0 of 2's, an hour past its
// freshUntil; shard 0's summary in namespace netpulse-gw names Lease netpulse-gateway-0,
// renewed now. The Source is started and refreshes its writers every writerEvery.
func writersFixture(t *testing.T, writerEvery time.Duration) (*Source, *kubefake.Clientset, *clock, string) {
	t.Helper()
	clk := &clock{t: now}
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 4, Stable: 1, Now: now})
	obj := f.Objects[0]
	obj.Labels[v1alpha1.LabelShard] = matrix.ShardKey(0, 2)
	obj.Status.FreshUntil = &metav1.Time{Time: now.Add(-time.Hour)}
	var pnh []runtime.Object
	for _, o := range f.Objects {
		pnh = append(pnh, o)
	}
	pnh = append(pnh, &v1alpha1.NetworkHealthSummary{ObjectMeta: metav1.ObjectMeta{Namespace: "netpulse-gw", Name: "netpulse-gateway-0"},
		Status: v1alpha1.NetworkHealthSummaryStatus{LeaseName: "netpulse-gateway-0", Writer: "gw-a", Shard: 0, Shards: 2}})
	kube := []runtime.Object{&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "netpulse-gw", Name: "netpulse-gateway-0"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("gw-a"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: now}}}}
	for _, n := range f.Nodes {
		kube = append(kube, n)
	}
	for _, p := range f.Pods {
		kube = append(kube, p)
	}
	kc := kubefake.NewClientset(kube...)
	src, err := newSource(pnhfake.NewSimpleClientset(pnh...), kc, SourceOptions{Clock: clk.Now})
	require.NoError(t, err)
	src.writerEvery = writerEvery
	src.Start()
	t.Cleanup(src.Shutdown)
	return src, kc, clk, obj.Name
}

// pairNamed is the named object's pair in the Source's current model.
func pairNamed(t *testing.T, src *Source, name string) (matrix.Pair, uint64) {
	t.Helper()
	m, v, synced := src.Snapshot()
	require.True(t, synced)
	for _, p := range m.Pairs {
		if p.Name == name {
			return p, v
		}
	}
	require.Failf(t, "no pair", "%s", name)
	return matrix.Pair{}, 0
}

func setRenewTime(t *testing.T, kc *kubefake.Clientset, at time.Time) {
	t.Helper()
	ctx := context.Background()
	l, err := kc.CoordinationV1().Leases("netpulse-gw").Get(ctx, "netpulse-gateway-0", metav1.GetOptions{})
	require.NoError(t, err)
	l.Spec.RenewTime = &metav1.MicroTime{Time: at}
	_, err = kc.CoordinationV1().Leases("netpulse-gw").Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// TestWritersLeaseKeepsObjectsCurrent: an object of a shard whose summary names a renewed
// Lease reads Reachable an hour past its freshUntil; once the Lease is not renewed (or
// gone) it reads Unknown / StatusStale, and the version moved so the page redraws. A
// refresh that finds the Lease only older, not expired, leaves the model as it was.
// Without the right to read the Lease the writer is unknown and freshUntil decides.
func TestWritersLeaseKeepsObjectsCurrent(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	src, kc, clk, name := writersFixture(t, time.Hour) // the test refreshes
	ctx := context.Background()
	require.Eventually(t, func() bool {
		_, _, synced := src.Snapshot()
		return synced && len(*src.writers.Load()) == 1 // the first refresh, once the summaries are listed
	}, 10*time.Second, 10*time.Millisecond)
	p, v := pairNamed(t, src, name)
	assert.Equal(t, matrix.Reachable, p.Verdict, "an hour past freshUntil, its writer's Lease renewed: current")
	assert.Equal(t, "netpulse-gw/netpulse-gateway-0", p.Writer)

	clk.Add(3 * time.Second)
	src.refreshWriters(ctx)
	m1, _, _ := src.Snapshot()
	_, v2 := pairNamed(t, src, name)
	assert.Equal(t, v, v2, "renewed 3s ago instead of 0s: no change to show, no rebuild")
	m2, _, _ := src.Snapshot()
	assert.Same(t, m1, m2)

	setRenewTime(t, kc, now.Add(-time.Hour))
	src.refreshWriters(ctx)
	p, v3 := pairNamed(t, src, name)
	assert.NotEqual(t, v2, v3)
	assert.Equal(t, matrix.Unknown, p.Verdict, "its writer's Lease not renewed for an hour: stale")
	assert.Equal(t, matrix.ReasonStatusStale, p.Reason)
	assert.Contains(t, p.Message, "its writer's Lease last renewed 60m ago (duration 15s): its writer stopped (netpulse-gw/netpulse-gateway-0)")
	clk.Add(time.Minute)
	src.refreshWriters(ctx)
	_, v4 := pairNamed(t, src, name)
	assert.Equal(t, v3, v4, "still stopped, only for longer")

	require.NoError(t, kc.CoordinationV1().Leases("netpulse-gw").Delete(ctx, "netpulse-gateway-0", metav1.DeleteOptions{}))
	src.refreshWriters(ctx)
	p, v5 := pairNamed(t, src, name)
	assert.NotEqual(t, v4, v5, "stopped for another reason: shown")
	assert.Equal(t, matrix.ReasonStatusStale, p.Reason)
	assert.Contains(t, p.Message, "Lease is gone: its writer stopped")

	kc.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "netpulse-gateway-0", nil)
	})
	src.refreshWriters(ctx)
	p, _ = pairNamed(t, src, name)
	assert.Empty(t, p.Writer, "a Lease it may not read: its writer is unknown")
	assert.Equal(t, matrix.ReasonStatusStale, p.Reason)
	assert.Contains(t, p.Message, "status not rewritten since", "freshUntil decides")

	src.Shutdown()
	src.Shutdown()
}

// TestWritersRefreshRuns: the refresh Start begins rereads the Lease by itself, and
// Shutdown stops it (safe twice, and without Start).
func TestWritersRefreshRuns(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	src, kc, _, name := writersFixture(t, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		_, _, synced := src.Snapshot()
		return synced && len(*src.writers.Load()) == 1
	}, 10*time.Second, 10*time.Millisecond)
	p, _ := pairNamed(t, src, name)
	require.Equal(t, matrix.Reachable, p.Verdict)
	setRenewTime(t, kc, now.Add(-time.Hour))
	require.Eventually(t, func() bool {
		p, _ := pairNamed(t, src, name)
		return p.Verdict == matrix.Unknown && p.Reason == matrix.ReasonStatusStale
	}, 10*time.Second, 10*time.Millisecond)
	src.Shutdown()
	src.Shutdown()

	idle, err := newSource(pnhfake.NewSimpleClientset(), kubefake.NewClientset(), SourceOptions{})
	require.NoError(t, err)
	idle.Shutdown()
	idle.Shutdown()
	idle.Start() // after Shutdown: starts nothing (goleak)
}

func TestSameCurrency(t *testing.T) {
	w := func(current bool, why string) map[string]matrix.Writer {
		return map[string]matrix.Writer{"0-of-2": {Lease: "netpulse/netpulse-gateway-0", Current: current, Why: why}}
	}
	assert.True(t, sameCurrency(nil, map[string]matrix.Writer{}))
	assert.True(t, sameCurrency(w(true, "Lease renewed 1s ago by gw-a"), w(true, "Lease renewed 9s ago by gw-b")))
	assert.True(t, sameCurrency(w(false, "Lease last renewed 20s ago (duration 15s): its writer stopped"),
		w(false, "Lease last renewed 2m5s ago (duration 15s): its writer stopped")))
	assert.False(t, sameCurrency(w(false, "Lease last renewed 20s ago (duration 15s): its writer stopped"),
		w(false, "Lease is gone: its writer stopped")))
	assert.False(t, sameCurrency(w(true, "x"), w(false, "x")))
	assert.False(t, sameCurrency(w(true, "x"), nil))
}
