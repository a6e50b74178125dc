// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/netpulse/netpulse/internal/contract"
)

// hostileRequest is the input (#28 item 2): one source's request of n cumulative
// pod-target points (packets.sent) without a StartTimestamp, each with a fresh
// destination.port (or, with endpoint, a fresh netpulse.target.endpoint), rotating unless
// stable. Points req*n .. req*n+n-1 of the flood.
func hostileRequest(uid string, req, n int, at time.Time, stable, endpoint bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr(contract.K8sNamespaceName, "netpulse")
	res.PutStr(contract.K8sPodName, "agent-"+uid)
	res.PutStr(contract.K8sPodUID, uid)
	res.PutStr(contract.K8sNodeName, "node-"+uid)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(contract.MetricPacketsSent)
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ts := pcommon.NewTimestampFromTime(at)
	for i := req * n; i < req*n+n; i++ {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(3)
		a := dp.Attributes()
		a.PutStr(contract.DestinationAddress, "10.0.2.10")
		a.PutStr("destination.k8s.pod.uid", "uid-victim")
		a.PutStr("destination.k8s.pod.name", "victim")
		a.PutStr("destination.k8s.namespace.name", "netpulse")
		a.PutStr(contract.ProbeType, contract.ProbeTypeICMP)
		a.PutStr(contract.TargetKind, "pod")
		if endpoint {
			a.PutStr(contract.TargetEndpoint, fmt.Sprintf("http://10.0.2.10/%d", i))
		} else {
			a.PutInt(contract.DestinationPort, int64(i%65535+1))
		}
		if stable {
			a.PutBool(contract.PairStable, true)
		}
	}
	return md
}

// The flood: 10 requests of 5,000 points from one source. Before, each point made
// a stream (50,000 streams, ~20 MB, none expired after a minute). Now a rotating point
// without its round's StartTimestamp is never remembered, and a source's streams are
// bounded (the same flood marked stable keeps DefaultMaxStreamsPerSource of them); both are
// counted, and another source is unaffected.
func TestDecoderStreamsPerSourceAreBounded(t *testing.T) {
	for _, c := range []struct {
		name             string
		stable, endpoint bool
	}{{"rotating/port", false, false}, {"rotating/endpoint", false, true}, {"stable/port", true, false}, {"stable/endpoint", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecoder(plausibleConfig())
			skipped := map[SkipReason]int{}
			now := t0
			for req := range 10 {
				now = now.Add(time.Second)
				r := d.Decode(hostileRequest("liar", req, 5000, now, c.stable, c.endpoint), now)
				for k, v := range r.Skipped {
					skipped[k] += v
				}
			}
			if c.stable {
				assert.Equal(t, DefaultMaxStreamsPerSource, d.Streams(), "the source's first streams, no more")
				assert.Equal(t, 50000-DefaultMaxStreamsPerSource, skipped[SkipStreamLimit])
			} else {
				assert.Zero(t, d.Streams(), "rotating points are not remembered")
				assert.Equal(t, 50000, skipped[SkipRotatingWithoutStart])
			}

			// Another source's stable pairs are decoded as ever.
			a := newFakeAgent()
			for i := range 3 {
				now = now.Add(time.Second)
				r := d.Decode(a.round(now, icmpProbe(3, 0)), now)
				require.Empty(t, r.Skipped, "round %d", i)
				require.Len(t, r.Observations, 1)
				assert.Equal(t, uint64(3), r.Observations[0].Sent, "round %d", i)
			}

			// Forgotten StreamTTL after they were last seen; the honest source's are kept
			// while it reports.
			cfg := d.cfg
			d.Expire(now.Add(cfg.StreamTTL - time.Second))
			assert.Positive(t, d.Streams())
			now = now.Add(cfg.StreamTTL)
			d.Decode(a.round(now, icmpProbe(3, 0)), now)
			d.Expire(now)
			assert.Equal(t, 1, d.Sources(), "only the reporting source")
			d.Expire(now.Add(cfg.StreamTTL + time.Second))
			assert.Zero(t, d.Streams())
			assert.Zero(t, d.Sources())
		})
	}
}

// A real agent at the admission's limit (every stable target, every error type) fits
// within the streams derived from that limit: nothing of it is refused, at the default 16
// (176 streams) and at a raised 40. A fixed 176 refused a 40-target agent's loss and RTT.
func TestDecoderStreamLimitFitsARealAgent(t *testing.T) {
	for _, tc := range []struct{ limit, targets, refused int }{
		{0, 16, 0},  // the default: 16 targets
		{40, 40, 0}, // raised with the admission's
		{0, 40, 40*(3+len(contract.ErrorTypes)) - DefaultMaxStreamsPerSource}, // raised at the admission only: counted
	} {
		t.Run(fmt.Sprintf("limit=%d/targets=%d", tc.limit, tc.targets), func(t *testing.T) {
			cfg := plausibleConfig()
			cfg.StableTargetsPerSource = tc.limit
			d := NewDecoder(cfg)
			a := newFakeAgent()
			errTypes := contract.ErrorTypes
			now := t0
			refused := 0
			for round := range len(errTypes) + 2 {
				now = now.Add(time.Second)
				var probes []probe
				for i := range tc.targets {
					p := icmpProbe(3, 0)
					p.addr = fmt.Sprintf("10.0.%d.%d", 3+i/200, i%200+1)
					if round < len(errTypes) {
						p = icmpProbe(3, 3)
						p.addr, p.errType = fmt.Sprintf("10.0.%d.%d", 3+i/200, i%200+1), errTypes[round]
					}
					probes = append(probes, p)
				}
				refused += d.Decode(a.round(now, probes...), now).Skipped[SkipStreamLimit]
			}
			assert.Equal(t, StreamsPerSource(tc.targets)-tc.refused, d.Streams())
			if tc.refused == 0 {
				assert.Zero(t, refused)
			} else {
				assert.Positive(t, refused, "refused and counted")
			}
		})
	}
	assert.Equal(t, 176, DefaultMaxStreamsPerSource)
}
