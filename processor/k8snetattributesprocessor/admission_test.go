// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/k8sindex"
	"github.com/netpulse/netpulse/internal/shard"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/metadatatest"
)

func admissionConfig(mod func(*AdmissionConfig)) *Config {
	cfg := createDefaultConfig()
	cfg.Admission.Enabled = true
	if mod != nil {
		mod(&cfg.Admission)
	}
	return cfg
}

// agentResource is the shipped agent's Resource (testIndex's agent pod).
func agentResource() map[string]any {
	return map[string]any{
		contract.K8sNamespaceName: "netpulse", contract.K8sPodName: "netpulse-agent-x7k2p", contract.K8sPodUID: "uid-agent",
		contract.K8sNodeName: "node-a", contract.K8sPodIP: agentIP,
	}
}

// point is one data point of a status gauge.
type point struct {
	addr   string
	stable bool
	ts     time.Time
	extra  map[string]any
}

func statusBatch(res map[string]any, pts ...point) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	_ = rm.Resource().Attributes().FromRaw(res)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(contract.ProbeScopeName)
	m := sm.Metrics().AppendEmpty()
	m.SetName(contract.MetricStatus)
	m.SetUnit("1")
	g := m.SetEmptyGauge()
	for _, p := range pts {
		dp := g.DataPoints().AppendEmpty()
		a := dp.Attributes()
		a.PutStr(contract.DestinationAddress, p.addr)
		a.PutStr(contract.ProbeType, contract.ProbeTypeICMP)
		a.PutStr(contract.NetworkType, "ipv4")
		if p.stable {
			a.PutBool(contract.PairStable, true)
		}
		for k, v := range p.extra {
			_ = a.PutEmpty(k).FromRaw(v)
		}
		ts := p.ts
		if ts.IsZero() {
			ts = t0
		}
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		dp.SetIntValue(1)
	}
	return md
}

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func statusPoints(md pmetric.Metrics) []map[string]any {
	var out []map[string]any
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				dps := ms.At(k).Gauge().DataPoints()
				for l := 0; l < dps.Len(); l++ {
					out = append(out, dps.At(l).Attributes().AsRaw())
				}
			}
		}
	}
	return out
}

// Only the contract's attributes, with the contract's values, and the destination identity
// of the index alone survive; a sender's labels, scope and units are gone.
func TestAdmissionSanitises(t *testing.T) {
	p := newTestProcessor(t, admissionConfig(nil), testIndex(t))
	res := agentResource()
	res["random.key"] = "x1"
	res[contract.K8sDeploymentName] = "forged"
	md := statusBatch(res,
		point{addr: targetIP4, extra: map[string]any{"random": "r1", "destination.k8s.pod.name": "forged", "destination.k8s.pod.uid": "forged"}},
		point{addr: unknownIP, extra: map[string]any{"destination.k8s.pod.uid": "uid-cart", "destination.k8s.namespace.name": "shop"}},
		point{addr: nodeBIP, extra: map[string]any{contract.NetworkType: "ipv9"}},
	)
	sm := md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	sm.Scope().SetName("forged.scope")
	sm.Scope().SetVersion("v-random-1")
	sm.Metrics().At(0).SetUnit("furlongs")
	_, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)

	pts := statusPoints(md)
	require.Len(t, pts, 1, "the unknown address is an undeclared external, ipv9 is no network.type")
	assert.Equal(t, "uid-cart", pts[0]["destination.k8s.pod.uid"])
	assert.Equal(t, "cart-7d9f8b6c5d-q4w9z", pts[0]["destination.k8s.pod.name"], "the index's identity, not the claim")
	assert.NotContains(t, pts[0], "random")
	ra := md.ResourceMetrics().At(0).Resource().Attributes().AsRaw()
	assert.NotContains(t, ra, "random.key")
	assert.Equal(t, "netpulse-agent", ra[contract.K8sDaemonSetName], "enriched from the index")
	assert.NotContains(t, ra, contract.K8sDeploymentName, "the claimed workload is gone")
	sm = md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	assert.Equal(t, contract.ProbeScopeName, sm.Scope().Name())
	assert.Empty(t, sm.Scope().Version())
	assert.Equal(t, "1", sm.Metrics().At(0).Unit())

	// A k8s.pod.ip that is not the source pod's goes.
	res = agentResource()
	res[contract.K8sPodIP] = statefulIP
	md = statusBatch(res, point{addr: targetIP4})
	_, err = p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	assert.NotContains(t, md.ResourceMetrics().At(0).Resource().Attributes().AsRaw(), contract.K8sPodIP)
}

// Other metrics pass untouched (admission is for pod_probe's).
func TestAdmissionLeavesOtherMetrics(t *testing.T) {
	p := newTestProcessor(t, admissionConfig(nil), testIndex(t))
	md := probeMetrics(map[string]any{contract.K8sPodIP: agentIP, "keep.me": "yes"}, targetIP4)
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName("other.metric")
	_, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	assert.Equal(t, "yes", md.ResourceMetrics().At(0).Resource().Attributes().AsRaw()["keep.me"])
	assert.Equal(t, "uid-cart", dpAttrs(md, 0)["destination.k8s.pod.uid"])
}

// bigIndex has n pods on 10.1.0.0/16 and two nodes.
func bigIndex(n int) *k8sindex.Index {
	ix := k8sindex.New(k8sindex.Config{})
	ix.UpsertNode(&k8sindex.NodeRecord{Name: "node-a", IPs: addrs(nodeAIP)})
	ix.UpsertPod(&k8sindex.PodRecord{UID: "uid-agent", Name: "netpulse-agent-x7k2p", Namespace: "netpulse", NodeName: "node-a",
		IPs: addrs(agentIP), Phase: k8sindex.PhaseRunning})
	for i := range n {
		ix.UpsertPod(&k8sindex.PodRecord{UID: fmt.Sprintf("uid-%d", i), Name: fmt.Sprintf("p-%d", i), Namespace: "ns", NodeName: "node-a",
			IPs: []netip.Addr{podAddr(i)}, Phase: k8sindex.PhaseRunning})
	}
	return ix
}

func podAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}) }

// The flood: one source names 20,000 targets. What passes is bounded by the
// limits, whatever the sender invents; known targets keep passing; everything refused is
// counted by reason.
func TestAdmissionBoundsAFlood(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	cfg := admissionConfig(func(a *AdmissionConfig) { a.DeclaredExternalTargets = []string{"198.51.100.0/24"} })
	p := startTestProcessor(t, cfg, bigIndex(100), metadatatest.NewSettings(tt))

	// First the real agent's round: 4 stable targets.
	real := []point{{addr: "10.1.0.1", stable: true}, {addr: "10.1.0.2", stable: true}, {addr: "10.1.0.3", stable: true}, {addr: nodeAIP, stable: true}}
	md := statusBatch(agentResource(), real...)
	_, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	require.Len(t, statusPoints(md), 4)

	// Then 20,000 distinct targets in one request (10,000 data points at most per request).
	var flood []point
	for i := range 20000 {
		addr := fmt.Sprintf("203.0.%d.%d", i>>8&255, i&255) // undeclared externals
		switch i % 4 {
		case 1:
			addr = podAddr(i % 100).String() // real pods, claimed stable
		case 2:
			addr = fmt.Sprintf("198.51.100.%d", i%256) // declared externals
		}
		flood = append(flood, point{addr: addr, stable: true, ts: t0.Add(time.Duration(i%100) * time.Second)})
	}
	md = statusBatch(agentResource(), flood...)
	_, err = p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	passed := statusPoints(md)
	targets := map[string]bool{}
	for _, a := range passed {
		targets[a[contract.DestinationAddress].(string)] = true
	}
	assert.LessOrEqual(t, len(targets), cfg.Admission.MaxStableTargetsPerSource, "distinct stable targets of the source")
	st := p.admitter.table.Stats()
	assert.Equal(t, 1, st.Sources)
	assert.LessOrEqual(t, st.StableTargets, 16)
	assert.LessOrEqual(t, st.ExternalTargets, 8)

	// The real targets still pass after the flood.
	md = statusBatch(agentResource(), real...)
	_, err = p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	assert.Len(t, statusPoints(md), 4, "nothing known is evicted by a newcomer")

	m, err := tt.GetMetric("otelcol.k8s_net_attributes.admission.refused")
	require.NoError(t, err)
	sum := m.Data.(metricdata.Sum[int64])
	byReason := map[string]int64{}
	total := int64(0)
	for _, dp := range sum.DataPoints {
		r, _ := dp.Attributes.Value("reason")
		byReason[r.AsString()] = dp.Value
		total += dp.Value
	}
	assert.Equal(t, int64(10000), byReason["request_data_point_limit"])
	assert.Equal(t, int64(20000-len(passed)), total, "every refused data point is counted: %v", byReason)
	assert.Positive(t, byReason["undeclared_external_target"])
	assert.Positive(t, byReason["stable_target_limit"])
	metadatatest.AssertEqualK8sNetAttributesAdmissionSources(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

func TestAdmissionRoundAndRequestLimits(t *testing.T) {
	p := newTestProcessor(t, admissionConfig(func(a *AdmissionConfig) {
		a.MaxTargetsPerRound = 5
		a.MaxDataPointsPerRequest = 12
	}), bigIndex(100))
	var pts []point
	for i := range 10 {
		pts = append(pts, point{addr: podAddr(i).String()}) // one round, 10 rotating targets
	}
	md := statusBatch(agentResource(), pts...)
	_, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	assert.Len(t, statusPoints(md), 5, "max_targets_per_round")

	pts = pts[:0]
	for r := range 4 { // four rounds of 4 targets: 16 points
		for i := range 4 {
			pts = append(pts, point{addr: podAddr(i).String(), ts: t0.Add(time.Duration(r) * time.Second)})
		}
	}
	md = statusBatch(agentResource(), pts...)
	_, err = p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	assert.Len(t, statusPoints(md), 12, "max_data_points_per_request")
}

func TestAdmissionDeclaredExternals(t *testing.T) {
	p := newTestProcessor(t, admissionConfig(func(a *AdmissionConfig) {
		a.DeclaredExternalTargets = []string{"192.0.2.0/24", "2001:db8::1", "Example.COM"}
	}), testIndex(t))
	md := statusBatch(agentResource(),
		point{addr: "192.0.2.7"}, point{addr: "192.0.3.7"}, point{addr: "2001:db8::1"}, point{addr: "[2001:db8::1]"},
		point{addr: "example.com"}, point{addr: "evil.example.com"}, point{addr: targetIP4})
	_, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	var got []string
	for _, a := range statusPoints(md) {
		got = append(got, a[contract.DestinationAddress].(string))
	}
	assert.Equal(t, []string{"192.0.2.7", "2001:db8::1", "[2001:db8::1]", "example.com", targetIP4}, got)

	// Two URLs on one declared host keep their endpoint; an oversized one is refused.
	md = statusBatch(agentResource(),
		point{addr: "example.com", extra: map[string]any{contract.TargetEndpoint: "https://example.com/healthz"}},
		point{addr: "example.com", extra: map[string]any{contract.TargetEndpoint: "https://example.com/fail"}},
		point{addr: "example.com", extra: map[string]any{contract.TargetEndpoint: "https://example.com/" + strings.Repeat("x", 600)}})
	_, err = p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	pts := statusPoints(md)
	require.Len(t, pts, 2)
	assert.Equal(t, "https://example.com/healthz", pts[0][contract.TargetEndpoint])
	assert.Equal(t, "https://example.com/fail", pts[1][contract.TargetEndpoint])
}

func TestAdmissionRequireAuthenticatedSource(t *testing.T) {
	p := newTestProcessor(t, admissionConfig(func(a *AdmissionConfig) { a.RequireAuthenticatedSource = true }), testIndex(t))
	agent := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "netpulse-agent-x7k2p", PodUID: "uid-agent", NodeName: "node-a", Role: identity.RoleAgent}
	ctxAs := func(id identity.Identity) context.Context {
		return client.NewContext(context.Background(), client.Info{Auth: identity.NewAuthData(id)})
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		want int
	}{
		{"own identity", ctxAs(agent), 1},
		{"no identity", context.Background(), 0},
		{"another pod's token", ctxAs(identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "other", PodUID: "uid-other", NodeName: "node-b", Role: identity.RoleAgent}), 0},
	} {
		md := statusBatch(agentResource(), point{addr: targetIP4})
		_, err := p.processMetrics(c.ctx, md)
		require.NoError(t, err)
		assert.Len(t, statusPoints(md), c.want, c.name)
	}
}

// A relay (a gateway shard forwarding its agents' points) is believed per Resource for the
// agent it vouches for, and its vouching survives the sanitising; an agent's own relayed
// attributes are stripped and count for nothing.
func TestAdmissionBelievesARelayPerResource(t *testing.T) {
	p := newTestProcessor(t, admissionConfig(func(a *AdmissionConfig) {
		a.RequireAuthenticatedSource = true
		a.KeepRelayedIdentity = true
	}), testIndex(t))
	agent := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "netpulse-agent-x7k2p", PodUID: "uid-agent", NodeName: "node-a", Role: identity.RoleAgent}
	other := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "other", PodUID: "uid-other", NodeName: "node-b", Role: identity.RoleAgent}
	relay := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-gateway", PodName: "gw-0", PodUID: "uid-gw", NodeName: "node-g", Role: identity.RoleRelay}
	ctxAs := func(id identity.Identity) context.Context {
		return client.NewContext(context.Background(), client.Info{Auth: identity.NewAuthData(id)})
	}
	for _, c := range []struct {
		name    string
		ctx     context.Context
		vouched *identity.Identity
		want    int
		kept    bool // the relayed identity stays on the Resource for the exporter
	}{
		{"a relay vouching for the source", ctxAs(relay), &agent, 1, true},
		{"a relay vouching for another pod", ctxAs(relay), &other, 0, false},
		{"a relay vouching for nobody", ctxAs(relay), nil, 0, false},
		{"the agent itself, claiming to be relayed as another", ctxAs(agent), &other, 1, false},
	} {
		res := agentResource()
		if c.vouched != nil {
			m := pcommon.NewMap()
			identity.SetRelayed(m, *c.vouched)
			for k, v := range m.All() {
				res[k] = v.Str()
			}
		}
		md := statusBatch(res, point{addr: targetIP4})
		_, err := p.processMetrics(c.ctx, md)
		require.NoError(t, err)
		assert.Len(t, statusPoints(md), c.want, c.name)
		if c.want == 0 {
			continue
		}
		got, ok := identity.RelayedOf(md.ResourceMetrics().At(0).Resource().Attributes())
		require.Equal(t, c.kept, ok, c.name)
		if c.kept {
			assert.Equal(t, agent, got, c.name)
		}
	}
	// Without keep_relayed_identity (an export pipeline) the relayed points are admitted
	// and the identity removed once matched: no series carries it.
	export := newTestProcessor(t, admissionConfig(func(a *AdmissionConfig) { a.RequireAuthenticatedSource = true }), testIndex(t))
	res := agentResource()
	m := pcommon.NewMap()
	identity.SetRelayed(m, agent)
	for k, v := range m.All() {
		res[k] = v.Str()
	}
	md := statusBatch(res, point{addr: targetIP4})
	_, err := export.processMetrics(ctxAs(relay), md)
	require.NoError(t, err)
	require.Len(t, statusPoints(md), 1)
	for k := range md.ResourceMetrics().At(0).Resource().Attributes().All() {
		assert.NotContains(t, k, identity.RelayedPrefix)
	}
}

// A sidecar (or any workload service account allowed beside the agents') is authenticated
// and names its own pod, but it is not an agent: its pod_probe data points are refused as
// source_not_agent and it holds no admission slot.
func TestAdmissionRefusesNonAgents(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	p := startTestProcessor(t, admissionConfig(func(a *AdmissionConfig) { a.RequireAuthenticatedSource = true }), testIndex(t), metadatatest.NewSettings(tt))
	sidecar := identity.Identity{Namespace: "netpulse", ServiceAccount: "web", PodName: "netpulse-agent-x7k2p", PodUID: "uid-agent", NodeName: "node-a", Role: identity.RoleSidecar}
	ctx := client.NewContext(context.Background(), client.Info{Auth: identity.NewAuthData(sidecar)})
	md := statusBatch(agentResource(), point{addr: targetIP4, stable: true}, point{addr: podAddr(1).String(), stable: true})
	_, err := p.processMetrics(ctx, md)
	require.NoError(t, err)
	assert.Empty(t, statusPoints(md))
	assert.Equal(t, 0, p.admitter.table.Stats().Sources, "no admission slot")
	m, err := tt.GetMetric("otelcol.k8s_net_attributes.admission.refused")
	require.NoError(t, err)
	byReason := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		r, _ := dp.Attributes.Value("reason")
		byReason[r.AsString()] += dp.Value
	}
	assert.Equal(t, map[string]int64{"source_not_agent": 2}, byReason)
}

// The sources' table is bounded at 5,000 agents (the shipped 4 stable targets each).
func BenchmarkAdmission5000Agents(b *testing.B) {
	ix := bigIndex(5000 % 65536)
	cfg := admissionConfig(nil)
	p, err := newProcessor(benchSettings(), cfg)
	require.NoError(b, err)
	p.acquire = func() (*k8sindex.Handle, error) { return k8sindex.StaticHandle(ix), nil }
	require.NoError(b, p.start(context.Background(), componenttest.NewNopHost()))
	defer func() { _ = p.stop(context.Background()) }()
	rounds := make([]pmetric.Metrics, 0, 64)
	for s := range 64 {
		res := agentResource()
		res[contract.K8sPodUID] = fmt.Sprintf("uid-src-%d", s)
		delete(res, contract.K8sPodIP)
		var pts []point
		for i := range 4 {
			pts = append(pts, point{addr: podAddr((s + i) % 5000).String(), stable: true})
		}
		rounds = append(rounds, statusBatch(res, pts...))
	}
	b.ResetTimer()
	for i := range b.N {
		md := pmetric.NewMetrics()
		rounds[i%64].CopyTo(md)
		_, _ = p.processMetrics(context.Background(), md)
	}
}

// The sharded agents' heartbeat passes without a destination, stripped of every attribute
// (netpulse.shard included: the gateway recomputes the shard, a sender's stamp is no label),
// and with the contract's unit; a gauge of that name, or no point, is refused.
func TestAdmissionRoundsHeartbeat(t *testing.T) {
	p := newTestProcessor(t, admissionConfig(nil), testIndex(t))
	md := statusBatch(agentResource(), point{addr: targetIP4, extra: map[string]any{"netpulse.shard": int64(1)}})
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	shard.AppendRounds(ms, 0, pcommon.NewTimestampFromTime(time.Now()), 7)
	hb := ms.At(ms.Len() - 1)
	hb.SetUnit("beats") // a sender's own unit: the contract's replaces it
	dp := hb.Sum().DataPoints().At(0)
	dp.Attributes().PutStr("destination.address", targetIP4)
	dp.Attributes().PutStr("anything", "else")
	forged := ms.AppendEmpty()
	forged.SetName(contract.MetricRounds)
	forged.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	empty := ms.AppendEmpty()
	empty.SetName(contract.MetricRounds)
	empty.SetEmptySum()

	_, err := p.processMetrics(context.Background(), md)
	require.NoError(t, err)
	ms = md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	require.Equal(t, 2, ms.Len(), "the status point and one heartbeat; the gauge and the empty sum refused")
	require.NotContains(t, ms.At(0).Gauge().DataPoints().At(0).Attributes().AsRaw(), "netpulse.shard", "a sender's shard stamp is no label")
	got := ms.At(1)
	require.Equal(t, contract.MetricRounds, got.Name())
	require.Equal(t, "{round}", got.Unit())
	require.Equal(t, 0, got.Sum().DataPoints().At(0).Attributes().Len())
	require.Equal(t, int64(7), got.Sum().DataPoints().At(0).IntValue())
}
