// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"testing"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/netpulse/netpulse/internal/contract"
)

// Two URLs on one host:port (issue 11): each is its own observation and pair, so the
// failing one is not hidden by the healthy one ("any success counts" within a pair).
func TestDecodeEndpointsAreTargets(t *testing.T) {
	attrs := func(endpoint string) map[string]any {
		return map[string]any{
			contract.DestinationAddress: "192.0.2.10", contract.DestinationPort: int64(8080), contract.ProbeType: "http",
			contract.TargetKind: "external", contract.TargetEndpoint: endpoint, contract.PairStable: true,
		}
	}
	md := statusMetrics(newFakeAgent().res, t0, attrs("http://192.0.2.10:8080/healthz"), attrs("http://192.0.2.10:8080/fail"))
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(1).SetIntValue(0)
	r := NewDecoder(DecoderConfig{}).Decode(md, t0)
	require.Len(t, r.Observations, 2)
	byEndpoint := map[string]observation.Observation{}
	for _, o := range r.Observations {
		byEndpoint[o.Target.Endpoint] = o
	}
	assert.True(t, byEndpoint["http://192.0.2.10:8080/healthz"].Success)
	fail := byEndpoint["http://192.0.2.10:8080/fail"]
	assert.False(t, fail.Success)
	assert.Contains(t, fail.Message, "192.0.2.10:8080 http://192.0.2.10:8080/fail")
	k1, k2 := observation.KeyOf(&r.Observations[0]), observation.KeyOf(&r.Observations[1])
	assert.NotEqual(t, k1, k2)
	assert.Equal(t, int64(8080), k1.TargetPort)

	// On a pod target the endpoint is not part of the identity: the pod is the target.
	pod := attrs("http://10.0.0.7:8080/x")
	pod["destination.k8s.pod.uid"] = "uid-b"
	pod["destination.k8s.pod.name"] = "b"
	pod["destination.k8s.namespace.name"] = "ns"
	tg, _, _ := targetOf(mapOf(pod))
	assert.Equal(t, observation.TargetPod, tg.Kind)
	assert.Empty(t, tg.Endpoint)
}

func mapOf(m map[string]any) pcommon.Map {
	p := pcommon.NewMap()
	_ = p.FromRaw(m)
	return p
}
