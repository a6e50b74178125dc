// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// zoneDegraded is the Degraded condition of the ZoneNetworkHealth of from → to (nil: no
// object, or no such condition).
func zoneDegraded(t *testing.T, from, to string) *metav1.Condition {
	o, err := pnhClient.NetpulseV1alpha1().ZoneNetworkHealths().Get(context.Background(), v1alpha1.ZoneObjectName(from, to), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionDegraded)
}

// A lossy link between two zones on a real API server, with the gateway's RBAC from
// deploy/: six nodes in two zones, 20 % of the echoes from zone a's agents towards zone b's
// pods lost (zone b to zone a, and each zone inside, clean). The zone pair a → b gets a
// ZoneNetworkHealth with Degraded=True/PacketLoss and the figures; b → a gets none;
// healed, the condition turns False and the object stays (the retention).
func TestGrayZonePairObject(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const ns, za, zb = "grayzone", "grayzone-a", "grayzone-b"
	m := newMesh(t, ns, 6)
	zoneOf := func(i int) string {
		if i%2 == 0 {
			return za
		}
		return zb
	}
	for i := range m.targets {
		m.targets[i].Zone = zoneOf(i)
	}
	cfg := testConfig("pnh-grayzone")
	cfg.LeaderElection.Enabled = false
	// 2 s slots: the judgement's 1, 2, 4 ... slot scales at the test's 200 ms rounds.
	cfg.Gray.SlotWidth = 2 * time.Second
	cfg.Gray.Window = 2 * time.Minute
	exp := startExporter(t, cfg, "gw-gz", nil)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	m.setLinkLoss(func(i, j int) float64 {
		if zoneOf(i) == za && zoneOf(j) == zb {
			return 0.2
		}
		return 0
	})
	start := time.Now()
	m.run(exp)
	defer m.close()
	// New agents' and targets' first 30 s are transients the judgement leaves out.
	if !assert.Eventually(t, func() bool {
		c := zoneDegraded(t, za, zb)
		return c != nil && c.Status == metav1.ConditionTrue
	}, 120*time.Second, 250*time.Millisecond) {
		t.Fatalf("the lossy zone pair never gets its object; the pairs: %s", grayPairs(t, ns))
	}
	t.Logf("FIGURE zone pair object Degraded %v after the first round", time.Since(start).Round(time.Second))
	c := zoneDegraded(t, za, zb)
	t.Logf("zone pair condition: %s %s: %s", c.Status, c.Reason, c.Message)
	require.Equal(t, v1alpha1.ReasonPacketLoss, c.Reason)
	require.True(t, strings.HasPrefix(c.Message, fmt.Sprintf("packet loss between zones %s and %s: ", za, zb)), c.Message)
	o, err := pnhClient.NetpulseV1alpha1().ZoneNetworkHealths().Get(ctx, v1alpha1.ZoneObjectName(za, zb), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, v1alpha1.Reachable, o.Status.Reachability, "lossy, not cut")
	require.Equal(t, v1alpha1.LabelManagedByValue, o.Labels[v1alpha1.LabelManagedBy])
	_, err = pnhClient.NetpulseV1alpha1().ZoneNetworkHealths().Get(ctx, v1alpha1.ZoneObjectName(zb, za), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the clean direction has no object: %v", err)

	m.setLinkLoss(nil)
	healed := time.Now()
	require.Eventually(t, func() bool {
		c := zoneDegraded(t, za, zb)
		return c != nil && c.Status == metav1.ConditionFalse
	}, 120*time.Second, 250*time.Millisecond, "the healed zone pair's Degraded condition never turns False")
	t.Logf("FIGURE zone pair Degraded=False %v after the heal", time.Since(healed).Round(time.Second))
	c = zoneDegraded(t, za, zb)
	require.Equal(t, v1alpha1.ReasonWithinThresholds, c.Reason)
}

// A slow link between two zones on a real API server: six nodes in two zones, the rounds
// from zone a's agents towards zone b's pods 30 ms slower once every baseline is warm
// (zone b to zone a, and each zone inside, as before). The zone pair a → b gets
// Degraded=True/HighLatency with the share of slow rounds; no node is blamed (no pair
// reads a node's latency); healed, the condition turns False.
func TestGrayZonePairLatencyObject(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	const ns, za, zb = "grayzonertt", "grayzonertt-a", "grayzonertt-b"
	m := newMesh(t, ns, 6)
	zoneOf := func(i int) string {
		if i%2 == 0 {
			return za
		}
		return zb
	}
	for i := range m.targets {
		m.targets[i].Zone = zoneOf(i)
	}
	cfg := testConfig("pnh-grayzonertt")
	cfg.LeaderElection.Enabled = false
	cfg.Gray.SlotWidth = 2 * time.Second
	cfg.Gray.Window = 2 * time.Minute
	exp := startExporter(t, cfg, "gw-gzr", nil)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	m.run(exp)
	defer m.close()
	// New agents' and targets' first 30 s are transients; the baselines learn after them.
	time.Sleep(40 * time.Second)
	m.setLinkDelay(func(i, j int) time.Duration {
		if zoneOf(i) == za && zoneOf(j) == zb {
			return 30 * time.Millisecond
		}
		return 0
	})
	slowed := time.Now()
	if !assert.Eventually(t, func() bool {
		c := zoneDegraded(t, za, zb)
		return c != nil && c.Status == metav1.ConditionTrue
	}, 90*time.Second, 250*time.Millisecond) {
		t.Fatalf("the slow zone pair never gets its object; the pairs: %s", grayPairs(t, ns))
	}
	t.Logf("FIGURE zone pair object Degraded/HighLatency %v after the link slowed", time.Since(slowed).Round(time.Second))
	c := zoneDegraded(t, za, zb)
	t.Logf("zone pair condition: %s %s: %s", c.Status, c.Reason, c.Message)
	require.Equal(t, v1alpha1.ReasonHighLatency, c.Reason)
	require.True(t, strings.HasPrefix(c.Message, fmt.Sprintf("high latency between zones %s and %s: ", za, zb)), c.Message)
	if back := zoneDegraded(t, zb, za); back != nil {
		require.NotEqual(t, metav1.ConditionTrue, back.Status, "the fast direction: %s", back.Message)
	}
	require.NotContains(t, grayPairs(t, ns), "high latency at the", "no node is blamed for the link")

	m.setLinkDelay(nil)
	healed := time.Now()
	require.Eventually(t, func() bool {
		c := zoneDegraded(t, za, zb)
		return c != nil && c.Status == metav1.ConditionFalse
	}, 120*time.Second, 250*time.Millisecond, "the healed zone pair's Degraded condition never turns False")
	t.Logf("FIGURE zone pair Degraded=False %v after the heal", time.Since(healed).Round(time.Second))
	require.Equal(t, v1alpha1.ReasonWithinThresholds, zoneDegraded(t, za, zb).Reason)
	// Its 30 objects would stretch the heartbeat of every later test's writer, which
	// knows every netpulse object in the cluster (TestLeaderElectionHandover).
	require.NoError(t, pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
}
