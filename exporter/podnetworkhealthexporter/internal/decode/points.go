// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/pdatautil"
)

// Reading pod_probe's data points: identities, targets, values and histograms.

// isTrue reads a boolean attribute (absent or not a bool: false).
func isTrue(attrs pcommon.Map, key string) bool {
	v, ok := attrs.Get(key)
	return ok && v.Type() == pcommon.ValueTypeBool && v.Bool()
}

func str(attrs pcommon.Map, key string) string {
	v, ok := attrs.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		return ""
	}
	return v.Str()
}

// sourceOf reads the source pod from the Resource; all of namespace, name and UID are
// required (the object lives in the namespace, is named after the pod and owned by its UID).
func sourceOf(attrs pcommon.Map) (observation.Source, bool) {
	s := observation.Source{
		Namespace: str(attrs, contract.K8sNamespaceName),
		Name:      str(attrs, contract.K8sPodName),
		UID:       str(attrs, contract.K8sPodUID),
		Node:      str(attrs, contract.K8sNodeName),
		IP:        str(attrs, contract.K8sPodIP),
		Zone:      str(attrs, contract.CloudZone),
	}
	return s, s.Namespace != "" && s.Name != "" && s.UID != ""
}

// targetOf reads the target and probe type from data point attributes.
func targetOf(attrs pcommon.Map) (observation.Target, string, SkipReason) {
	t := observation.Target{Address: str(attrs, contract.DestinationAddress)}
	if t.Address == "" {
		return t, "", SkipMissingTarget
	}
	probe := str(attrs, contract.ProbeType)
	if observation.ProbeIndex(probe) < 0 {
		return t, "", SkipUnknownProbeType
	}
	if v, ok := attrs.Get(contract.DestinationPort); ok {
		switch v.Type() {
		case pcommon.ValueTypeInt:
			if p := v.Int(); p > 0 && p <= 65535 {
				t.Port = p
			}
		case pcommon.ValueTypeStr:
			if p, err := strconv.ParseInt(v.Str(), 10, 64); err == nil && p > 0 && p <= 65535 {
				t.Port = p
			}
		}
	}
	if e := str(attrs, contract.TargetEndpoint); len(e) <= maxEndpointLen {
		t.Endpoint = e
	}
	dst := func(key string) string { return str(attrs, contract.DestinationPrefix+key) }
	t.Namespace, t.Name, t.UID = dst(contract.K8sNamespaceName), dst(contract.K8sPodName), dst(contract.K8sPodUID)
	t.Node, t.Zone = dst(contract.K8sNodeName), dst(contract.CloudZone)
	switch {
	case str(attrs, contract.TargetKind) == contract.TargetKindNode && t.Node != "":
		t.Kind = observation.TargetNode
		t.Namespace, t.Name, t.UID = "", t.Node, ""
	case t.UID != "" || (t.Name != "" && t.Namespace != ""):
		t.Kind = observation.TargetPod
	case t.Node != "":
		t.Kind = observation.TargetNode
		t.Namespace, t.Name, t.UID = "", t.Node, ""
	default:
		t.Kind = observation.TargetExternal
		t.Namespace, t.Name, t.UID = "", "", ""
	}
	if t.Kind != observation.TargetExternal {
		t.Endpoint = "" // pods and nodes are one target whatever the URL
	}
	return t, probe, ""
}

// maxEndpointLen bounds netpulse.target.endpoint (the gateway's admission refuses longer).
const maxEndpointLen = 512

// streamKey identifies a cumulative stream: the source pod, the metric and the data point
// attributes except the target identity that k8s_net_attributes adds (destination.* other
// than destination.address and destination.port): enrichment that appears or changes later
// must not make a stream look new.
func streamKey(src *observation.Source, metric string, attrs pcommon.Map) string {
	type kv struct{ k, v string }
	var kvs []kv
	attrs.Range(func(k string, v pcommon.Value) bool {
		if strings.HasPrefix(k, contract.DestinationPrefix) && k != contract.DestinationAddress && k != contract.DestinationPort {
			return true
		}
		kvs = append(kvs, kv{k, v.AsString()})
		return true
	})
	slices.SortFunc(kvs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	var b strings.Builder
	for _, s := range []string{src.Namespace, src.Name, src.UID, metric} {
		b.WriteString(strconv.Itoa(len(s)) + ":" + s)
	}
	for _, e := range kvs {
		b.WriteString(strconv.Itoa(len(e.k)) + ":" + e.k + strconv.Itoa(len(e.v)) + ":" + e.v)
	}
	return b.String()
}

func finiteNonNegative(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

func numberValue(dp pmetric.NumberDataPoint) (float64, bool) {
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		return float64(dp.IntValue()), true
	case pmetric.NumberDataPointValueTypeDouble:
		return dp.DoubleValue(), true
	}
	return 0, false
}

func appendPoints(pts []point, m pmetric.Metric, kind metricKind, src observation.Source, res *DecodeResult) []point {
	base := func(attrs pcommon.Map, ts, start pcommon.Timestamp) (point, bool) {
		t, probe, reason := targetOf(attrs)
		if reason != "" {
			res.Skipped[reason]++
			return point{}, false
		}
		p := point{
			kind: kind, src: src, target: t, ts: ts, start: start, stable: isTrue(attrs, contract.PairStable),
			leaving: isTrue(attrs, contract.DestinationPodLeaving), disruption: disruptionOf(attrs),
			group: groupKey{ns: src.Namespace, pod: src.Name, uid: src.UID, addr: t.Address, port: t.Port, endpoint: t.Endpoint, probe: probe, ts: ts},
		}
		if kind == mPathMTU {
			// The outcome rides in errorType (a point is copied a lot; no field of its own).
			if p.errorType = str(attrs, contract.PathMTUStatus); !slices.Contains(contract.PathMTUStatuses[:], p.errorType) {
				res.Skipped[SkipInvalidValue]++
				return point{}, false
			}
		}
		if kind == mErrors {
			p.errorType = str(attrs, contract.ErrorType)
			if p.errorType == "" {
				p.errorType = contract.ErrorTypeOther
			}
		}
		return p, true
	}

	if kind == mDuration {
		if m.Type() != pmetric.MetricTypeExponentialHistogram {
			res.Skipped[SkipUnsupportedType] += pdatautil.DataPointCount(m)
			return pts
		}
		eh := m.ExponentialHistogram()
		cumulative := eh.AggregationTemporality() != pmetric.AggregationTemporalityDelta
		dps := eh.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			p, ok := base(dp.Attributes(), dp.Timestamp(), dp.StartTimestamp())
			if !ok {
				continue
			}
			h, ok := histFromPdata(dp)
			if !ok {
				res.Skipped[SkipInvalidValue]++
				continue
			}
			p.hist, p.cumulative = h, cumulative
			if cumulative {
				p.stream = streamKey(&src, m.Name(), dp.Attributes())
			}
			pts = append(pts, p)
		}
		return pts
	}

	var dps pmetric.NumberDataPointSlice
	cumulative := false
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps = m.Gauge().DataPoints()
		cumulative = kind == mSent || kind == mLost || kind == mErrors // a counter read as a gauge
	case pmetric.MetricTypeSum:
		dps = m.Sum().DataPoints()
		cumulative = m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta
	default:
		res.Skipped[SkipUnsupportedType] += pdatautil.DataPointCount(m)
		return pts
	}
	counter := kind == mSent || kind == mLost || kind == mErrors
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		p, ok := base(dp.Attributes(), dp.Timestamp(), dp.StartTimestamp())
		if !ok {
			continue
		}
		v, ok := numberValue(dp)
		if !ok || !finiteNonNegative(v) || (kind == mLoss && v > 1) || (counter && v > 1<<53) {
			res.Skipped[SkipInvalidValue]++
			continue
		}
		p.value = v
		if counter {
			p.cumulative = cumulative
			if cumulative {
				p.stream = streamKey(&src, m.Name(), dp.Attributes())
			}
		}
		pts = append(pts, p)
	}
	return pts
}

// maxAcceptedBuckets rejects larger histograms: the receiver's go-expohisto never holds more
// than 160 buckets (receiver/podprobereceiver maxHistogramBuckets).
const maxAcceptedBuckets = 160

// histFromPdata converts the positive range of an exponential histogram point.
func histFromPdata(dp pmetric.ExponentialHistogramDataPoint) (observation.Histogram, bool) {
	scale := dp.Scale()
	if scale < observation.MinScale || scale > observation.MaxScale {
		return observation.Histogram{}, false
	}
	neg := dp.Negative().BucketCounts()
	for i := 0; i < neg.Len(); i++ {
		if neg.At(i) != 0 {
			return observation.Histogram{}, false // durations are never negative
		}
	}
	pos := dp.Positive()
	n := pos.BucketCounts().Len()
	if n > maxAcceptedBuckets || int64(pos.Offset())+int64(n) > math.MaxInt32 {
		return observation.Histogram{}, false
	}
	h := observation.Histogram{Scale: scale, ZeroCount: dp.ZeroCount(), Offset: pos.Offset(), Counts: pos.BucketCounts().AsRaw()}
	total := h.ZeroCount
	for _, c := range h.Counts {
		if total+c < total || total+c > 1<<53 {
			return observation.Histogram{}, false
		}
		total += c
	}
	for _, v := range []struct {
		has bool
		v   float64
	}{{dp.HasMin(), dp.Min()}, {dp.HasMax(), dp.Max()}, {dp.HasSum(), dp.Sum()}} {
		if v.has && !finiteNonNegative(v.v) {
			return observation.Histogram{}, false
		}
	}
	h.Trim()
	if total == 0 {
		return observation.Histogram{Scale: scale}, true
	}
	lo, hi := h.BucketRange()
	if len(h.Counts) > 0 {
		if l, _ := observation.BucketBounds(scale, h.Offset); l <= 0 || math.IsInf(hi, 0) {
			return observation.Histogram{}, false // bucket range outside float64
		}
	}
	h.Min, h.Max = lo, hi
	if dp.HasMin() && dp.Min() >= lo && dp.Min() <= hi {
		h.Min = dp.Min()
	}
	if dp.HasMax() && dp.Max() >= h.Min && dp.Max() <= hi {
		h.Max = dp.Max()
	}
	return h, true
}

// disruptionOf is the destination's known disruption (contract.DestinationDisruption, set
// by k8s_net_attributes from the cluster's own state), "" when absent or not a known value.
func disruptionOf(attrs pcommon.Map) string {
	if d := str(attrs, contract.DestinationDisruption); slices.Contains(contract.Disruptions[:], d) {
		return d
	}
	return ""
}
