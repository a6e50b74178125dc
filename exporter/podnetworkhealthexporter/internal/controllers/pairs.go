// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// Pairs is the PodNetworkHealth controller: the engine's object writes (plan.Engine:
// the verdict stage and plan.PairObjects) rendered (plan.DesiredOf) and handed to the
// writer, the pairs' Events, the logs of verdict changes, and the gauges of the engine and
// the writer.
type Pairs struct {
	d Deps
	// droppedSeen: the writer's drop counts already added to the telemetry; tooSoonSeen
	// the engine's rounds not counted (verdict/pace.go). The lead loop's alone.
	droppedSeen [writequeue.NumPriorities]uint64
	tooSoonSeen uint64
}

// NewPairs returns the pairs' controller.
func NewPairs(d Deps) *Pairs { return &Pairs{d: d} }

// Start has the writer's informer tell the engine of objects deleted by others (the
// garbage collector, a user), so that they are written again when due.
func (c *Pairs) Start(kubernetes.Interface, versioned.Interface) {
	c.d.Writer().OnDeleted(func(o *v1alpha1.PodNetworkHealth) { c.d.Engine.ObjectGone(plan.KeyOfObject(o)) })
}

// Lead resumes the engine from what the API already holds: a restart or a new leader
// neither rewrites unchanged objects nor forgets stale ones.
func (c *Pairs) Lead(context.Context) {
	var existing []verdict.Persisted
	for _, o := range c.d.Writer().Existing() {
		existing = append(existing, plan.PersistedOf(o))
	}
	c.d.Engine.Resume(existing, time.Now())
}

// EndTerm: a future leadership starts from the API's state again.
func (c *Pairs) EndTerm() { c.d.Engine.EndTerm() }

// Shutdown: nothing of its own to stop (the writer's informer is the writer's).
func (c *Pairs) Shutdown() {}

// Reconcile applies what the engine decided: objects (most urgent first) and Events.
func (c *Pairs) Reconcile(ctx context.Context, now time.Time) {
	e, w, tb, logger := c.d.Engine, c.d.Writer(), c.d.Telemetry, c.d.Logger
	res := e.Reconcile(now)
	for _, ow := range res.Objects {
		w.Set(plan.DesiredOf(ow, now), ow.Priority)
	}
	for _, o := range res.ObserverChanges {
		if o.Silent {
			logger.Warn("pod_network_health: observer stopped reporting; its objects read Unknown/ObserverSilent",
				zap.String("observer", o.Namespace+"/"+o.Name), zap.String("node", o.Node), zap.Time("last_seen", o.LastSeen))
		} else {
			logger.Info("pod_network_health: observer reports again", zap.String("observer", o.Namespace+"/"+o.Name), zap.String("node", o.Node))
		}
	}
	for _, t := range res.TargetChanges {
		logger.Info("pod_network_health: target verdict", zap.String("target", t.Key.String()), zap.String("verdict", string(t.Verdict)),
			zap.Int("failing_observer_nodes", t.Failing), zap.Int("reaching_observer_nodes", t.Reaching))
	}
	st := e.Stats()
	if n := st.RoundsTooSoon - c.tooSoonSeen; n > 0 {
		tb.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", "round_too_soon")))
	}
	c.tooSoonSeen = st.RoundsTooSoon
	tb.PodNetworkHealthPairs.Record(ctx, int64(st.Pairs))
	tb.PodNetworkHealthObserversSilent.Record(ctx, int64(st.SilentObservers))
	tb.PodNetworkHealthObjects.Record(ctx, int64(st.Objects))
	tb.PodNetworkHealthPendingObjects.Record(ctx, int64(w.PendingCount()))
	pending, dropped := w.PendingByPriority(), w.DroppedByPriority()
	for p := range writequeue.NumPriorities {
		attrs := metric.WithAttributes(attribute.String("priority", writequeue.Priority(p).String()))
		tb.PodNetworkHealthWritesPending.Record(ctx, int64(pending[p]), attrs)
		if n := dropped[p] - c.droppedSeen[p]; n > 0 {
			tb.PodNetworkHealthWritesDropped.Add(ctx, int64(n), attrs)
		}
	}
	c.droppedSeen = dropped
	for _, g := range res.GrayChanges {
		logger.Info("pod_network_health: target gray verdict", zap.String("target", g.Key.String()), zap.String("node", g.Node),
			zap.Bool("packet_loss", g.Status.Lossy), zap.Bool("high_latency", g.Status.HighLatency),
			zap.String("loss", g.Status.LossText()), zap.Duration("rtt_p50", g.Status.Median), zap.Duration("rtt_baseline", g.Status.Baseline))
	}
	_, forbidden := w.Forbidden()
	tb.PodNetworkHealthWritesForbidden.Record(ctx, int64(forbidden))
	c.d.PairEvents(plan.PairEvents(res.Events))
	c.d.PairEvents(res.Degraded)
}
