// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package relay

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/netpulse/netpulse/internal/identity"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var agent = identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-a", PodUID: "uid-a", NodeName: "node-a", Role: identity.RoleAgent}

// request builds an agent's round: one sum point per target node, one histogram point per
// target node, and the heartbeat.
func request(nodes ...string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("k8s.pod.uid", "uid-a")
	rm.Resource().Attributes().PutStr(identity.RelayedPodUID, "forged") // the sender's: replaced
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("pod_probe")
	sent := sm.Metrics().AppendEmpty()
	sent.SetName("netpulse.probe.sent")
	sum := sent.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hist := sm.Metrics().AppendEmpty()
	hist.SetName("netpulse.probe.duration")
	h := hist.SetEmptyExponentialHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i, n := range nodes {
		dp := sum.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("node", n)
		dp.SetIntValue(int64(i + 1))
		hp := h.DataPoints().AppendEmpty()
		hp.Attributes().PutStr("node", n)
		hp.SetCount(uint64(i + 1))
	}
	rounds := sm.Metrics().AppendEmpty()
	rounds.SetName("netpulse.probe.rounds")
	rounds.SetEmptySum().DataPoints().AppendEmpty().SetIntValue(7)
	other := sm.Metrics().AppendEmpty()
	other.SetName("something.else")
	other.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	return md
}

// byNode owns a point by its "node" attribute: n0 shard 0, n1 shard 1, ...; the heartbeat
// is every shard's.
func byNode(metric string, attrs pcommon.Map) int {
	if metric == "netpulse.probe.rounds" {
		return -1
	}
	v, _ := attrs.Get("node")
	return int(v.Str()[1] - '0')
}

func probes(name string) bool { return name != "something.else" }

func TestSplitGivesEachOwnerItsPointsWithTheIdentity(t *testing.T) {
	md := request("n0", "n1", "n2", "n1")
	before := pmetric.NewMetrics()
	md.CopyTo(before)
	parts := Split(md, 3, 0, byNode, probes, agent)
	require.Len(t, parts, 3)
	assert.Equal(t, pmetric.Metrics{}, parts[0], "nothing for self")
	assert.Equal(t, before, md, "md untouched")

	// Shard 1: its two sum points and two histogram points, and the heartbeat.
	assert.Equal(t, 5, parts[1].DataPointCount())
	// Shard 2: one of each, and the heartbeat.
	assert.Equal(t, 3, parts[2].DataPointCount())
	for s := 1; s <= 2; s++ {
		rm := parts[s].ResourceMetrics()
		require.Equal(t, 1, rm.Len(), "one Resource")
		got, ok := identity.RelayedOf(rm.At(0).Resource().Attributes())
		require.True(t, ok)
		assert.Equal(t, agent, got, "the authenticated identity, not the sender's relayed attributes")
		uid, _ := rm.At(0).Resource().Attributes().Get("k8s.pod.uid")
		assert.Equal(t, "uid-a", uid.Str())
		ms := rm.At(0).ScopeMetrics().At(0).Metrics()
		assert.Equal(t, "pod_probe", rm.At(0).ScopeMetrics().At(0).Scope().Name())
		names := map[string]bool{}
		for i := 0; i < ms.Len(); i++ {
			m := ms.At(i)
			names[m.Name()] = true
			switch m.Name() {
			case "netpulse.probe.sent":
				assert.True(t, m.Sum().IsMonotonic())
				assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.Sum().AggregationTemporality())
				for j := 0; j < m.Sum().DataPoints().Len(); j++ {
					n, _ := m.Sum().DataPoints().At(j).Attributes().Get("node")
					assert.Equal(t, s, int(n.Str()[1]-'0'))
				}
			case "netpulse.probe.duration":
				assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.ExponentialHistogram().AggregationTemporality())
			}
		}
		assert.Equal(t, map[string]bool{"netpulse.probe.sent": true, "netpulse.probe.duration": true, "netpulse.probe.rounds": true}, names, "shard %d: other metrics are not forwarded", s)
	}
	// Everything self owns: nothing to forward.
	parts = Split(request("n0"), 3, 0, func(m string, a pcommon.Map) int { return 0 }, probes, agent)
	for _, p := range parts {
		assert.Equal(t, pmetric.Metrics{}, p)
	}
}

// server is an OTLP metrics receiver that records what it got and with which metadata.
type server struct {
	pmetricotlp.UnimplementedGRPCServer
	mu       sync.Mutex
	points   int
	reqs     int
	maxBytes int // the largest request's encoded metrics
	fail     bool
	block    chan struct{}
}

func (s *server) Export(ctx context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return pmetricotlp.NewExportResponse(), ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return pmetricotlp.NewExportResponse(), assert.AnError
	}
	s.reqs++
	s.points += req.Metrics().DataPointCount()
	s.maxBytes = max(s.maxBytes, sizer.MetricsSize(req.Metrics()))
	_ = client.FromContext(ctx)
	return pmetricotlp.NewExportResponse(), nil
}

func (s *server) got() (reqs, points int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs, s.points
}

func serve(t *testing.T, s *server) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	pmetricotlp.RegisterGRPCServer(g, s)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return l.Addr().String()
}

type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) add(shard, points int, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[outcome] += points
}

func (c *counts) get(outcome string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[outcome]
}

func clientConfig(endpoints ...string) Config {
	cc := configgrpc.NewDefaultClientConfig()
	cc.TLS = configtls.ClientConfig{Insecure: true}
	return Config{Endpoints: endpoints, Client: cc}
}

// Two owners on real sockets (the endpoint's {shard} picks the port): each gets its part,
// batched; a stopped owner's points are dropped and counted while the other's go on.
func TestForwarderSendsEachOwnerItsPart(t *testing.T) {
	s1, s2 := &server{}, &server{}
	a1, a2 := serve(t, s1), serve(t, s2)
	var c counts
	f := newForTest(t, map[int]string{1: a1, 2: a2}, &c)
	for range 10 {
		f.Forward(Split(request("n0", "n1", "n2"), 3, 0, byNode, probes, agent))
	}
	require.Eventually(t, func() bool {
		_, n1 := s1.got()
		_, n2 := s2.got()
		return n1 == 30 && n2 == 30
	}, 10*time.Second, 10*time.Millisecond)
	r1, _ := s1.got()
	assert.LessOrEqual(t, r1, 10, "batched: at most one request a Forward")
	// The owner has them; the sender counts them once their replies are in.
	require.Eventually(t, func() bool { return c.get(OutcomeForwarded) == 60 }, 10*time.Second, 10*time.Millisecond)

	s2.mu.Lock()
	s2.fail = true
	s2.mu.Unlock()
	f.Forward(Split(request("n1", "n2"), 3, 0, byNode, probes, agent))
	require.Eventually(t, func() bool { return c.get(OutcomeSendFailed) == 3 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { _, n := s1.got(); return n == 33 }, 10*time.Second, 10*time.Millisecond)
	// Shutdown abandons a send whose reply is not in yet (counted failed): wait for it.
	require.Eventually(t, func() bool { return c.get(OutcomeForwarded) == 63 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, f.Shutdown(context.Background()))
	require.NoError(t, f.Shutdown(context.Background()), "twice")
	f.Forward(Split(request("n1"), 3, 0, byNode, probes, agent))
	assert.Equal(t, 3+4, c.get(OutcomeSendFailed), "after Shutdown: counted, not sent (shard 1's 3 points, shard 2's heartbeat)")
}

// Parts forwarded within BatchTimeout of a batch's first go to the owner in one request:
// a relaying shard otherwise sent each owner about one request per agent request.
func TestForwarderBatchesWithinItsTimeout(t *testing.T) {
	s := &server{}
	var c counts
	f := newForTest(t, map[int]string{1: serve(t, s)}, &c, func(cfg *Config) { cfg.BatchTimeout = 2 * time.Second })
	for range 20 {
		f.Forward(Split(request("n1"), 2, 0, byNode, probes, agent))
		time.Sleep(5 * time.Millisecond)
	}
	require.Eventually(t, func() bool { _, n := s.got(); return n == 20*3 }, 10*time.Second, 10*time.Millisecond)
	r, _ := s.got()
	assert.LessOrEqual(t, r, 2, "20 parts within the batch timeout: one request (two if the first was taken alone)")
	require.NoError(t, f.Shutdown(context.Background()))
}

// A batch stays within MaxBatchBytes: a part that would take it past the bound goes in
// the next request (found at fan-in: batches of 8,192 points were 4.2-5.2 MB and the
// owner's 4 MiB max_recv_msg_size refused them whole).
func TestForwarderBatchStaysUnderItsByteBound(t *testing.T) {
	one := sizer.MetricsSize(Split(request("n1"), 2, 0, byNode, probes, agent)[1])
	s := &server{}
	var c counts
	f := newForTest(t, map[int]string{1: serve(t, s)}, &c, func(cfg *Config) { cfg.BatchTimeout = 2 * time.Second; cfg.MaxBatchBytes = 3*one + one/2 })
	for range 20 {
		f.Forward(Split(request("n1"), 2, 0, byNode, probes, agent))
	}
	require.Eventually(t, func() bool { _, n := s.got(); return n == 20*3 }, 20*time.Second, 10*time.Millisecond)
	s.mu.Lock()
	reqs, largest := s.reqs, s.maxBytes
	s.mu.Unlock()
	assert.LessOrEqual(t, largest, 3*one+one/2, "no request past the byte bound")
	assert.GreaterOrEqual(t, reqs, 7, "20 parts of %d bytes in batches of at most 3", one)
	assert.Zero(t, c.get(OutcomeSendFailed))
	require.NoError(t, f.Shutdown(context.Background()))
}

// An owner that does not answer fills its queue: Forward never blocks, the excess is
// counted, and Shutdown abandons what is in flight. A batch of one request (3 points) keeps
// the bound exact: a larger batch lets the sender drain the queue while Forward refills it.
func TestForwarderIsBoundedByItsQueue(t *testing.T) {
	s := &server{block: make(chan struct{})}
	defer close(s.block)
	var c counts
	f := newForTest(t, map[int]string{1: serve(t, s)}, &c, func(cfg *Config) { cfg.QueueSize = 4; cfg.MaxBatchPoints = 3 })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			f.Forward(Split(request("n1"), 2, 0, byNode, probes, agent))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Forward blocked")
	}
	// Held: 4 queued, and one request in flight if the sender ran before Forward was done;
	// the rest is dropped, never sent.
	dropped := c.get(OutcomeQueueFull)
	assert.GreaterOrEqual(t, dropped, (100-1-4)*3)
	assert.LessOrEqual(t, dropped, (100-4)*3)
	assert.Zero(t, c.get(OutcomeForwarded))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.Shutdown(ctx))
}

func TestShutdownWithoutStart(t *testing.T) {
	f := New(clientConfig("x-0:4317", "x-1:4317"), 0, 2, nil, zap.NewNop())
	require.NoError(t, f.Shutdown(context.Background()))
	require.NoError(t, f.Shutdown(context.Background()))
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, clientConfig("netpulse-gateway-0.netpulse.svc:4317", "netpulse-gateway-1.netpulse.svc:4317").Check())
	err := Config{Endpoints: []string{"a:1", " "}, QueueSize: -1, Timeout: time.Hour, MaxBatchPoints: -1}.Check()
	require.Error(t, err)
	for _, want := range []string{"endpoints::1", "queue_size", "timeout", "max_batch_points"} {
		assert.Contains(t, err.Error(), want)
	}
}

// newForTest starts a Forwarder of shard 0 whose shard s connects to endpoints[s].
func newForTest(t *testing.T, endpoints map[int]string, c *counts, opts ...func(*Config)) *Forwarder {
	shards := 0
	for s := range endpoints {
		shards = max(shards, s+1)
	}
	cfg := clientConfig()
	for _, o := range opts {
		o(&cfg)
	}
	f := New(cfg, 0, shards, c.add, zap.NewNop())
	f.endpointOf = func(s int) string { return endpoints[s] }
	require.NoError(t, f.Start(context.Background(), componenttest.NewNopHost(), componenttest.NewNopTelemetrySettings()))
	t.Cleanup(func() { _ = f.Shutdown(context.Background()) })
	return f
}

// logServer is an OTLP logs receiver that keeps what it got.
type logServer struct {
	plogotlp.UnimplementedGRPCServer
	mu  sync.Mutex
	got []plog.Logs
}

func (s *logServer) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ld := plog.NewLogs()
	req.Logs().CopyTo(ld)
	s.got = append(s.got, ld)
	return plogotlp.NewExportResponse(), nil
}

// Another shard than 0 sends the check results its agents sent it to shard 0, each Resource
// carrying the reporter's authenticated identity (not what the sender wrote there).
func TestForwardLogsToShardZero(t *testing.T) {
	ls := &logServer{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	plogotlp.RegisterGRPCServer(g, ls)
	go func() { _ = g.Serve(l) }()
	defer g.Stop()
	var c counts
	f := New(clientConfig(l.Addr().String(), "127.0.0.1:1"), 1, 2, c.add, zap.NewNop())
	require.NoError(t, f.Start(context.Background(), componenttest.NewNopHost(), componenttest.NewNopTelemetrySettings()))
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(identity.RelayedPodName, "forged")
	rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("result")
	f.ForwardLogs(StampLogs(ld, agent))
	require.Eventually(t, func() bool { return c.get(OutcomeForwarded) == 1 }, 10*time.Second, 10*time.Millisecond)
	ls.mu.Lock()
	require.Len(t, ls.got, 1)
	got, ok := identity.RelayedOf(ls.got[0].ResourceLogs().At(0).Resource().Attributes())
	ls.mu.Unlock()
	require.True(t, ok)
	assert.Equal(t, agent, got)
	v, _ := ld.ResourceLogs().At(0).Resource().Attributes().Get(identity.RelayedPodName)
	assert.Equal(t, "forged", v.Str(), "StampLogs leaves its input alone")
	require.NoError(t, f.Shutdown(context.Background()))
	f.ForwardLogs(StampLogs(ld, agent))
	assert.Equal(t, 1, c.get(OutcomeSendFailed), "after Shutdown: counted, not sent")
}
