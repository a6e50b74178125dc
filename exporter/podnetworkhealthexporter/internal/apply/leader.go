// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"time"

	"context"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lease names the writer Lease and this candidate (the exporter's leader_election).
type Lease struct {
	LeaseName, LeaseNamespace string
	// Identity of this candidate: its pod name.
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// LeaderLabel, when set, is put on this replica's own pod while it holds the Lease.
	LeaderLabel string
}

// LeaderLoop campaigns for the writer Lease until ctx ends: lead(ctx) is called when this
// instance acquires it and must return at once (work it starts stops when its ctx is
// cancelled, on losing the lease); the lease is
// released on shutdown so another replica takes over within one retry period. The returned
// channel closes when the loop and any lead call have returned. lost is called when the
// lease is lost while ctx is still live (not released at shutdown).
func LeaderLoop(ctx context.Context, client kubernetes.Interface, cfg Lease, logger *zap.Logger, lead func(context.Context), lost func()) (<-chan struct{}, error) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: cfg.LeaseName, Namespace: cfg.LeaseNamespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            "pod_network_health",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				logger.Info("pod_network_health: acquired the writer lease", zap.String("identity", cfg.Identity))
				lead(leadCtx)
			},
			OnStoppedLeading: func() {
				if ctx.Err() != nil {
					logger.Info("pod_network_health: released the writer lease", zap.String("identity", cfg.Identity))
					return
				}
				logger.Error("pod_network_health: lost the writer lease (it could not be renewed within renew_deadline)", zap.String("identity", cfg.Identity))
				lost()
			},
			OnNewLeader: func(identity string) {
				if identity != cfg.Identity {
					logger.Info("pod_network_health: another replica writes", zap.String("leader", identity))
				}
			},
		},
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Run returns when leadership is lost; campaign again until shutdown.
		for ctx.Err() == nil {
			elector.Run(ctx)
		}
	}()
	return done, nil
}

// LabelOwnPod sets (or, with value "", removes) the leader label on this replica's pod with
// a JSON merge patch, so only the Lease holder matches the gateway Service's selector.
func LabelOwnPod(ctx context.Context, client kubernetes.Interface, cfg Lease, value string) error {
	var v any = value
	if value == "" {
		v = nil // merge patch: delete the key
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{cfg.LeaderLabel: v}}})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Pods(cfg.LeaseNamespace).Patch(ctx, cfg.Identity, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("label pod %s/%s %s=%q: %w", cfg.LeaseNamespace, cfg.Identity, cfg.LeaderLabel, value, err)
	}
	return nil
}
