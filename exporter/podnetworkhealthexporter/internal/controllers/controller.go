// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package controllers holds one controller per kind of object the pod_network_health
// exporter writes: pair objects (pairs.go), node conditions (nodes.go, graynodes.go),
// zone objects (zones.go) and the readiness gate (readiness.go); the declared checks'
// controller (package checks) has the same shape. Each is the I/O edge of its kind
// (informers, the writer's calls, logs and telemetry) around a pure core in package plan
// that decides what to write; the exporter's root runs them all through one interface,
// Controller, and knows none of them by kind.
package controllers

import (
	"context"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
)

// Controller is one kind of written object, as the exporter's lifecycle drives it. The
// exporter builds its controllers with its configuration, then calls, in list order:
//
//   - Start at the exporter's start, on every replica, after the writer exists: informers
//     begin (a standby keeps its caches warm);
//   - Lead when this replica begins a leadership term, once the writer's informer has
//     synced and before its workers run: a controller resumes from what the API holds;
//   - Reconcile every reconcile tick (1 s) of the term: what to write is queued on the
//     writer, under its one budget;
//   - EndTerm when the term ends: the next one starts from the API again;
//   - Shutdown once, after the writer stopped. Safe without Start and twice.
//
// checks.Controller has this shape too.
type Controller interface {
	Start(kube kubernetes.Interface, nc versioned.Interface)
	Lead(ctx context.Context)
	Reconcile(ctx context.Context, now time.Time)
	EndTerm()
	Shutdown()
}

// Deps is what the exporter gives its controllers: functions and shared parts, no pointer
// to the exporter.
type Deps struct {
	Logger    *zap.Logger
	Telemetry *metadata.TelemetryBuilder
	// Engine is the verdict stage with the pairs' write policy (pure): the exporter feeds
	// it every observation; the controllers reconcile and judge with it.
	Engine *plan.Engine
	// Writer is the one writer; the exporter builds it at start, before any Start.
	Writer func() *apply.Writer
	// PairEvents writes the pairs' Events under each source's share and the Event limit
	// (events.per_minute; nothing without events.enabled).
	PairEvents func([]plan.Event)
	// Event writes one Event about obj at Event priority under the Event limit
	// (events.per_minute), which drops what exceeds it; nothing without events.enabled.
	Event func(obj corev1.ObjectReference, typ, reason, msg string, at time.Time)
	// Owns says whether a node is this gateway shard's (nil: every node is).
	Owns func(node string) bool
}

func (d Deps) owns(node string) bool { return d.Owns == nil || d.Owns(node) }

// conditionsEvery is how often node and pod conditions are judged again without a
// per-target verdict change (min_hold expiry, suppression).
const conditionsEvery = 5 * time.Second

// cadence is when node and pod conditions are judged: at once after a per-target verdict
// change (the decision costs O(evidence)), every conditionsEvery otherwise. Every
// controller that follows it judges on the same ticks.
type cadence struct {
	last time.Time
	seen uint64 // plan.Engine.TargetChanges at the last judgement
}

// due reports whether to judge at now, given the engine's count of target changes.
func (c *cadence) due(now time.Time, changes uint64) bool {
	if changes == c.seen && now.Sub(c.last) < conditionsEvery {
		return false
	}
	c.last, c.seen = now, changes
	return true
}

// reset starts a term: the first tick judges.
func (c *cadence) reset() { c.last = time.Time{} }
