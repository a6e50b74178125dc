// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/pdatautil"
)

// SourceOf reads the probing pod from Resource attributes. ok is false when the namespace,
// name or UID is missing: Decode counts such a Resource's data points as missing_source.
func SourceOf(attrs pcommon.Map) (observation.Source, bool) { return sourceOf(attrs) }

// ProbeDataPoints counts the data points of pod_probe metrics in rm: what Decode would
// count under a skip reason if it skipped the whole Resource. Other metrics are not
// counted (Decode ignores them silently).
func ProbeDataPoints(rm pmetric.ResourceMetrics) int {
	n := 0
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if _, known := metricKinds[ms.At(j).Name()]; known {
				n += pdatautil.DataPointCount(ms.At(j))
			}
		}
	}
	return n
}

// IsProbeMetric reports whether Decode reads the metric (a pod_probe metric, the
// heartbeat included).
func IsProbeMetric(name string) bool {
	_, known := metricKinds[name]
	return known || name == contract.MetricRounds
}

// TargetOf reads a data point's target as Decode does; ok is false when Decode would skip
// the point (no address, an unknown probe type).
func TargetOf(attrs pcommon.Map) (observation.Target, bool) {
	t, _, skip := targetOf(attrs)
	return t, skip == ""
}
