// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package pdatautil holds small pdata helpers more than one component needs.
package pdatautil

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

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

// EachPointAttributes calls fn with the attributes of every data point of m, whatever its
// type.
func EachPointAttributes(m pmetric.Metric, fn func(pcommon.Map)) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		for i := range m.Gauge().DataPoints().Len() {
			fn(m.Gauge().DataPoints().At(i).Attributes())
		}
	case pmetric.MetricTypeSum:
		for i := range m.Sum().DataPoints().Len() {
			fn(m.Sum().DataPoints().At(i).Attributes())
		}
	case pmetric.MetricTypeHistogram:
		for i := range m.Histogram().DataPoints().Len() {
			fn(m.Histogram().DataPoints().At(i).Attributes())
		}
	case pmetric.MetricTypeExponentialHistogram:
		for i := range m.ExponentialHistogram().DataPoints().Len() {
			fn(m.ExponentialHistogram().DataPoints().At(i).Attributes())
		}
	case pmetric.MetricTypeSummary:
		for i := range m.Summary().DataPoints().Len() {
			fn(m.Summary().DataPoints().At(i).Attributes())
		}
	}
}
