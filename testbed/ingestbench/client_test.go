// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"

	"github.com/netpulse/netpulse/internal/shard"
	"github.com/netpulse/netpulse/testbed/syntheticagent"
)

// bearer is what the agent's bearertokenauth extension sends on every RPC.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

// fleet is N agents sending one batch per round each to one OTLP/gRPC endpoint, as the
// shipped agent's otlp_grpc exporter does: a connection of its own per agent, from its pod
// IP, TLS verified against the gateway's CA, its bearer token on each request, gzip
// (the exporter's default compression). Agent i sends at phase i/N of the round, so the
// load is spread as a fleet's is.
type fleet struct {
	interval time.Duration
	// shards > 1: each agent sends what its filter for shard 0 of shards passes (the
	// targets on that shard's nodes) and its heartbeat: one gateway shard's input.
	shards int
	agents []*syntheticagent.Agent
	ids    []agentIdentity
	conns  []*grpc.ClientConn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	okRequests, okPoints, failed atomic.Int64
	// paused: the agents skip their rounds (their connections stay); inFlight counts the
	// requests sent and not yet answered.
	paused   atomic.Bool
	inFlight atomic.Int64
	// firstOK counts agents that have had a request accepted.
	firstOK  atomic.Int64
	errMu    sync.Mutex
	lastErrs map[string]int
	// latencies: the accepted requests' export latency (Export called to answered, as the
	// agent's exporter sees it), kept only while recordLatency is set (TestIngestFanIn).
	recordLatency atomic.Bool
	latMu         sync.Mutex
	latencies     []time.Duration
}

func startFleet(endpoint string, caPool *x509.CertPool, ids []agentIdentity, interval time.Duration, shards int) (*fleet, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{interval: interval, shards: shards, ids: ids, cancel: cancel, lastErrs: map[string]int{}}
	start := time.Now().Add(-time.Hour) // the agents' receivers have been running for a while
	host, _, _ := net.SplitHostPort(endpoint)
	for i, id := range ids {
		src := &net.TCPAddr{IP: id.ip}
		conn, err := grpc.NewClient(endpoint,
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: caPool, ServerName: host, MinVersion: tls.VersionTLS12})),
			grpc.WithPerRPCCredentials(bearer(id.token)),
			grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				d := net.Dialer{LocalAddr: src}
				return d.DialContext(ctx, "tcp", addr)
			}))
		if err != nil {
			cancel()
			f.close()
			return nil, err
		}
		f.conns = append(f.conns, conn)
		f.agents = append(f.agents, syntheticagent.NewAgent(id.pod.Name, string(id.pod.UID), id.pod.Namespace, id.pod.Spec.NodeName, id.ip.String(), start, uint64(i)))
	}
	t0 := time.Now()
	for i := range ids {
		f.wg.Add(1)
		go f.run(ctx, i, t0.Add(time.Duration(i)*interval/time.Duration(len(ids))))
	}
	return f, nil
}

func (f *fleet) run(ctx context.Context, i int, first time.Time) {
	defer f.wg.Done()
	client := pmetricotlp.NewGRPCClient(f.conns[i])
	n := len(f.agents)
	ips := func(idx []int) []string {
		out := make([]string, 0, len(idx))
		for _, j := range idx {
			if f.shards > 1 && shard.Of(f.ids[j].pod.Spec.NodeName, f.shards) != 0 {
				continue // another shard's target
			}
			out = append(out, f.ids[j].ip.String())
		}
		return out
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(first)):
	}
	ticker := time.NewTicker(f.interval)
	defer ticker.Stop()
	accepted := false
	for r := 0; ; r++ {
		if f.paused.Load() {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			continue
		}
		stable, rotating := syntheticagent.Plan(i, n, r)
		now := time.Now()
		md := f.agents[i].Round(now, ips(stable), ips(rotating))
		if f.shards > 1 {
			f.agents[i].Heartbeat(md, now, int64(r+1))
		}
		points := md.DataPointCount()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		f.inFlight.Add(1)
		sent := time.Now()
		_, err := client.Export(rctx, pmetricotlp.NewExportRequestFromMetrics(md))
		took := time.Since(sent)
		f.inFlight.Add(-1)
		cancel()
		switch {
		case err == nil:
			if f.recordLatency.Load() {
				f.latMu.Lock()
				f.latencies = append(f.latencies, took)
				f.latMu.Unlock()
			}
			f.okRequests.Add(1)
			f.okPoints.Add(int64(points))
			if !accepted {
				accepted = true
				f.firstOK.Add(1)
			}
		case ctx.Err() != nil:
			return
		default:
			f.failed.Add(1)
			f.errMu.Lock()
			f.lastErrs[status.Code(err).String()+": "+status.Convert(err).Message()]++
			f.errMu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// pause stops the rounds and waits until no request is in flight (at most timeout);
// resume starts them again.
func (f *fleet) pause(timeout time.Duration) bool {
	f.paused.Store(true)
	deadline := time.Now().Add(timeout)
	for f.inFlight.Load() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

func (f *fleet) resume() { f.paused.Store(false) }

// errors returns and resets the failures seen since the last call, by code and message.
func (f *fleet) errors() map[string]int {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	e := f.lastErrs
	f.lastErrs = map[string]int{}
	return e
}

func (f *fleet) close() {
	f.cancel()
	f.wg.Wait()
	for _, c := range f.conns {
		_ = c.Close()
	}
}
