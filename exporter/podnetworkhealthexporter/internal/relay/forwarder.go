// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/netpulse/netpulse/internal/ratelog"
)

// Config of the connections to the other shards.
type Config struct {
	// Endpoints: shard i's address (host:port) at index i, one per shard (this shard's own
	// is not dialled), e.g. netpulse-gateway-<i>.<namespace>.svc:4317 (the chart's).
	Endpoints []string `mapstructure:"endpoints"`
	// Client: the gRPC client settings (TLS, auth, keepalive) of every connection; its
	// endpoint is not used (Endpoints are).
	Client configgrpc.ClientConfig `mapstructure:"client"`
	// QueueSize bounds the requests held per owner shard while its connection is slow or
	// down (default 1,000: ~10 s of a 10,000-agent shard's share for one owner at 10 s
	// rounds); beyond it a request is dropped and counted.
	QueueSize int `mapstructure:"queue_size"`
	// Timeout of one forwarded request (default 5 s); a request that fails is dropped and
	// counted (its agent's next round carries its cumulative counts again).
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxBatchPoints: queued requests to one owner are sent together, up to this many
	// data points a request (default 8,192).
	MaxBatchPoints int `mapstructure:"max_batch_points"`
	// MaxBatchBytes: ... and up to this many bytes of encoded request (default 2 MiB, half
	// the OTLP receiver's 4 MiB max_recv_msg_size): the relaying-shard fan-in bench at
	// 2 x 4,000 agents sent batches of 8,192 points of 4.2-5.2 MB that the owner refused
	// whole (ResourceExhausted), ~10 % of the forwarded points.
	MaxBatchBytes int `mapstructure:"max_batch_bytes"`
	// BatchTimeout: a sender waits this long after a request's first part for more to the
	// same owner (default 200ms; negative: sends what is queued at once). Without it a
	// relaying shard forwarded about one request per agent request to each owner (the
	// fan-in bench: 180/s per shard of 2 with 2,000 agents each, 0.9 per agent request),
	// which at S shards is up to S-1 per agent request; the points wait at most this long,
	// a fiftieth of a 10 s round.
	BatchTimeout time.Duration `mapstructure:"batch_timeout"`
}

// Defaults of Config.
const (
	DefaultQueueSize      = 1000
	DefaultTimeout        = 5 * time.Second
	DefaultMaxBatchPoints = 8192
	DefaultBatchTimeout   = 200 * time.Millisecond
	DefaultMaxBatchBytes  = 2 << 20
)

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBatchPoints == 0 {
		c.MaxBatchPoints = DefaultMaxBatchPoints
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	return c
}

// Check names the offending key (the exporter calls it when the relay is enabled).
func (c Config) Check() error {
	var errs []error
	for i, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" || strings.ContainsAny(e, " \t\r\n") {
			errs = append(errs, fmt.Errorf("endpoints::%d: %q: want host:port", i, e))
		}
	}
	if c.QueueSize < 0 || c.QueueSize > 1_000_000 {
		errs = append(errs, fmt.Errorf("queue_size: %d out of range [1, 1000000]", c.QueueSize))
	}
	if c.Timeout < 0 || c.Timeout > time.Minute {
		errs = append(errs, fmt.Errorf("timeout: %v out of range [1ms, 1m]", c.Timeout))
	}
	if c.MaxBatchPoints < 0 || c.MaxBatchPoints > 1_000_000 {
		errs = append(errs, fmt.Errorf("max_batch_points: %d out of range [1, 1000000]", c.MaxBatchPoints))
	}
	if c.MaxBatchBytes < 0 || c.MaxBatchBytes > 64<<20 {
		errs = append(errs, fmt.Errorf("max_batch_bytes: %d out of range [1, 67108864]", c.MaxBatchBytes))
	}
	if c.BatchTimeout > 10*time.Second {
		errs = append(errs, fmt.Errorf("batch_timeout: %v above 10s (the points of a round wait for it)", c.BatchTimeout))
	}
	return errors.Join(errs...)
}

// Outcomes of a forwarded data point.
const (
	OutcomeForwarded  = "forwarded"
	OutcomeQueueFull  = "queue_full"
	OutcomeSendFailed = "send_failed"
)

// Result reports data points to shard with outcome.
type Result func(shard, points int, outcome string)

// Forwarder sends each owner shard its parts over one connection, from a bounded queue:
// Forward never blocks, and what cannot be held or sent is counted, never retried (a
// shard's own verdicts never wait for another's).
type Forwarder struct {
	cfg          Config
	self, shards int
	result       Result
	log          *ratelog.Logger
	// endpointOf is shard s's endpoint (tests replace it).
	endpointOf func(s int) string

	mu      sync.Mutex
	started bool
	stopped bool
	conns   []*grpc.ClientConn
	queues  []chan part
	// logs: declared checks' results for shard 0, which folds them in (nil on shard 0).
	logs chan plog.Logs
	// ctx is cancelled by Shutdown: the senders stop, a request in flight is abandoned.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type part struct {
	md            pmetric.Metrics
	points, bytes int
}

// sizer measures a part's encoded size (the batch's byte bound).
var sizer pmetric.ProtoMarshaler

// New returns a Forwarder of shard self of shards; result may be nil.
func New(cfg Config, self, shards int, result Result, logger *zap.Logger) *Forwarder {
	if result == nil {
		result = func(int, int, string) {}
	}
	f := &Forwarder{cfg: cfg.WithDefaults(), self: self, shards: shards, result: result, log: ratelog.New(logger, 30*time.Second, 2)}
	f.endpointOf = func(s int) string {
		if s < len(f.cfg.Endpoints) {
			return f.cfg.Endpoints[s]
		}
		return ""
	}
	return f
}

// Start makes one client connection per other shard (gRPC connects when first used) and
// its sender.
func (f *Forwarder) Start(ctx context.Context, host component.Host, set component.TelemetrySettings) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started || f.stopped {
		return nil
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.conns = make([]*grpc.ClientConn, f.shards)
	f.queues = make([]chan part, f.shards)
	for s := range f.shards {
		if s == f.self {
			continue
		}
		cc := f.cfg.Client
		cc.Endpoint = f.endpointOf(s)
		if cc.Endpoint == "" {
			f.closeConns()
			f.cancel()
			return fmt.Errorf("relay: no endpoint for shard %d of %d", s, f.shards)
		}
		conn, err := cc.ToClientConn(ctx, host.GetExtensions(), set)
		if err != nil {
			f.closeConns()
			f.cancel()
			return fmt.Errorf("relay: the connection to shard %d (%s): %w", s, cc.Endpoint, err)
		}
		f.conns[s] = conn
		f.queues[s] = make(chan part, f.cfg.QueueSize)
	}
	for s, q := range f.queues {
		if q == nil {
			continue
		}
		f.wg.Add(1)
		go f.send(s, pmetricotlp.NewGRPCClient(f.conns[s]), q)
	}
	if f.self != 0 {
		f.logs = make(chan plog.Logs, f.cfg.QueueSize)
		f.wg.Add(1)
		go f.sendLogs(plogotlp.NewGRPCClient(f.conns[0]))
	}
	f.started = true
	return nil
}

// Forward queues parts[s] for each shard s but self; it never blocks.
func (f *Forwarder) Forward(parts []pmetric.Metrics) {
	f.mu.Lock()
	queues := f.queues
	running := f.started && !f.stopped
	f.mu.Unlock()
	for s, md := range parts {
		if s == f.self || md == (pmetric.Metrics{}) {
			continue
		}
		n := md.DataPointCount()
		if n == 0 {
			continue
		}
		if !running || s >= len(queues) || queues[s] == nil {
			f.result(s, n, OutcomeSendFailed)
			continue
		}
		select {
		case queues[s] <- part{md: md, points: n, bytes: sizer.MetricsSize(md)}:
		default:
			f.result(s, n, OutcomeQueueFull)
			f.log.Log(zap.WarnLevel, "relay: the queue to a shard is full; its points are dropped", zap.Int("shard", s), zap.Int("queue_size", f.cfg.QueueSize))
		}
	}
}

// ForwardLogs queues declared checks' results for shard 0 (ld carries each Resource's
// relayed identity); it never blocks. Outcomes are reported as shard 0's, in records.
func (f *Forwarder) ForwardLogs(ld plog.Logs) {
	n := ld.LogRecordCount()
	if n == 0 {
		return
	}
	f.mu.Lock()
	logs := f.logs
	running := f.started && !f.stopped
	f.mu.Unlock()
	if !running || logs == nil {
		f.result(0, n, OutcomeSendFailed)
		return
	}
	select {
	case logs <- ld:
	default:
		f.result(0, n, OutcomeQueueFull)
	}
}

// sendLogs sends the queued check results to shard 0, one request each (they are rare: a
// record per check and interval).
func (f *Forwarder) sendLogs(client plogotlp.GRPCClient) {
	defer f.wg.Done()
	for {
		var ld plog.Logs
		select {
		case <-f.ctx.Done():
			return
		case ld = <-f.logs:
		}
		n := ld.LogRecordCount()
		ctx, cancel := context.WithTimeout(f.ctx, f.cfg.Timeout)
		_, err := client.Export(ctx, plogotlp.NewExportRequestFromLogs(ld))
		cancel()
		if err != nil {
			f.result(0, n, OutcomeSendFailed)
			f.log.Log(zap.WarnLevel, "relay: forwarding check results to shard 0 failed; they are dropped", zap.Int("records", n), zap.Error(err))
			continue
		}
		f.result(0, n, OutcomeForwarded)
	}
}

// send is shard s's sender: it sends what is queued, batched up to MaxBatchPoints, and
// waits up to BatchTimeout after a batch's first part for more.
func (f *Forwarder) send(s int, client pmetricotlp.GRPCClient, q chan part) {
	defer f.wg.Done()
	var linger <-chan time.Time // nil: take what is queued, no wait
	var next *part              // taken from the queue, past the last batch's bounds
	for {
		var p part
		if next != nil {
			p, next = *next, nil
		} else {
			select {
			case <-f.ctx.Done():
				return
			case p = <-q:
			}
		}
		batch, n, size := p.md, p.points, p.bytes
		// add appends p to the batch, or keeps it for the next one when it would take the
		// batch past its bounds (false).
		add := func(p part) bool {
			if n+p.points > f.cfg.MaxBatchPoints || size+p.bytes > f.cfg.MaxBatchBytes {
				next = &p
				return false
			}
			p.md.ResourceMetrics().MoveAndAppendTo(batch.ResourceMetrics())
			n, size = n+p.points, size+p.bytes
			return true
		}
		var timer *time.Timer
		if f.cfg.BatchTimeout > 0 {
			timer = time.NewTimer(f.cfg.BatchTimeout)
			linger = timer.C
		}
	more:
		for n < f.cfg.MaxBatchPoints && size < f.cfg.MaxBatchBytes {
			select {
			case p = <-q:
				if !add(p) {
					break more
				}
				continue
			default:
			}
			if linger == nil {
				break
			}
			select {
			case p = <-q:
				if !add(p) {
					break more
				}
			case <-linger:
				linger = nil
				break more
			case <-f.ctx.Done():
				timer.Stop()
				f.result(s, n, OutcomeSendFailed) // abandoned by Shutdown, as a send in flight is
				return
			}
		}
		if timer != nil {
			timer.Stop()
			linger = nil
		}
		ctx, cancel := context.WithTimeout(f.ctx, f.cfg.Timeout)
		_, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(batch))
		cancel()
		if err != nil {
			f.result(s, n, OutcomeSendFailed)
			f.log.Log(zap.WarnLevel, "relay: forwarding to a shard failed; its points are dropped", zap.Int("shard", s), zap.Int("data_points", n), zap.Error(err))
			continue
		}
		f.result(s, n, OutcomeForwarded)
	}
}

// Shutdown stops the senders (what is queued is dropped) and closes the connections; safe
// without Start and twice.
func (f *Forwarder) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return nil
	}
	f.stopped = true
	started := f.started
	f.mu.Unlock()
	if !started {
		return nil
	}
	f.cancel()
	waited := make(chan struct{})
	go func() {
		f.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeConns()
	return nil
}

func (f *Forwarder) closeConns() {
	for i, c := range f.conns {
		if c != nil {
			_ = c.Close()
			f.conns[i] = nil
		}
	}
}
