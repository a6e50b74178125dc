// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/decode"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/contract"
)

// updateGolden regenerates testdata/golden/observations.json instead of comparing with it
// (NETPULSE_UPDATE_GOLDEN=1 go test ./exporter/podnetworkhealthexporter/internal/decode/ -run Golden;
// docs/development.md).
var updateGolden = os.Getenv("NETPULSE_UPDATE_GOLDEN") != ""

// goldenDestinations is what k8s_net_attributes adds on the gateway for the targets of the
// input rounds (destination.* by destination.address).
var goldenDestinations = map[string]map[string]string{
	"10.0.0.7": {contract.K8sNamespaceName: "netpulse", contract.K8sPodName: "agent-b", contract.K8sPodUID: "uid-b", contract.K8sNodeName: "node-b", contract.CloudZone: "zone-b"},
	"fd00::8":  {contract.K8sNamespaceName: "netpulse", contract.K8sPodName: "agent-c", contract.K8sPodUID: "uid-c", contract.K8sNodeName: "node-c", contract.CloudZone: "zone-c"},
	"10.1.0.7": {contract.K8sNodeName: "node-b", contract.CloudZone: "zone-b"},
}

// enrich adds goldenDestinations to every data point, as the gateway's k8s_net_attributes
// processor does before pod_network_health decodes.
func enrich(md pmetric.Metrics) {
	apply := func(attrs pcommon.Map) {
		addr, _ := attrs.Get(contract.DestinationAddress)
		for k, v := range goldenDestinations[addr.Str()] {
			attrs.PutStr(contract.DestinationPrefix+k, v)
		}
	}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					for p := 0; p < m.Gauge().DataPoints().Len(); p++ {
						apply(m.Gauge().DataPoints().At(p).Attributes())
					}
				case pmetric.MetricTypeSum:
					for p := 0; p < m.Sum().DataPoints().Len(); p++ {
						apply(m.Sum().DataPoints().At(p).Attributes())
					}
				case pmetric.MetricTypeExponentialHistogram:
					for p := 0; p < m.ExponentialHistogram().DataPoints().Len(); p++ {
						apply(m.ExponentialHistogram().DataPoints().At(p).Attributes())
					}
				}
			}
		}
	}
}

// goldenRound is what one Decode call found, as the expected file holds it.
type goldenRound struct {
	Input        string
	Observations []goldenObservation
	Skipped      map[decode.SkipReason]int
	Resets       int
}

// goldenObservation is an Observation with its RTT histogram written as its non-empty
// buckets (the dense bucket array would fill the file with zeros).
type goldenObservation struct {
	observation.Observation
	RTT goldenRTT // shadows Observation.RTT in JSON
}

type goldenRTT struct {
	Scale    int32
	Count    uint64
	Min, Max float64
	Buckets  []observation.Bucket
}

func toGolden(obs []observation.Observation) []goldenObservation {
	out := make([]goldenObservation, 0, len(obs))
	for _, o := range obs {
		g := goldenObservation{Observation: o, RTT: goldenRTT{Scale: o.RTT.Scale, Count: o.RTT.Count(), Buckets: o.RTT.Buckets()}}
		if g.RTT.Count > 0 {
			g.RTT.Min, g.RTT.Max = o.RTT.Min, o.RTT.Max
		}
		g.Observation.RTT = observation.Histogram{}
		out = append(out, g)
	}
	return out
}

// TestGoldenDecode decodes two rounds of one agent (testdata/golden/agent_round*.yaml: the
// pod_probe receiver's own expected output, receiver/podprobereceiver/testdata/golden)
// after enrich, with the exporter's default decoder configuration, and compares what the
// decoder found with testdata/golden/observations.json.
func TestGoldenDecode(t *testing.T) {
	const (
		maxProbeInterval  = time.Minute // the exporter's defaults (factory.go)
		minProbeInterval  = time.Second
		maxEchoesPerRound = 10
	)
	d := decode.NewDecoder(decode.DecoderConfig{
		StreamTTL:        3 * maxProbeInterval,
		FirstSightMaxAge: maxProbeInterval,
		MaxPerRound:      maxEchoesPerRound,
		MinRoundInterval: minProbeInterval,
		MaxFutureSkew:    observation.FutureSkew(minProbeInterval),
	})
	var got []goldenRound
	for _, name := range []string{"agent_round1.yaml", "agent_round2.yaml"} {
		md, err := golden.ReadMetrics(filepath.Join("testdata", "golden", name))
		require.NoError(t, err)
		enrich(md)
		ts := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).Timestamp().AsTime()
		res := d.Decode(md, ts.Add(500*time.Millisecond))
		got = append(got, goldenRound{Input: name, Observations: toGolden(res.Observations), Skipped: res.Skipped, Resets: res.Resets})
	}
	gotJSON, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("testdata", "golden", "observations.json")
	if updateGolden {
		require.NoError(t, os.WriteFile(path, append(gotJSON, '\n'), 0o600))
	}
	wantJSON, err := os.ReadFile(path)
	require.NoError(t, err, "regenerate with NETPULSE_UPDATE_GOLDEN=1")
	var want, gotBack []goldenRound
	require.NoError(t, json.Unmarshal(wantJSON, &want))
	require.NoError(t, json.Unmarshal(gotJSON, &gotBack))
	// Bucket bounds are computed with math.Exp: equal to the last bits on every platform is not promised.
	if diff := cmp.Diff(want, gotBack, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Fatalf("decoded observations differ from %s (-want +got; NETPULSE_UPDATE_GOLDEN=1 regenerates):\n%s", path, diff)
	}
}
