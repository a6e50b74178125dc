// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/livematrix"
)

// recordLive feeds the connectivity view's live matrix (internal/livematrix: the newest
// result per observer and target node, rotating probes included) with the observations
// the engine accepted. Nothing when no netpulse_view runs in this collector: the view
// owns the store and its bounds. A row is the observation's source node, which
// require_authenticated_observers binds to the authenticated caller (binding.go), so an
// agent writes its own row only.
func (e *pnhExporter) recordLive(obs []observation.Observation, now time.Time) {
	s := e.live.Store()
	if s == nil || len(obs) == 0 {
		return
	}
	samples := make([]livematrix.Sample, 0, len(obs))
	for i := range obs {
		o := &obs[i]
		if !e.engine.Usable(o, now) {
			continue
		}
		var target string
		switch o.Target.Kind {
		case observation.TargetPod:
			target = o.Target.Node
		case observation.TargetNode:
			target = o.Target.Name
			if target == "" {
				target = o.Target.Node
			}
		default:
			continue // external targets have no column
		}
		var rtt time.Duration
		if o.Success {
			if v, ok := o.RTT.Quantile(0.5); ok {
				rtt = time.Duration(v * float64(time.Second))
			}
		}
		samples = append(samples, livematrix.Sample{Observer: o.Source.Node, Target: target, At: o.Timestamp,
			Probe: o.ProbeType, OK: o.Success, RTT: rtt, Stable: o.Stable})
	}
	s.Record(now, samples...)
}
