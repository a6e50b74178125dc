// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// freshness: lease (the default beside a summary) on a real API server, four agents in a
// mesh: every healthy pair's object is written until its figures are in, carries no
// freshUntil, and is then not rewritten over two and a half heartbeats (heartbeat 10 s;
// freshness: heartbeat rewrites each every 10 s, as TestLeaderElectionHandover's new leader
// does) while the writer renews its Lease, which is what readers take the objects'
// currency from. A partition is news: the objects towards the cut pod are written at once.
func TestLeaseFreshnessWritesHealthyPairsOnce(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const lease, ns = "pnh-freshness", "freshness"
	m := newMesh(t, ns, 4)
	cfg := testConfig(lease)
	cfg.Heartbeat = 10 * time.Second
	cfg.QPS = 50 // the heartbeat stays 10 s over the objects earlier tests left (see TestLeaderElectionHandover)
	cfg.MaxProbeInterval = 2 * time.Second
	exp := startExporter(t, cfg, "gw-fresh", nil)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	m.run(exp)
	defer m.close()

	const pairs = 4 * 3
	versions := func() map[string]string {
		out := map[string]string{}
		for _, o := range pairObjects(t, ns) {
			if o.Status.Reachability == v1alpha1.Reachable && o.Status.Latency != nil && o.Status.LossRatio != "" {
				out[o.Name] = o.ResourceVersion
			}
		}
		return out
	}
	// Settled: every pair's object carries its figures and none was written for 5 s.
	var settled map[string]string
	require.Eventually(t, func() bool {
		before := versions()
		if len(before) != pairs {
			return false
		}
		time.Sleep(5 * time.Second)
		settled = versions()
		return equalVersions(before, settled)
	}, 90*time.Second, time.Second, "the healthy mesh's %d objects never settled", pairs)
	for _, o := range pairObjects(t, ns) {
		require.Nil(t, o.Status.FreshUntil, "%s: freshness: lease writes no freshUntil", o.Name)
	}
	renewed := func() time.Time {
		l, err := admin.CoordinationV1().Leases("netpulse").Get(ctx, lease, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, l.Spec.RenewTime)
		return l.Spec.RenewTime.Time
	}
	renewedBefore := renewed()

	time.Sleep(25 * time.Second) // two and a half heartbeats
	after := versions()
	require.True(t, equalVersions(settled, after), "a healthy pair's object was rewritten with freshness: lease: %v -> %v", settled, after)
	require.True(t, renewed().After(renewedBefore), "the writer's Lease was not renewed: readers would read its objects stale")
	t.Logf("FIGURE freshness: lease: %d healthy pairs' objects, 0 writes in 25 s (2.5 heartbeats of 10 s; freshness: heartbeat writes each every heartbeat)", pairs)

	m.set(1, true)
	cut := time.Now()
	require.Eventually(t, func() bool {
		n := 0
		for _, o := range pairObjects(t, ns) {
			if o.Spec.TargetPodRef != nil && o.Spec.TargetPodRef.Name == m.targets[1].Pod && o.Status.Reachability == v1alpha1.Unreachable {
				n++
			}
		}
		return n == 3
	}, 20*time.Second, 200*time.Millisecond, "the partition (news) was not written")
	t.Logf("FIGURE freshness: lease: a partition written %v after it began", time.Since(cut).Round(100*time.Millisecond))
}

func equalVersions(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
