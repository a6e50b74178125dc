// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package relay forwards what agents send one gateway shard to the shards that own its
// targets, so that each agent holds one connection (to any shard) instead of one to every
// shard. Split, the pure core, divides a request by owner; Forwarder sends each owner its
// part over one gRPC connection per owner, bounded and counted.
package relay // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/relay"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/identity"
)

// Owner says which shard owns a data point (by its attributes), or -1 for every shard (an
// agent's heartbeat: each shard judges whether the agent reports).
type Owner func(metric string, attrs pcommon.Map) int

// Split returns, for each shard but self, the data points of md that shard owns (nil where
// it owns none), with each Resource carrying the identity the caller authenticated
// (identity.SetRelayed: what the owner believes of it). Only the metrics keep selects are
// forwarded. md is not modified; the parts share nothing with it.
func Split(md pmetric.Metrics, shards, self int, owner Owner, keep func(metric string) bool, id identity.Identity) []pmetric.Metrics {
	out := make([]pmetric.Metrics, shards)
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		// Per owner: this Resource's copy and, per scope, its copy (made on first use).
		var dstRM []pmetric.ResourceMetrics
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			var dstSM []pmetric.ScopeMetrics
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if !keep(m.Name()) {
					continue
				}
				var dstM []pmetric.Metric
				target := func(s int) pmetric.Metric {
					if dstM == nil {
						dstM = make([]pmetric.Metric, shards)
						if dstSM == nil {
							dstSM = make([]pmetric.ScopeMetrics, shards)
						}
					}
					if dstM[s] != (pmetric.Metric{}) {
						return dstM[s]
					}
					if dstSM[s] == (pmetric.ScopeMetrics{}) {
						if dstRM == nil {
							dstRM = make([]pmetric.ResourceMetrics, shards)
						}
						if dstRM[s] == (pmetric.ResourceMetrics{}) {
							if out[s] == (pmetric.Metrics{}) {
								out[s] = pmetric.NewMetrics()
							}
							r := out[s].ResourceMetrics().AppendEmpty()
							rm.Resource().CopyTo(r.Resource())
							r.SetSchemaUrl(rm.SchemaUrl())
							identity.SetRelayed(r.Resource().Attributes(), id)
							dstRM[s] = r
						}
						d := dstRM[s].ScopeMetrics().AppendEmpty()
						sm.Scope().CopyTo(d.Scope())
						d.SetSchemaUrl(sm.SchemaUrl())
						dstSM[s] = d
					}
					dm := dstSM[s].Metrics().AppendEmpty()
					dm.SetName(m.Name())
					dm.SetDescription(m.Description())
					dm.SetUnit(m.Unit())
					dstM[s] = dm
					return dm
				}
				splitPoints(m, shards, self, owner, target)
			}
		}
	}
	return out
}

// splitPoints appends each data point of m to the metric target gives for its owner
// (every shard's but self's for -1).
func splitPoints(m pmetric.Metric, shards, self int, owner Owner, target func(shard int) pmetric.Metric) {
	each := func(attrs pcommon.Map, put func(shard int)) {
		s := owner(m.Name(), attrs)
		switch {
		case s < 0:
			for o := range shards {
				if o != self {
					put(o)
				}
			}
		case s != self && s < shards:
			put(s)
		}
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps := m.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			each(dps.At(i).Attributes(), func(s int) {
				d := target(s)
				if d.Type() == pmetric.MetricTypeEmpty {
					d.SetEmptyGauge()
				}
				dps.At(i).CopyTo(d.Gauge().DataPoints().AppendEmpty())
			})
		}
	case pmetric.MetricTypeSum:
		dps := m.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			each(dps.At(i).Attributes(), func(s int) {
				d := target(s)
				if d.Type() == pmetric.MetricTypeEmpty {
					d.SetEmptySum().SetAggregationTemporality(m.Sum().AggregationTemporality())
					d.Sum().SetIsMonotonic(m.Sum().IsMonotonic())
				}
				dps.At(i).CopyTo(d.Sum().DataPoints().AppendEmpty())
			})
		}
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			each(dps.At(i).Attributes(), func(s int) {
				d := target(s)
				if d.Type() == pmetric.MetricTypeEmpty {
					d.SetEmptyHistogram().SetAggregationTemporality(m.Histogram().AggregationTemporality())
				}
				dps.At(i).CopyTo(d.Histogram().DataPoints().AppendEmpty())
			})
		}
	case pmetric.MetricTypeExponentialHistogram:
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			each(dps.At(i).Attributes(), func(s int) {
				d := target(s)
				if d.Type() == pmetric.MetricTypeEmpty {
					d.SetEmptyExponentialHistogram().SetAggregationTemporality(m.ExponentialHistogram().AggregationTemporality())
				}
				dps.At(i).CopyTo(d.ExponentialHistogram().DataPoints().AppendEmpty())
			})
		}
	case pmetric.MetricTypeSummary:
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			each(dps.At(i).Attributes(), func(s int) {
				d := target(s)
				if d.Type() == pmetric.MetricTypeEmpty {
					d.SetEmptySummary()
				}
				dps.At(i).CopyTo(d.Summary().DataPoints().AppendEmpty())
			})
		}
	}
}

// StampLogs returns a copy of ld with each Resource carrying id (identity.SetRelayed): the
// declared checks' results a shard forwards to shard 0. ld is not modified.
func StampLogs(ld plog.Logs, id identity.Identity) plog.Logs {
	out := plog.NewLogs()
	ld.CopyTo(out)
	rls := out.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		identity.SetRelayed(rls.At(i).Resource().Attributes(), id)
	}
	return out
}
