// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Every Lease renewal is an API write (issue #39: "count every write, Leases included"):
// an idle writer, with no agent and no object, updates its Lease once per retry_period, so
// a shard costs the write goal 1/retry_period whatever it judges (0.5/s at the shipped 2 s;
// docs/sharding.md). Counted from a watch of the Lease on the real API server, for two
// retry periods in the same run.
func TestLeaseRenewalsAreWrites(t *testing.T) {
	requireCluster(t)
	const window = 8 * time.Second
	count := func(lease string, retry time.Duration) int {
		cfg := testConfig(lease)
		cfg.LeaderElection.RetryPeriod = retry
		cfg.LeaderElection.RenewDeadline = 4 * retry
		cfg.LeaderElection.LeaseDuration = 6 * retry
		exp := startExporter(t, cfg, "gw-"+lease, nil)
		defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.Eventually(t, func() bool {
			l, err := admin.CoordinationV1().Leases("netpulse").Get(ctx, lease, metav1.GetOptions{})
			return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "gw-"+lease
		}, 20*time.Second, 100*time.Millisecond, "the writer never held its Lease")
		w, err := admin.CoordinationV1().Leases("netpulse").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + lease})
		require.NoError(t, err)
		defer w.Stop()
		updates := 0
		end := time.After(window)
		for {
			select {
			case ev := <-w.ResultChan():
				if _, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type == watch.Modified {
					updates++
				}
			case <-end:
				t.Logf("FIGURE an idle writer with retry_period %v: %d Lease updates in %v (%.2f writes/s)", retry, updates, window, float64(updates)/window.Seconds())
				return updates
			}
		}
	}
	fast := count("pnh-lease-fast", 500*time.Millisecond)
	slow := count("pnh-lease-slow", 2*time.Second)
	assert.GreaterOrEqual(t, slow, 2, "renewals at 2 s")
	assert.Greater(t, fast, 2*slow, "a 4x shorter retry_period renews several times as often")
	assert.LessOrEqual(t, slow, int(window/(2*time.Second))+2, "no writes beyond the renewals")
}
