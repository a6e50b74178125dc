// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	corev1 "k8s.io/api/core/v1"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// registerGauges registers the exporter's observable gauges: per-target verdicts, observers
// reporting, node problems.
func (e *pnhExporter) registerGauges() error {
	tb := e.tb
	// The per-target verdicts, one series per target and family (O(N)): what the gateway
	// exports instead of a series per pair.
	observeTargets := func(field func(verdict.TargetStatus) (int64, bool)) metric.Int64Callback {
		return func(_ context.Context, o metric.Int64Observer) error {
			for _, t := range e.engine.Targets() {
				v, ok := field(t)
				if !ok {
					continue
				}
				o.Observe(v, metric.WithAttributes(
					attribute.String("netpulse.target.kind", string(t.Key.Kind)),
					attribute.String("netpulse.target.namespace", t.Key.Namespace),
					attribute.String("netpulse.target.name", targetName(t.Key)),
					attribute.String("netpulse.target.node", t.Target.Node),
					attribute.String("netpulse.target.zone", t.Target.Zone),
					attribute.String("network.type", t.Key.Family)))
			}
			return nil
		}
	}
	if err := tb.RegisterPodNetworkHealthTargetReachableCallback(observeTargets(func(t verdict.TargetStatus) (int64, bool) {
		switch t.Verdict {
		case observation.VerdictReachable:
			return 1, true
		case observation.VerdictUnreachable:
			return 0, true
		}
		return 0, false
	})); err != nil {
		return err
	}
	if err := tb.RegisterPodNetworkHealthTargetFailingObserversCallback(observeTargets(func(t verdict.TargetStatus) (int64, bool) {
		return int64(t.Failing), t.Verdict != observation.VerdictUnknown
	})); err != nil {
		return err
	}
	// Gray: the targets' loss (O(N)); the verdicts' gauges in registerGrayGauges.
	if err := tb.RegisterPodNetworkHealthTargetLossRatioCallback(func(_ context.Context, o metric.Float64Observer) error {
		for _, g := range e.engine.GrayStatuses() {
			if g.Status.Sent == 0 {
				continue
			}
			o.Observe(float64(g.Status.Lost)/float64(g.Status.Sent), metric.WithAttributes(
				attribute.String("netpulse.target.kind", string(g.Key.Kind)),
				attribute.String("netpulse.target.namespace", g.Key.Namespace),
				attribute.String("netpulse.target.name", targetName(g.Key)),
				attribute.String("netpulse.target.node", g.Node),
				attribute.String("netpulse.target.zone", g.Zone),
				attribute.String("network.type", g.Key.Family)))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := e.registerGrayGauges(); err != nil {
		return err
	}
	if err := tb.RegisterPodNetworkHealthObserverReportingCallback(func(_ context.Context, o metric.Int64Observer) error {
		for _, ob := range e.engine.Observers() {
			v := int64(1)
			if ob.Silent {
				v = 0
			}
			o.Observe(v, metric.WithAttributes(
				attribute.String("netpulse.observer.namespace", ob.Namespace),
				attribute.String("netpulse.observer.name", ob.Name),
				attribute.String("netpulse.observer.node", ob.Node)))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := tb.RegisterPodNetworkHealthZonePairReachableCallback(func(_ context.Context, o metric.Int64Observer) error {
		for _, p := range e.zones.Pairs() {
			v := int64(1)
			if p.Cut {
				v = 0
			}
			o.Observe(v, metric.WithAttributes(attribute.String("netpulse.source.zone", p.From), attribute.String("netpulse.target.zone", p.To)))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := tb.RegisterPodNetworkHealthNodeProblemCallback(func(_ context.Context, o metric.Int64Observer) error {
		for node, status := range e.nodes.Statuses() {
			v := int64(0)
			if status == corev1.ConditionTrue {
				v = 1
			} else if status != corev1.ConditionFalse {
				continue
			}
			o.Observe(v, metric.WithAttributes(attribute.String("netpulse.target.node", node)))
		}
		return nil
	}); err != nil {
		return err
	}
	return nil
}

// registerGrayGauges registers the gray verdicts' gauges: the nodes blamed (at most one
// series per node), the zone pairs blamed (at most Z x (Z-1)), and whether the gray picture
// is cluster-wide.
func (e *pnhExporter) registerGrayGauges() error {
	tb := e.tb
	if err := tb.RegisterPodNetworkHealthNodeGrayCallback(func(_ context.Context, o metric.Int64Observer) error {
		nodes, _ := e.engine.GrayNodes()
		for _, n := range nodes {
			o.Observe(1, metric.WithAttributes(attribute.String("netpulse.node.name", n.Node),
				attribute.String("netpulse.gray.reason", n.Reason), attribute.String("netpulse.gray.side", n.Side)))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := tb.RegisterPodNetworkHealthZonePairGrayCallback(func(_ context.Context, o metric.Int64Observer) error {
		for _, z := range e.engine.GrayZones() {
			o.Observe(1, metric.WithAttributes(attribute.String("netpulse.source.zone", z.FromZone),
				attribute.String("netpulse.target.zone", z.ToZone), attribute.String("netpulse.gray.reason", z.Reason)))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := tb.RegisterPodNetworkHealthGraySystemicCallback(func(_ context.Context, o metric.Int64Observer) error {
		v := int64(0)
		if _, systemic := e.engine.GrayNodes(); systemic {
			v = 1
		}
		o.Observe(v)
		return nil
	}); err != nil {
		return err
	}
	return nil
}
