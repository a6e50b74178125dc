// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/checks"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/identity"
)

// defaultMaxChecksPerNamespace is checks.max_checks_per_namespace's default.
const defaultMaxChecksPerNamespace = 100

// newCheckController builds the declared checks' controller (internal/checks) from the
// exporter's configuration. It gets funcs, not the exporter: the writer's enqueue (one
// write budget), the Event emitter (CheckEvent priority, nil without events.enabled), the
// identity binding (nil without require_authenticated_observers) and the writer's verdict
// on refused writes.
func newCheckController(e *pnhExporter, cfg ChecksConfig) *checks.Controller {
	d := checks.Deps{
		Logger:    e.logger,
		Telemetry: e.tb,
		Enqueue: func(key string, p writequeue.Priority, write func(context.Context) error, reason string) {
			e.writer.Enqueue(key, p, write, reason)
		},
		Refused: apply.Rejected,
	}
	if e.cfg.Events.Enabled {
		d.Event = func(obj corev1.ObjectReference, typ, reason, msg string, at time.Time) {
			e.enqueueEvent(obj, typ, reason, msg, at, writequeue.CheckEvent)
		}
	}
	if e.cfg.RequireAuthenticatedObservers {
		d.Bind = identity.MatchContext
	}
	return checks.New(checks.Config{
		OpenShift:                  cfg.OpenShift,
		Heartbeat:                  cfg.Heartbeat,
		PruneAfter:                 cfg.PruneAfter,
		MaxChecks:                  cfg.MaxChecks,
		MaxChecksPerNamespace:      cfg.MaxChecksPerNamespace,
		AllowCrossNamespaceTargets: cfg.AllowCrossNamespaceTargets,
		AllowLoopback:              cfg.AllowLoopback,
		AllowLinkLocal:             cfg.AllowLinkLocal,
		EventsPerMinute:            cfg.EventsPerMinute,
		ExplainNetworkPolicy:       cfg.ExplainNetworkPolicy,
	}, d)
}
