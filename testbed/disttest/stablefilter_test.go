// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package disttest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/filterprocessor"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"gopkg.in/yaml.v3"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// The gateway's export pipeline keeps per-pair series of stable pairs only: the shipped
// filter/stable_pairs of gateway.yaml, run by the real filter processor, drops a rotating
// pair's points (of every metric type the receiver emits) and keeps a stable pair's, and
// drops every metric that is not pod_probe's.
func TestGatewayExportKeepsOnlyStablePairs(t *testing.T) {
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "deploy/agent-gateway/config/gateway.yaml"))
	require.NoError(t, err)
	var doc struct {
		Processors map[string]map[string]any `yaml:"processors"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	section, ok := doc.Processors["filter/stable_pairs"]
	require.True(t, ok, "gateway.yaml has no filter/stable_pairs")

	f := filterprocessor.NewFactory()
	cfg := f.CreateDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(section).Unmarshal(cfg))
	require.NoError(t, cfg.(interface{ Validate() error }).Validate())
	sink := new(consumertest.MetricsSink)
	set := processortest.NewNopSettings(component.MustNewType("filter"))
	p, err := f.CreateMetrics(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), nil))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()

	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetName(contract.MetricStatus)
	s := ms.AppendEmpty()
	s.SetName(contract.MetricPacketsSent)
	h := ms.AppendEmpty()
	h.SetName(contract.MetricDuration)
	// A metric of the sender's own, even on a "stable pair", is not exported.
	other := ms.AppendEmpty()
	other.SetName("forged.metric")
	other.SetEmptyGauge().DataPoints().AppendEmpty().Attributes().PutBool(contract.PairStable, true)
	gd, sd, hd := g.SetEmptyGauge().DataPoints(), s.SetEmptySum().DataPoints(), h.SetEmptyExponentialHistogram().DataPoints()
	for _, pt := range []struct {
		addr   string
		stable bool
	}{{"10.0.0.1", true}, {"10.0.0.2", false}} {
		a := gd.AppendEmpty().Attributes()
		b := sd.AppendEmpty().Attributes()
		c := hd.AppendEmpty().Attributes()
		a.PutStr(contract.DestinationAddress, pt.addr)
		b.PutStr(contract.DestinationAddress, pt.addr)
		c.PutStr(contract.DestinationAddress, pt.addr)
		if pt.stable {
			a.PutBool(contract.PairStable, true)
			b.PutBool(contract.PairStable, true)
			c.PutBool(contract.PairStable, true)
		}
	}
	require.NoError(t, p.ConsumeMetrics(context.Background(), md))
	out := sink.AllMetrics()
	require.Len(t, out, 1)
	require.Equal(t, 3, out[0].DataPointCount(), "one point per metric left")
	got := out[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < got.Len(); i++ {
		m := got.At(i)
		var addr any
		switch m.Type() {
		case pmetric.MetricTypeGauge:
			addr = m.Gauge().DataPoints().At(0).Attributes().AsRaw()[contract.DestinationAddress]
		case pmetric.MetricTypeSum:
			addr = m.Sum().DataPoints().At(0).Attributes().AsRaw()[contract.DestinationAddress]
		case pmetric.MetricTypeExponentialHistogram:
			addr = m.ExponentialHistogram().DataPoints().At(0).Attributes().AsRaw()[contract.DestinationAddress]
		}
		require.Equal(t, "10.0.0.1", addr, "metric %s kept the rotating pair", m.Name())
	}
}
