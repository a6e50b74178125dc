// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pnhexporter "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
)

// statusHost is a component.Host that records the status events components report (the
// collector's service acts on a fatal one by shutting down).
type statusHost struct {
	component.Host
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (h *statusHost) Report(e *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *statusHost) fatal() *componentstatus.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.events {
		if e.Status() == componentstatus.StatusFatalError {
			return e
		}
	}
	return nil
}

// TestLostLeaseIsFatal: a replica whose Lease is taken while it runs (here another holder
// writes itself into the Lease, as a replica on the far side of a partition from this one
// would after lease_duration) reports a fatal error, so the collector exits and its agents
// reconnect to the new writer; a replica that releases the Lease at shutdown does not.
func TestLostLeaseIsFatal(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	cfg := testConfig("pnh-lost")
	cfg.LeaderElection.Identity = "gw-lost"
	require.NoError(t, cfg.Validate())
	exp, err := pnhexporter.NewFactory().CreateMetrics(ctx, exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	host := &statusHost{Host: componenttest.NewNopHost()}
	require.NoError(t, exp.Start(ctx, host))
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()

	leases := admin.CoordinationV1().Leases("netpulse")
	require.Eventually(t, func() bool {
		l, err := leases.Get(ctx, "pnh-lost", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "gw-lost"
	}, 20*time.Second, 100*time.Millisecond, "the exporter never took the lease")
	require.Nil(t, host.fatal(), "no fatal error while leading")

	// Another holder, renewed now and for a minute: this replica's next renewals fail.
	require.Eventually(t, func() bool {
		l, err := leases.Get(ctx, "pnh-lost", metav1.GetOptions{})
		if err != nil {
			return false
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = ptr.To("thief"), &now, &now
		l.Spec.LeaseDurationSeconds = ptr.To[int32](60)
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err == nil // a conflict with the replica's own renewal: read and try again
	}, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return host.fatal() != nil }, 20*time.Second, 100*time.Millisecond,
		"losing the lease while running must be fatal")
	require.ErrorContains(t, host.fatal().Err(), "lost the writer lease")
	l, err := leases.Get(ctx, "pnh-lost", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "thief", *l.Spec.HolderIdentity, "the replica must not take the lease back by force")
}

// TestReleasedLeaseIsNotFatal: shutdown releases the Lease without a fatal error.
func TestReleasedLeaseIsNotFatal(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	cfg := testConfig("pnh-released")
	cfg.LeaderElection.Identity = "gw-released"
	exp, err := pnhexporter.NewFactory().CreateMetrics(ctx, exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	host := &statusHost{Host: componenttest.NewNopHost()}
	require.NoError(t, exp.Start(ctx, host))
	leases := admin.CoordinationV1().Leases("netpulse")
	require.Eventually(t, func() bool {
		l, err := leases.Get(ctx, "pnh-released", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "gw-released"
	}, 20*time.Second, 100*time.Millisecond)
	require.NoError(t, exp.Shutdown(ctx))
	require.Nil(t, host.fatal(), "a released lease is not an error")
}
