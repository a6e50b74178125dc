// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package relay

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// agentRound is one shipped agent's round at 8 shards: 24 points (sent, lost and an RTT
// histogram towards each of its 8 targets, 2 stable and 6 rotating, each on a node of
// its own shard) and the heartbeat.
func agentRound(i int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	for k, v := range map[string]string{"k8s.namespace.name": "netpulse", "k8s.pod.name": fmt.Sprintf("agent-%d", i), "k8s.pod.uid": fmt.Sprintf("uid-%d", i), "k8s.node.name": fmt.Sprintf("node-%d", i)} {
		rm.Resource().Attributes().PutStr(k, v)
	}
	sm := rm.ScopeMetrics().AppendEmpty()
	for _, name := range []string{"netpulse.probe.sent", "netpulse.probe.lost"} {
		m := sm.Metrics().AppendEmpty()
		m.SetName(name)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		for t := range 8 {
			dp := s.DataPoints().AppendEmpty()
			dp.Attributes().PutStr("node", fmt.Sprintf("n%d", t))
			dp.Attributes().PutStr("destination.address", fmt.Sprintf("10.0.%d.%d", t, i%250))
			dp.Attributes().PutStr("netpulse.probe.type", "icmp")
			dp.SetIntValue(int64(3 * i))
		}
	}
	h := sm.Metrics().AppendEmpty()
	h.SetName("netpulse.probe.duration")
	eh := h.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for t := range 8 {
		dp := eh.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("node", fmt.Sprintf("n%d", t))
		dp.Attributes().PutStr("destination.address", fmt.Sprintf("10.0.%d.%d", t, i%250))
		dp.SetCount(uint64(3 * i))
		dp.SetScale(4)
		dp.Positive().BucketCounts().FromRaw([]uint64{1, 2, 3, 2, 1})
	}
	r := sm.Metrics().AppendEmpty()
	r.SetName("netpulse.probe.rounds")
	r.SetEmptySum().DataPoints().AppendEmpty().SetIntValue(int64(i))
	return md
}

type nopServer struct {
	pmetricotlp.UnimplementedGRPCServer
}

func (*nopServer) Export(context.Context, pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	return pmetricotlp.NewExportResponse(), nil
}

// BenchmarkRelay is what a shard of 8 spends to relay: its agents' rounds split per owner
// (7/8 of each round's target points and the heartbeat to each other shard) and sent, over
// loopback gRPC, to 7 owners; the reference sends the same rounds whole to one receiver
// (what an agent's own exporter already does). Reported per agent round.
func BenchmarkRelay(b *testing.B) {
	const shards, agents = 8, 125
	rounds := make([]pmetric.Metrics, agents)
	for i := range rounds {
		rounds[i] = agentRound(i)
	}
	owner := func(metric string, attrs pcommon.Map) int {
		if metric == "netpulse.probe.rounds" {
			return -1
		}
		v, _ := attrs.Get("node")
		return int(v.Str()[1] - '0')
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	g := grpc.NewServer()
	pmetricotlp.RegisterGRPCServer(g, &nopServer{})
	go func() { _ = g.Serve(l) }()
	defer g.Stop()

	b.Run("relay", func(b *testing.B) {
		endpoints := make([]string, shards)
		for s := range endpoints {
			endpoints[s] = l.Addr().String()
		}
		done := make(chan int, 1<<16)
		cfg := clientConfig(endpoints...)
		cfg.QueueSize = 1_000_000 // the bench offers rounds faster than any shard receives them
		f := New(cfg, 0, shards, func(_, n int, outcome string) {
			if outcome != OutcomeForwarded {
				b.Errorf("%d points %s", n, outcome)
			}
			done <- n
		}, zap.NewNop())
		require.NoError(b, f.Start(context.Background(), componenttest.NewNopHost(), componenttest.NewNopTelemetrySettings()))
		defer func() { _ = f.Shutdown(context.Background()) }()
		want := 0
		for _, p := range Split(rounds[0], shards, 0, owner, probes, agent) {
			if p != (pmetric.Metrics{}) {
				want += p.DataPointCount()
			}
		}
		b.ResetTimer()
		for n := 0; n < b.N; n++ {
			md := rounds[n%agents]
			f.Forward(Split(md, shards, 0, owner, probes, agent))
		}
		for got := 0; got < want*b.N; {
			got += <-done
		}
		b.ReportMetric(float64(want), "points-forwarded/round")
	})
	b.Run("reference", func(b *testing.B) {
		conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecureCreds()))
		require.NoError(b, err)
		defer conn.Close()
		c := pmetricotlp.NewGRPCClient(conn)
		b.ResetTimer()
		for n := 0; n < b.N; n++ {
			_, err := c.Export(context.Background(), pmetricotlp.NewExportRequestFromMetrics(rounds[n%agents]))
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }
