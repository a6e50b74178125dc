// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package pdatautil holds small pdata helpers more than one component needs.
package pdatautil

import "go.opentelemetry.io/collector/pdata/pmetric"

// DataPointCount is the number of data points of one metric, whatever its type.
func DataPointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}
