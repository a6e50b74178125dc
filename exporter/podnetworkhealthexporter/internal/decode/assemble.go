// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// Assembling the points of one round into Observations.

// builder collects the points of one Observation.
type builder struct {
	obs                     observation.Observation
	hasStatus, hasLossGauge bool
	hasSent, hasLost        bool
	lossGauge               float64
	errs                    map[string]float64
}

// assemble groups points into Observations.
func assemble(pts []point) []observation.Observation {
	groups := map[groupKey]*builder{}
	var order []*builder
	for i := range pts {
		p := &pts[i]
		if p.dropped {
			continue
		}
		b := groups[p.group]
		if b == nil {
			b = &builder{}
			b.obs.Source = p.src
			b.obs.Target = p.target
			b.obs.ProbeType = p.group.probe
			b.obs.Timestamp = p.ts.AsTime()
			groups[p.group] = b
			order = append(order, b)
		} else {
			observation.MergeTarget(&b.obs.Target, &p.target)
		}
		b.obs.Stable = b.obs.Stable || p.stable
		b.obs.TargetLeaving = b.obs.TargetLeaving || p.leaving
		if b.obs.TargetDisruption == "" {
			b.obs.TargetDisruption = p.disruption
		}
		switch p.kind {
		case mStatus:
			b.obs.Success = b.obs.Success || p.value > 0 // duplicates: any success counts
			b.hasStatus = true
		case mLoss:
			b.lossGauge, b.hasLossGauge = p.value, true
		case mSent:
			b.obs.Sent += uint64(p.value)
			b.hasSent = true
		case mLost:
			b.obs.Lost += uint64(p.value)
			b.hasLost = true
		case mErrors:
			if p.value > 0 {
				if b.errs == nil {
					b.errs = map[string]float64{}
				}
				b.errs[p.errorType] += p.value
			}
		case mDuration:
			b.obs.RTT.Merge(&p.hist)
		case mPathMTU:
			if p.value >= 0 && p.value <= 65535 {
				b.obs.PathMTU = observation.PathMTU{Status: p.errorType, Bytes: int(p.value)}
			}
		}
	}
	out := make([]observation.Observation, 0, len(order))
	for _, b := range order {
		if o, ok := b.finish(); ok {
			out = append(out, o)
		}
	}
	slices.SortStableFunc(out, compareObservations)
	return out
}

// finish infers what the points of a group did not say directly. ok is false when the
// group says nothing about the outcome of the round.
func (b *builder) finish() (observation.Observation, bool) {
	o := b.obs
	if b.hasLost && !b.hasSent {
		o.Lost = 0 // a lost count without its sent count cannot be used
	}
	if o.Lost > o.Sent {
		o.Lost = o.Sent
	}
	switch {
	case o.Sent > 0:
		o.LossRatio, o.HasLoss = float64(o.Lost)/float64(o.Sent), true
	case b.hasLossGauge:
		o.LossRatio, o.HasLoss = b.lossGauge, true
	}
	errType := ""
	best := 0.0
	for et, n := range b.errs {
		if n > best || (n == best && et < errType) {
			errType, best = et, n
		}
	}
	if !b.hasStatus {
		switch {
		case errType != "":
			o.Success = false
		case o.Sent > 0:
			o.Success = o.Lost < o.Sent
		case b.hasLossGauge:
			o.Success = b.lossGauge < 1
		case o.RTT.Count() > 0:
			o.Success = true
		default:
			return o, false
		}
	}
	if o.Success {
		return o, true
	}
	o.ErrorType = errType
	what := errType
	if what == "" {
		what = "failed"
	}
	o.Message = fmt.Sprintf("%s %s: %s", o.ProbeType, o.Target.TargetText(), what)
	if o.Sent > 0 {
		o.Message += fmt.Sprintf(" (%d of %d echoes lost)", o.Lost, o.Sent)
	}
	return o, true
}

func compareObservations(a, b observation.Observation) int {
	for _, c := range []int{
		strings.Compare(a.Source.Namespace, b.Source.Namespace),
		strings.Compare(a.Source.Name, b.Source.Name),
		strings.Compare(a.Source.UID, b.Source.UID),
		strings.Compare(a.Target.Address, b.Target.Address),
		cmp.Compare(a.Target.Port, b.Target.Port),
		strings.Compare(a.Target.Endpoint, b.Target.Endpoint),
		cmp.Compare(observation.ProbeIndex(a.ProbeType), observation.ProbeIndex(b.ProbeType)),
		a.Timestamp.Compare(b.Timestamp),
	} {
		if c != 0 {
			return c
		}
	}
	return 0
}
