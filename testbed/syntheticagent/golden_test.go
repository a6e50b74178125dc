// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package syntheticagent

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
)

// goldenDir holds pod_probe's golden rounds (receiver/podprobereceiver/golden_test.go
// writes them from the real emitter; the exporter's decoder reads copies of them).
var goldenDir = filepath.Join("..", "..", "receiver", "podprobereceiver", "testdata", "golden")

// The golden rounds' agent and times (receiver/podprobereceiver/golden_test.go).
var (
	goldenT0         = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	goldenAgentStart = goldenT0.Add(-time.Hour)
)

// goldenPodProbes are the golden rounds' ICMP probes of pods, the only targets the
// synthetic agent emits: the stable pod 10.0.0.7 (answers 2 of 3 echoes, then times out)
// and the rotating pod fd00::8 (answers 3, then 1).
func goldenPodProbes() [2][]Probe {
	start := func(round int) time.Time {
		return goldenT0.Add(time.Duration(round)*10*time.Second - 300*time.Millisecond)
	}
	ms := func(v ...float64) []float64 {
		for i := range v {
			v[i] = (time.Duration(v[i] * float64(time.Millisecond))).Seconds()
		}
		return v
	}
	return [2][]Probe{
		{
			{Addr: "10.0.0.7", Stable: true, Start: start(0), RTTs: ms(1, 2), Lost: 1},
			{Addr: "fd00::8", Start: start(0), RTTs: ms(1.5, 1.7, 1.6)},
		},
		{
			{Addr: "10.0.0.7", Stable: true, Start: start(1), Lost: 3},
			{Addr: "fd00::8", Start: start(1), RTTs: ms(1.9), Lost: 2},
		},
	}
}

// podICMPOnly keeps the points of ICMP probes of pods, and drops the metrics left
// without points.
func podICMPOnly(md pmetric.Metrics) {
	sm := md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	isPodICMP := func(kind, probe string) bool {
		return kind == contract.TargetKindPod && probe == contract.ProbeTypeICMP
	}
	sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
		switch m.Type() {
		case pmetric.MetricTypeGauge:
			m.Gauge().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
				k, _ := dp.Attributes().Get(contract.TargetKind)
				p, _ := dp.Attributes().Get(contract.ProbeType)
				return !isPodICMP(k.Str(), p.Str())
			})
			return m.Gauge().DataPoints().Len() == 0
		case pmetric.MetricTypeSum:
			m.Sum().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
				k, _ := dp.Attributes().Get(contract.TargetKind)
				p, _ := dp.Attributes().Get(contract.ProbeType)
				return !isPodICMP(k.Str(), p.Str())
			})
			return m.Sum().DataPoints().Len() == 0
		case pmetric.MetricTypeExponentialHistogram:
			m.ExponentialHistogram().DataPoints().RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool {
				k, _ := dp.Attributes().Get(contract.TargetKind)
				p, _ := dp.Attributes().Get(contract.ProbeType)
				return !isPodICMP(k.Str(), p.Str())
			})
			return m.ExponentialHistogram().DataPoints().Len() == 0
		}
		return true
	})
}

// TestAgentMatchesTheGoldens drives the synthetic agent with the golden rounds' pod probes
// and requires, value for value, the points pod_probe's own emitter wrote for them into
// the golden fixtures: attributes, values, both timestamps of every point, the cumulative
// counters and histograms across the two rounds, the errors series of the timeout, and the
// metrics' names, descriptions, units and order (not the points' order within a metric,
// which the golden files do not keep). The agent's scope version is the
// distribution's; the goldens carry the test build's.
func TestAgentMatchesTheGoldens(t *testing.T) {
	a := NewAgent("agent-a", "uid-a", "netpulse", "node-a", "10.0.0.1", goldenAgentStart, 1)
	for i, probes := range goldenPodProbes() {
		name := "metrics_round" + string(rune('1'+i)) + ".yaml"
		want, err := golden.ReadMetrics(filepath.Join(goldenDir, name))
		require.NoError(t, err)
		podICMPOnly(want)
		got := a.Emit(goldenT0.Add(time.Duration(i)*10*time.Second), probes)
		require.Equal(t, AgentVersion, got.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope().Version())
		got.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope().SetVersion(want.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope().Version())
		// The golden files keep no order of the points within a metric (contrib's golden
		// writer sorts them); the metrics' order is compared.
		require.NoError(t, pmetrictest.CompareMetrics(want, got, pmetrictest.IgnoreMetricDataPointsOrder()), name)
	}
}
