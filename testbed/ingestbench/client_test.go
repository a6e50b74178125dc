// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"math/rand/v2"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/keepalive"
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

	// exp: the agents send through a model of the shipped exporter (nil: one request a
	// round, never retried).
	exp    *exporterModel
	queues []agentQueue
	// dropped counts rounds the exporter model gave up: its queue full, retries exhausted
	// or a permanent error.
	dropped atomic.Int64
	// born: when the fleet started; attempts and accepted count the requests sent and
	// accepted in each second since (the arrival rate a restarted gateway sees).
	born              time.Time
	attempts, okBySec [perSecond]atomic.Int64
	// lastOK: each agent's last accepted request (Unix nanoseconds).
	lastOK []atomic.Int64

	// relayShards > 1 (TestIngestFanIn's NETPULSE_INGEST_RELAY_SHARDS): each agent sends its
	// whole round to the one relaying shard of shardOf (its own node's), every point stamped
	// with its target's shard (netpulse.shard, as pod_probe's shards: S does), plus its
	// heartbeat; byShard and latShard account for each shard's agents.
	relayShards int
	shardOf     []int
	ipShard     map[string]int
	byShard     []shardCounts
	// latShard: the shard of each sample of latencies (relay mode only).
	latShard []int
}

// shardCounts are the requests of one shard's agents (relay mode).
type shardCounts struct {
	okRequests, okPoints, failed, firstOK atomic.Int64
}

const perSecond = 4 * 3600

// addrs: the addresses in an error message (one per agent: counted as one error kind).
var addrs = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`)

// exporterModel is what the shipped agent's otlp_grpc exporter does around a round
// (agent.yaml, exporterhelper's defaults in the collector this repo builds): a queue of
// queueSize requests, up to consumers of them in flight at once, and each request retried
// while its error is retryable (the OTLP exporter's rule: Unavailable, DeadlineExceeded
// and the like), after 5 s, then ×1.5 up to 30 s, each wait ±50 % at random, for at most 5
// minutes. gRPC's own reconnection backoff (1 s, ×1.6, ±20 %, up to 120 s) is the real one:
// the fleet's connections are grpc-go's with its defaults, as the exporter's are.
type exporterModel struct {
	queueSize, consumers int
	// maxDelay caps gRPC's reconnection backoff as agent.yaml's grpc_backoff middleware
	// does (0: gRPC's default, 120 s).
	maxDelay time.Duration
}

// agentQueue is one agent's exporter queue.
type agentQueue struct {
	mu     sync.Mutex
	items  []pmetric.Metrics
	active int
}

// retryable is the OTLP exporter's split of gRPC errors into retried and permanent.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.Unavailable, codes.DataLoss:
		return true
	}
	return false
}

func startFleet(endpoint string, caPool *x509.CertPool, ids []agentIdentity, interval time.Duration, shards int) (*fleet, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{interval: interval, shards: shards, ids: ids, cancel: cancel, lastErrs: map[string]int{}, born: time.Now(),
		lastOK: make([]atomic.Int64, len(ids)), queues: make([]agentQueue, len(ids))}
	return f, f.start(ctx, func(int) string { return endpoint }, caPool)
}

// startRelayFleet is startFleet for relaying shards: agent i connects to endpoints[s] only,
// s the shard of its own node (shard.Of, the mapping pod_probe and the gateway use), and
// sends its whole round with each point stamped with its target's shard, and its heartbeat.
func startRelayFleet(endpoints []string, caPool *x509.CertPool, ids []agentIdentity, interval time.Duration) (*fleet, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := len(endpoints)
	f := &fleet{interval: interval, shards: 1, ids: ids, cancel: cancel, lastErrs: map[string]int{}, born: time.Now(),
		lastOK: make([]atomic.Int64, len(ids)), queues: make([]agentQueue, len(ids)),
		relayShards: s, shardOf: make([]int, len(ids)), ipShard: map[string]int{}, byShard: make([]shardCounts, s)}
	for i, id := range ids {
		f.shardOf[i] = shard.Of(id.pod.Spec.NodeName, s)
		f.ipShard[id.ip.String()] = f.shardOf[i]
	}
	return f, f.start(ctx, func(i int) string { return endpoints[f.shardOf[i]] }, caPool)
}

// stampShards sets netpulse.shard on every data point of md to its target's shard (0 for
// an address that is no agent's), as pod_probe's stampShards does.
func (f *fleet) stampShards(md pmetric.Metrics) {
	shard.Stamp(md, func(addr string) int { return f.ipShard[addr] })
}

// startFleetExporting is startFleet with the agents sending through exp.
func startFleetExporting(endpoint string, caPool *x509.CertPool, ids []agentIdentity, interval time.Duration, exp exporterModel) (*fleet, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{interval: interval, shards: 1, ids: ids, cancel: cancel, lastErrs: map[string]int{}, born: time.Now(),
		lastOK: make([]atomic.Int64, len(ids)), queues: make([]agentQueue, len(ids)), exp: &exp}
	return f, f.start(ctx, func(int) string { return endpoint }, caPool)
}

// start dials agent i's connection to endpointOf(i) and starts the agents' rounds.
func (f *fleet) start(ctx context.Context, endpointOf func(i int) string, caPool *x509.CertPool) error {
	ids, interval := f.ids, f.interval
	start := time.Now().Add(-time.Hour) // the agents' receivers have been running for a while
	for i, id := range ids {
		endpoint := endpointOf(i)
		host, _, _ := net.SplitHostPort(endpoint)
		src := &net.TCPAddr{IP: id.ip}
		opts := []grpc.DialOption{
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: caPool, ServerName: host, MinVersion: tls.VersionTLS12})),
			grpc.WithPerRPCCredentials(bearer(id.token)),
			grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				d := net.Dialer{LocalAddr: src}
				return d.DialContext(ctx, "tcp", addr)
			}),
		}
		if f.exp != nil {
			// agent.yaml's keepalive and grpc_backoff, with the rest of the exporter.
			opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}))
			if f.exp.maxDelay > 0 {
				bc := backoff.DefaultConfig
				bc.MaxDelay = f.exp.maxDelay
				opts = append(opts, grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 20 * time.Second}))
			}
		}
		conn, err := grpc.NewClient(endpoint, opts...)
		if err != nil {
			f.close()
			return err
		}
		f.conns = append(f.conns, conn)
		f.agents = append(f.agents, syntheticagent.NewAgent(id.pod.Name, string(id.pod.UID), id.pod.Namespace, id.pod.Spec.NodeName, id.ip.String(), start, uint64(i)))
	}
	t0 := time.Now()
	for i := range ids {
		f.wg.Add(1)
		go f.run(ctx, i, t0.Add(time.Duration(i)*interval/time.Duration(len(ids))))
	}
	return nil
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
		if f.relayShards > 1 {
			f.stampShards(md)
		}
		if f.shards > 1 || f.relayShards > 1 {
			f.agents[i].Heartbeat(md, now, int64(r+1))
		}
		if f.exp != nil {
			f.enqueue(ctx, i, client, md)
		} else if err := f.attempt(ctx, i, client, md); err != nil && ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// attempt sends md once and accounts for it.
func (f *fleet) attempt(ctx context.Context, i int, client pmetricotlp.GRPCClient, md pmetric.Metrics) error {
	points := md.DataPointCount()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	f.inFlight.Add(1)
	f.count(&f.attempts)
	sent := time.Now()
	_, err := client.Export(rctx, pmetricotlp.NewExportRequestFromMetrics(md))
	took := time.Since(sent)
	f.inFlight.Add(-1)
	var sc *shardCounts
	if f.byShard != nil {
		sc = &f.byShard[f.shardOf[i]]
	}
	switch {
	case err == nil:
		if f.recordLatency.Load() {
			f.latMu.Lock()
			f.latencies = append(f.latencies, took)
			if sc != nil {
				f.latShard = append(f.latShard, f.shardOf[i])
			}
			f.latMu.Unlock()
		}
		f.okRequests.Add(1)
		f.okPoints.Add(int64(points))
		f.count(&f.okBySec)
		first := f.lastOK[i].Swap(time.Now().UnixNano()) == 0
		if first {
			f.firstOK.Add(1)
		}
		if sc != nil {
			sc.okRequests.Add(1)
			sc.okPoints.Add(int64(points))
			if first {
				sc.firstOK.Add(1)
			}
		}
	case ctx.Err() != nil:
	default:
		f.failed.Add(1)
		if sc != nil {
			sc.failed.Add(1)
		}
		f.errMu.Lock()
		f.lastErrs[status.Code(err).String()+": "+addrs.ReplaceAllString(status.Convert(err).Message(), "ADDR")]++
		f.errMu.Unlock()
	}
	return err
}

func (f *fleet) count(perSec *[perSecond]atomic.Int64) {
	if s := int(time.Since(f.born) / time.Second); s < perSecond {
		perSec[s].Add(1)
	}
}

// enqueue puts a round in agent i's exporter queue (dropped when full) and starts a
// consumer if fewer than the model's are running.
func (f *fleet) enqueue(ctx context.Context, i int, client pmetricotlp.GRPCClient, md pmetric.Metrics) {
	q := &f.queues[i]
	q.mu.Lock()
	if len(q.items) >= f.exp.queueSize {
		q.mu.Unlock()
		f.dropped.Add(1)
		return
	}
	q.items = append(q.items, md)
	spawn := q.active < f.exp.consumers
	if spawn {
		q.active++
	}
	q.mu.Unlock()
	if spawn {
		f.wg.Add(1)
		go f.consume(ctx, i, client, q)
	}
}

// consume sends agent i's queued rounds, each retried as the exporter does, until the
// queue is empty.
func (f *fleet) consume(ctx context.Context, i int, client pmetricotlp.GRPCClient, q *agentQueue) {
	defer f.wg.Done()
	for {
		q.mu.Lock()
		if len(q.items) == 0 || ctx.Err() != nil {
			q.active--
			q.mu.Unlock()
			return
		}
		md := q.items[0]
		q.items = q.items[1:]
		q.mu.Unlock()
		began, backoff := time.Now(), 5*time.Second
		for {
			err := f.attempt(ctx, i, client, md)
			if err == nil || ctx.Err() != nil {
				break
			}
			wait := time.Duration(float64(backoff) * (0.5 + rand.Float64()))
			if !retryable(err) || time.Since(began)+wait > 5*time.Minute {
				f.dropped.Add(1)
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			backoff = min(backoff*3/2, 30*time.Second)
		}
	}
}

// acceptedSince counts the agents with a request accepted after t.
func (f *fleet) acceptedSince(t time.Time) int {
	n := 0
	for i := range f.lastOK {
		if f.lastOK[i].Load() > t.UnixNano() {
			n++
		}
	}
	return n
}

// peak is the largest count of one second in [from, to) and that second's start.
func (f *fleet) peak(perSec *[perSecond]atomic.Int64, from, to time.Time) (int64, time.Time) {
	var best int64
	var at time.Time
	for s := max(0, int(from.Sub(f.born)/time.Second)); s < min(perSecond, int(to.Sub(f.born)/time.Second)+1); s++ {
		if v := perSec[s].Load(); v > best {
			best, at = v, f.born.Add(time.Duration(s)*time.Second)
		}
	}
	return best, at
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
