// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"

	"go.uber.org/zap"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// The declared checks (checks.go and its tests, moved out of this package by the checks
// work of issue #29) still call the writer by its old, unexported names. These adapters
// keep them compiling until they move; nothing else uses them.

// writer is the apply stage's Writer under its old name.
type writer struct{ *apply.Writer }

// desired is apply.Desired under its old, unexported field names.
type desired struct {
	obj     *v1alpha1.PodNetworkHealth
	reason  string
	delete  bool
	restate func(*v1alpha1.PodNetworkHealthStatus)
}

// writeResult is apply.WriteResult under its old, unexported field names.
type writeResult struct {
	key      string
	status   *v1alpha1.PodNetworkHealthStatus
	reason   string
	priority writequeue.Priority
	err      error
	rejected bool
}

// defaultCheckShare is apply.DefaultCheckShare.
const defaultCheckShare = apply.DefaultCheckShare

func newWriter(client versioned.Interface, namespace string, qps float64, burst int, logger *zap.Logger, done func(writeResult)) *writer {
	return &writer{apply.NewWriter(client, namespace, qps, burst, logger, func(r apply.WriteResult) {
		done(writeResult{key: r.Key, status: r.Status, reason: r.Reason, priority: r.Priority, err: r.Err, rejected: r.Rejected})
	})}
}

func (w *writer) set(d *desired, p ...writequeue.Priority) {
	w.Set(&apply.Desired{Obj: d.obj, Reason: d.reason, Delete: d.delete, Restate: d.restate}, p...)
}

func (w *writer) enqueue(key string, p writequeue.Priority, do func(context.Context) error, reason string) {
	w.Enqueue(key, p, do, reason)
}

func (w *writer) run(ctx context.Context, n int)                   { w.Run(ctx, n) }
func (w *writer) stop()                                            { w.Stop() }
func (w *writer) pendingCount() int                                { return w.PendingCount() }
func (w *writer) pendingByPriority() [writequeue.NumPriorities]int { return w.PendingByPriority() }

// rejected is apply.Rejected.
func rejected(err error) bool { return apply.Rejected(err) }
