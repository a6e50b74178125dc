// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package pdatautil

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestDataPointCount(t *testing.T) {
	ms := pmetric.NewMetricSlice()
	ms.AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	s := ms.AppendEmpty().SetEmptySum().DataPoints()
	s.AppendEmpty()
	s.AppendEmpty()
	h := ms.AppendEmpty().SetEmptyHistogram().DataPoints()
	for range 3 {
		h.AppendEmpty()
	}
	eh := ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints()
	for range 4 {
		eh.AppendEmpty()
	}
	sm := ms.AppendEmpty().SetEmptySummary().DataPoints()
	for range 5 {
		sm.AppendEmpty()
	}
	ms.AppendEmpty() // no type
	for i, want := range []int{1, 2, 3, 4, 5, 0} {
		require.Equal(t, want, DataPointCount(ms.At(i)), "metric %d", i)
	}
}
