// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/decode"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/checks"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/controllers"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/relay"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/livematrix"
	"github.com/netpulse/netpulse/internal/shard"
)

// reconcileEvery is how often the leader turns summaries into writes. Verdict changes
// reach the API within one probe interval plus this.
const reconcileEvery = time.Second

// expireEvery is how often every replica, leader or standby, forgets the decoder's idle
// streams and the readiness gate's old reaches: a standby decodes what agents send it
// (they can reach it by pod IP) and must free it without waiting for a Lease.
const expireEvery = time.Second

// pnhExporter summarises observations on every replica (so a new leader starts warm) and,
// on the replica holding the Lease, writes them to the API within the write budget.
type pnhExporter struct {
	cfg     *Config
	set     exporter.Settings
	logger  *zap.Logger
	tb      *metadata.TelemetryBuilder
	decoder *decode.Decoder
	// binder is nil unless require_authenticated_observers.
	binder *binder
	// relay forwards this shard's agents' points to their owner shards (nil unless
	// relay.enabled).
	relay *relay.Forwarder
	// engine: the verdict stage with the pairs' write policy (plan.Engine; pure), fed by
	// consume on every replica.
	engine *plan.Engine
	// controllers: one per kind of object written (controllers.go), in the order each
	// reconcile tick runs them. The fields below them are the same controllers by kind,
	// for the gauges, consume and tests.
	controllers []controllers.Controller
	pairs       *controllers.Pairs
	nodes       *controllers.Nodes
	zones       *controllers.Zones
	readiness   *controllers.Readiness // nil unless readiness_gate.enabled
	checks      *checks.Controller     // nil unless checks.enabled (and on shard 0)

	mu sync.Mutex // guards rejectedKeys, eventsBySource and done

	kube     kubernetes.Interface
	pnh      versioned.Interface
	writer   *apply.Writer
	eventsRL *rate.Limiter // nil unless events.enabled
	hostname string        // the Events' reporting instance
	// rejectedKeys: keys whose last write the API refused (logged once each); rejectLog
	// paces the log beyond maxRejectedKeys. Guarded by mu.
	rejectedKeys map[string]struct{}
	rejectLog    *rate.Limiter
	// streamLimitLog paces the warning about points refused beyond a source's streams.
	streamLimitLog *rate.Limiter
	// live hands accepted observations to the connectivity view in this process (live.go);
	// unproduce ends this exporter's mark on it.
	live      *livematrix.Hub
	unproduce func()

	cancel       context.CancelFunc
	done         []<-chan struct{}
	shutdownOnce sync.Once

	// eventsBySource is each source's share of eventsRL (eventShareOf; guarded by mu),
	// eventDropLog paces the log of its drops.
	eventsBySource *writequeue.Share
	eventDropLog   *rate.Limiter
}

func newExporter(cfg *Config, set exporter.Settings) (*pnhExporter, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	e := &pnhExporter{
		cfg:    cfg,
		set:    set,
		logger: set.Logger,
		tb:     tb,
		decoder: decode.NewDecoder(decode.DecoderConfig{
			StreamTTL:              3 * cfg.MaxProbeInterval,
			FirstSightMaxAge:       cfg.MaxProbeInterval,
			MaxPerRound:            cfg.MaxEchoesPerRound,
			StableTargetsPerSource: cfg.MaxStableTargetsPerSource,
			MinRoundInterval:       cfg.MinProbeInterval,
			MaxFutureSkew:          observation.FutureSkew(cfg.MinProbeInterval),
		}),
		engine:         plan.New(engineConfig(cfg)).WithPolicy(writePolicy(cfg)),
		rejectLog:      rate.NewLimiter(rate.Every(30*time.Second), 1),
		streamLimitLog: rate.NewLimiter(rate.Every(30*time.Second), 1),
		live:           livematrix.Default,
	}
	e.newControllers()
	if err := e.registerGauges(); err != nil {
		return nil, err
	}
	if cfg.RequireAuthenticatedObservers {
		e.binder = newBinder(set.Logger)
	}
	if cfg.Relay.Enabled {
		e.relay = relay.New(cfg.Relay.Config, cfg.Shard.Index, cfg.Shard.Count, func(to, n int, outcome string) {
			tb.PodNetworkHealthRelayDatapoints.Add(context.Background(), int64(n),
				metric.WithAttributes(attribute.Int("relay_shard", to), attribute.String("relay_outcome", outcome)))
		}, set.Logger)
	}
	if cfg.LeaderElection.Enabled {
		// A standby until it takes the Lease (Resume): it bounds and expires its own state.
		e.engine.Standby()
	}
	return e, nil
}

// targetName is the name a target is known by: the pod or node name, else its address.
func targetName(k verdict.TargetKey) string {
	if k.Name != "" {
		return k.Name
	}
	return observation.EndpointText(k.Address, k.Port, k.Endpoint)
}

// engineConfig maps the exporter's configuration onto the decision engine.
func engineConfig(cfg *Config) verdict.Config {
	return verdict.Config{
		Summary: verdict.SummaryConfig{
			Window:                cfg.Window,
			FailuresToUnreachable: cfg.FailuresToUnreachable,
			SuccessesToReachable:  cfg.SuccessesToReachable,
			MaxOutages:            cfg.MaxOutages,
			FlapWindow:            cfg.FlapWindow,
		},
		Heartbeat:            cfg.Heartbeat,
		TargetQuorum:         cfg.TargetQuorum,
		TargetRecovery:       cfg.TargetRecovery,
		TargetTTL:            cfg.TargetTTL,
		FailingPairRetention: cfg.FailingPairRetention,
		ProblemsOnly:         cfg.PairObjects == PairObjectsProblems,
		Namespace:            cfg.Namespace,
		WritesPerSecond:      float64(cfg.QPS),
		MaxProbeInterval:     cfg.MaxProbeInterval,
		MaxFutureSkew:        observation.FutureSkew(cfg.MinProbeInterval),
		Gray:                 grayVerdict(cfg),
		// No accepted agent probes more often than min_probe_interval; a quarter, as rounds
		// are stamped when they end (verdict/pace.go).
		MinRoundSpacing: cfg.MinProbeInterval / 4,
	}
}

// grayVerdict is the gray judgement's configuration: zones.enabled also judges the loss
// between zone pairs (verdict/grayzones.go).
func grayVerdict(cfg *Config) verdict.GrayConfig {
	g := cfg.Gray.verdict()
	g.ZonesOff = !cfg.Zones.Enabled
	return g
}

// writePolicy maps the exporter's configuration onto the objects' write policy.
func writePolicy(cfg *Config) plan.Policy {
	return plan.Policy{HeartbeatInterval: cfg.Heartbeat, LeaseFreshness: cfg.leaseFreshness(), RTTTolerance: cfg.RTTTolerance, LossTolerance: cfg.LossTolerance, LossFloor: cfg.Gray.Loss.Threshold, FlapWindow: cfg.FlapWindow}
}

// consume decodes and feeds the engine; it never waits for the API, so the pipeline never
// blocks on an unreachable API server and nothing already collected is lost.
func (e *pnhExporter) consume(ctx context.Context, md pmetric.Metrics) error {
	now := time.Now()
	if e.binder != nil {
		var rejected map[string]int
		md, rejected = e.binder.bind(ctx, md)
		for reason, n := range rejected {
			e.tb.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", reason)))
		}
	}
	relayed := e.forward(ctx, md)
	res := e.decoder.Decode(md, now)
	if e.cfg.Shard.sharded() {
		// The agents route by the same function; what still arrives for another shard's
		// target (a sender's own stamp, or agents of another shard count during a change)
		// is not this shard's to judge. It still shows that its source is reporting: an agent
		// of the previous count (an unsharded one sends no heartbeat at all) whose points
		// of a round all went to other shards' targets is not silent here. Its successes
		// show that its node works: the node quorum counts it as a working observer
		// (verdict.Engine.ReachedElsewhere), which this shard's own targets may not show.
		before := len(res.Observations)
		var alive []observation.Heartbeat
		var elsewhere []observation.Observation
		res.Observations = slices.DeleteFunc(res.Observations, func(o observation.Observation) bool {
			if e.owns(o.Target) {
				return false
			}
			if o.Success {
				elsewhere = append(elsewhere, o)
			}
			// One per source and round: an agent's request carries its round's points together.
			if n := len(alive); n == 0 || alive[n-1].Source.UID != o.Source.UID || !alive[n-1].At.Equal(o.Timestamp) {
				alive = append(alive, observation.Heartbeat{Source: o.Source, At: o.Timestamp})
			}
			return true
		})
		if n := before - len(res.Observations); n > 0 {
			if !relayed {
				// Relayed points went to their owners (relay_datapoints): not skipped.
				e.tb.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", "other_shard")))
			}
			// Counted once, as other_shard: what Heard cannot use (no source UID, dated in
			// the future) is not counted again.
			e.engine.Heard(alive, now)
			e.engine.ReachedElsewhere(elsewhere, now)
		}
	}
	if n := e.engine.Heard(res.Heartbeats, now); n > 0 {
		e.tb.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", "unusable_heartbeat")))
	}
	ignored := e.engine.Observe(res.Observations, now)
	e.recordLive(res.Observations, now)
	if e.readiness != nil {
		e.readiness.Observe(res.Observations)
	}
	for reason, n := range res.Skipped {
		e.tb.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", string(reason))))
	}
	if n := res.Skipped[decode.SkipStreamLimit]; n > 0 && e.streamLimitLog.Allow() {
		// A source beyond its streams loses its loss and RTT: a flood, or an admission
		// limit raised without this exporter's.
		e.logger.Warn("pod_network_health: cumulative points refused beyond a source's streams (loss and RTT of their targets are not used); if agents have more stable targets, raise max_stable_targets_per_source here with k8s_net_attributes'",
			zap.Int("points", n), zap.Int("max_stable_targets_per_source", e.cfg.MaxStableTargetsPerSource),
			zap.Int("streams_per_source", decode.StreamsPerSource(e.cfg.MaxStableTargetsPerSource)))
	}
	if n := len(res.Observations) - ignored; n > 0 {
		e.tb.PodNetworkHealthObservations.Add(ctx, int64(n))
	}
	if ignored > 0 {
		e.tb.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(ignored), metric.WithAttributes(attribute.String("reason", "unusable_observation")))
	}
	return nil
}

// forward hands the points of md that other shards own to the relay (with relay.enabled,
// for an agent's own request: a relay's is never forwarded again) and reports whether it
// did. The caller is the binder's authenticated agent; each forwarded Resource carries its
// identity for the owner to believe (identity.MatchResource).
func (e *pnhExporter) forward(ctx context.Context, md pmetric.Metrics) bool {
	if e.relay == nil {
		return false
	}
	id, _, ok := identity.FromContext(ctx)
	if !ok || id.Role != identity.RoleAgent {
		return false
	}
	e.relay.Forward(relay.Split(md, e.cfg.Shard.Count, e.cfg.Shard.Index, e.ownerOf, decode.IsProbeMetric, id))
	return true
}

// ownerOf is the shard that owns a data point: its target's (owns), or every shard for
// the agent's heartbeat; a point without a target stays here (Decode counts it).
func (e *pnhExporter) ownerOf(metric string, attrs pcommon.Map) int {
	if metric == contract.MetricRounds {
		return -1
	}
	t, ok := decode.TargetOf(attrs)
	switch {
	case !ok:
		return e.cfg.Shard.Index
	case t.Kind == observation.TargetExternal:
		return 0
	}
	return shard.Of(t.Node, e.cfg.Shard.Count)
}

// owns: the target is this shard's (always, unsharded). Pod and Node targets go by their
// node (a pod whose node the index does not know goes by "", shard 0's, as the agents
// route it only if they do not know it either); External targets are shard 0's.
func (e *pnhExporter) owns(t observation.Target) bool {
	if t.Kind == observation.TargetExternal {
		return e.cfg.Shard.Index == 0
	}
	return e.cfg.Shard.owns(t.Node)
}

// consumeLogs takes declared checks' results (pod_probe's check log records); other log
// records are ignored. Like consume, it never waits for the API.
func (e *pnhExporter) consumeLogs(ctx context.Context, ld plog.Logs) error {
	if e.checks != nil {
		e.checks.ConsumeLogs(ctx, ld)
		return nil
	}
	// Another shard than 0, relaying: its agents' (and sidecars') check results go to shard
	// 0, which folds them in, with the identity they were authenticated by; a relay's are
	// not forwarded again.
	if e.relay != nil {
		if id, _, ok := identity.FromContext(ctx); ok && id.Role != identity.RoleRelay {
			e.relay.ForwardLogs(relay.StampLogs(ld, id))
		}
	}
	return nil
}

// start builds the clients and starts campaigning (or writing, without leader election).
// It returns at once: nothing here waits for the API server.
func (e *pnhExporter) start(_ context.Context, host component.Host) error {
	restCfg, err := e.cfg.RESTConfig("netpulse-pod-network-health")
	if err != nil {
		return err
	}
	// qps/burst are the write budget, enforced by the writer over every kind of write; the
	// client's own limiter only keeps reads (informer lists, the Lease) from bursting.
	restCfg.QPS, restCfg.Burst = max(4*restCfg.QPS, 20), max(4*restCfg.Burst, 40)
	if e.kube, err = kubernetes.NewForConfig(restCfg); err != nil {
		return err
	}
	if e.pnh, err = kubeclient.PodNetworkHealthClient(restCfg); err != nil {
		return err
	}
	e.initWriter(e.pnh)
	if e.relay != nil {
		if err := e.relay.Start(context.Background(), host, e.set.TelemetrySettings); err != nil {
			return err
		}
	}
	e.unproduce = e.live.Produce()
	for _, c := range e.controllers {
		c.Start(e.kube, e.pnh)
	}

	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	expiring := make(chan struct{})
	go func() {
		defer close(expiring)
		tick := time.NewTicker(expireEvery)
		defer tick.Stop()
		e.expireLoop(ctx, tick.C)
	}()
	e.mu.Lock()
	e.done = append(e.done, expiring)
	e.mu.Unlock()

	lead := func(leadCtx context.Context) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.lead(leadCtx)
		}()
		e.mu.Lock()
		e.done = append(e.done, done)
		e.mu.Unlock()
	}
	if !e.cfg.LeaderElection.Enabled {
		lead(ctx)
		return nil
	}
	// A replica that lost the Lease while running ends the collector, as Kubernetes' own
	// controllers do: the agents connected to it (the gateway Service selected it while it
	// led, and gRPC keeps connections for max_connection_age) follow the Service to the new
	// writer at once instead of feeding a replica that no longer writes, and the restarted
	// container campaigns again as a standby that resumes from the API.
	lost := func() {
		componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(errLeaseLost))
	}
	done, err := apply.LeaderLoop(ctx, e.kube, leaseOf(e.cfg.LeaderElection, e.cfg.Shard), e.logger, lead, lost)
	if err != nil {
		cancel()
		return fmt.Errorf("leader election: %w", err)
	}
	e.mu.Lock()
	e.done = append(e.done, done)
	e.mu.Unlock()
	return nil
}

// initWriter builds the writer over client with the write budget (qps, burst; the
// declared checks' share of it) and the Event limiters: the pairs' (events.per_minute) and
// the declared checks' own (checks.events_per_minute), so flapping checks never use up the
// pairs' Events.
func (e *pnhExporter) initWriter(client versioned.Interface) {
	var opts []apply.WriterOption
	if e.cfg.Shard.sharded() {
		opts = append(opts, apply.WithObjectLabels(map[string]string{v1alpha1.LabelShard: e.cfg.Shard.label()}))
	}
	e.writer = apply.NewWriter(client, e.cfg.Namespace, float64(e.cfg.QPS), e.cfg.Burst, e.logger, e.onWritten, opts...)
	if e.checks != nil {
		e.writer.SetCheckShare(e.cfg.Checks.WriteShare)
	}
	if e.cfg.Events.Enabled {
		e.hostname, _ = os.Hostname()
		e.eventsRL = rate.NewLimiter(rate.Limit(float64(e.cfg.Events.PerMinute)/60), e.cfg.Events.PerMinute)
		e.eventsBySource = eventShareOf(e.cfg.Events.PerMinute)
		e.eventDropLog = rate.NewLimiter(rate.Every(30*time.Second), 1)
		if le := e.cfg.LeaderElection; le.Identity != "" && le.LeaseNamespace != "" {
			// A refusal that lasts (apply/refusals.go) is reported on the gateway's own pod
			// (the Lease identity is the pod's name), at most every 10 min per kind of write.
			self := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: le.LeaseNamespace, Name: le.Identity}
			e.writer.OnForbidden(func(kind string, held int, err error) {
				e.enqueueEvent(self, corev1.EventTypeWarning, "WritesForbidden",
					fmt.Sprintf("The API server has refused every %s write for more than 40 s (403 Forbidden): %d held, retried one a minute. Grant the gateway's RBAC (node conditions need patch on nodes/status), keep the admission policy netpulse-gateway-writes in step with the configured condition types, or fix the admission webhook. %v", kind, held, err),
					time.Now(), writequeue.Event)
			})
		}
	}
}

// eventShareOf is one source's share of the pairs' Event limit of perMinute: a quarter of
// it a minute (7.5 at the default 30) after a burst of max(a quarter, 10). One compromised
// agent flipping its 16 pairs used up the whole limit, so a real outage's Events were
// dropped (issue 40, item 1); now it takes at most its share and leaves the rest (20 at
// once, 22.5 a minute by default) to the other sources. An honest source's outage Events
// (its stable pairs, at most 16, and one followed failing pair) fit its burst unless all
// of them change at once. State: writequeue.Share, the sources with an Event in the last
// burst/rate (80 s): at most N (~100 B each, 0.5 MB at 5,000 nodes).
func eventShareOf(perMinute int) *writequeue.Share {
	quarter := float64(perMinute) / 4
	return writequeue.NewShare(quarter/60, max(int(quarter), 10))
}

// expireLoop runs on every replica from start to shutdown: at each tick it forgets the
// decoder's streams not seen for their TTL, a standby engine's targets, observers and
// pairs not seen for target_ttl, and the readiness gate's reaches older than its memory,
// whether or not this replica leads.
func (e *pnhExporter) expireLoop(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick:
			e.decoder.Expire(now)
			e.engine.ExpireStandby(now) // nothing while leading: Judge expires
			if e.readiness != nil {
				e.readiness.Expire(now)
			}
		}
	}
}

// errLeaseLost is the fatal error a replica reports when its writer Lease was not renewed.
var errLeaseLost = errors.New("pod_network_health: lost the writer lease while running; exiting so that agents reconnect to the new writer (the container restarts as a standby)")

// lead is the writer's life while this replica holds the Lease.
func (e *pnhExporter) lead(ctx context.Context) {
	e.tb.PodNetworkHealthIsLeader.Record(ctx, 1)
	defer e.tb.PodNetworkHealthIsLeader.Record(context.Background(), 0)
	defer e.live.Lead()() // every agent sends here now: the live matrix is the cluster's
	if le := e.cfg.LeaderElection; le.Enabled && le.LeaderLabel != "" {
		if err := apply.LabelOwnPod(ctx, e.kube, leaseOf(le, e.cfg.Shard), "true"); err != nil {
			e.logger.Error("pod_network_health: cannot label this pod as the leader; agents behind a leader-selecting Service will not reach it", zap.Error(err))
		}
		defer func() {
			// Best effort: a replica that crashed loses its pod (and label) anyway.
			unlabelCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := apply.LabelOwnPod(unlabelCtx, e.kube, leaseOf(le, e.cfg.Shard), ""); err != nil {
				e.logger.Warn("pod_network_health: cannot remove the leader label", zap.Error(err))
			}
		}()
	}
	e.writer.StartInformer()
	for !e.writer.Synced(ctx) {
		if ctx.Err() != nil {
			return
		}
	}
	// Each controller resumes from what the API already holds (the pairs' from the
	// writer's informer, synced above; the checks' at their first reconcile, a quorum
	// read): a restart or a new leader neither rewrites unchanged objects nor forgets
	// stale ones. A future leadership starts from the API's state again.
	for _, c := range e.controllers {
		c.Lead(ctx)
	}
	defer func() {
		for _, c := range slices.Backward(e.controllers) {
			c.EndTerm()
		}
	}()
	workerCtx, stopWorkers := context.WithCancel(ctx)
	e.writer.Run(workerCtx, e.cfg.Workers)
	defer stopWorkers()

	tick := time.NewTicker(reconcileEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			e.reconcile(ctx, now)
		}
	}
}

// reconcile runs every controller's reconcile of one tick, in order.
func (e *pnhExporter) reconcile(ctx context.Context, now time.Time) {
	for _, c := range e.controllers {
		c.Reconcile(ctx, now)
	}
}

func (e *pnhExporter) onWritten(r apply.WriteResult) {
	outcome := "success"
	switch {
	case r.Forbidden && !r.Rejected:
		// Held by the writer (apply/refusals.go), which logs a refusal that lasts.
		outcome = "forbidden"
	case r.NotOurs:
		outcome = "not_ours"
		if e.firstRejection(r.Key) {
			e.logger.Info("pod_network_health: an object of this name is another shard's or another pair's; left alone (logged once per object)",
				zap.String("object", r.Key), zap.String("write_reason", r.Reason), zap.Error(r.Err))
		}
	case r.Rejected:
		outcome = "rejected"
		if e.firstRejection(r.Key) {
			e.logger.Warn("pod_network_health: the API refused a write; not retrying it (a newer state is written when it comes)",
				zap.String("object", r.Key), zap.String("write_reason", r.Reason), zap.Error(r.Err))
		}
	case r.Err != nil:
		outcome = "error"
		e.logger.Debug("pod_network_health: write failed; retrying with back-off", zap.String("object", r.Key), zap.Error(r.Err))
	default:
		e.mu.Lock()
		delete(e.rejectedKeys, r.Key)
		e.mu.Unlock()
	}
	e.tb.PodNetworkHealthAPIWrites.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("write_reason", r.Reason), attribute.String("outcome", outcome)))
}

// maxRejectedKeys bounds the keys remembered so that a refused write is logged once per
// object; beyond it refusals are logged at most every 30 s.
const maxRejectedKeys = 10_000

// firstRejection reports whether key's write is refused for the first time since it last
// succeeded (then it is logged).
func (e *pnhExporter) firstRejection(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, seen := e.rejectedKeys[key]; seen {
		return false
	}
	if len(e.rejectedKeys) >= maxRejectedKeys {
		return e.rejectLog.Allow()
	}
	if e.rejectedKeys == nil {
		e.rejectedKeys = map[string]struct{}{}
	}
	e.rejectedKeys[key] = struct{}{}
	return true
}

// emitPlanned writes the pairs' Events (an Event per real verdict change, plan.PairEvents,
// and per Degraded episode) through the writer, under the same budget as every other write
// (behind verdict changes, ahead of updates and heartbeats), each source's share and the
// pairs' Event limiter: events.per_minute caps their number on top; excess is dropped and
// logged, the status still carries the outage history.
func (e *pnhExporter) emitPlanned(evs []plan.Event) {
	if e.eventsRL == nil {
		return
	}
	now := time.Now()
	for _, ev := range evs {
		src := ev.Key.SourceUID
		if src == "" {
			src = ev.Key.SourceNamespace + "/" + ev.Key.SourcePod
		}
		e.mu.Lock()
		own := e.eventsBySource.Allow(src, now)
		e.mu.Unlock()
		if !own {
			e.tb.PodNetworkHealthWritesDropped.Add(context.Background(), 1, metric.WithAttributes(attribute.String("priority", writequeue.Event.String())))
			if e.eventDropLog.Allow() {
				e.logger.Info("pod_network_health: one source's share of the event rate limit reached; its events are dropped (logged at most every 30 s)",
					zap.String("source", ev.Key.SourceNamespace+"/"+ev.Key.SourcePod), zap.String("pair", ev.Key.String()), zap.String("reason", ev.Reason))
			}
			continue
		}
		if !e.eventsRL.Allow() {
			e.tb.PodNetworkHealthWritesDropped.Add(context.Background(), 1, metric.WithAttributes(attribute.String("priority", writequeue.Event.String())))
			e.logger.Info("pod_network_health: event rate limit reached; event dropped", zap.String("pair", ev.Key.String()), zap.String("reason", ev.Reason))
			continue
		}
		e.mu.Lock()
		e.eventsBySource.Take(src, now)
		e.mu.Unlock()
		e.enqueueEvent(corev1.ObjectReference{
			APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodNetworkHealth",
			Namespace: ev.Key.SourceNamespace, Name: plan.ObjectNameOf(ev.Key),
		}, ev.Type, ev.Reason, ev.Message, ev.At, writequeue.Event)
	}
}

// enqueueEvent writes one Event about obj through the writer (apply.Writer.Event) at
// priority p. The caller has taken its limiter's token.
func (e *pnhExporter) enqueueEvent(obj corev1.ObjectReference, typ, reason, msg string, t time.Time, p writequeue.Priority) {
	e.writer.Event(e.kube, e.hostname, obj, typ, reason, msg, t, p)
}

// shutdownFlush bounds how long a leader spends writing its pending verdicts and Events on
// shutdown (at ~5 writes/s, a couple of dozen).
const shutdownFlush = 5 * time.Second

// shutdown first lets a leader write its pending verdicts and Events (within shutdownFlush
// and ctx), then stops campaigning (releasing the Lease), the writer and the informers.
// Less urgent pending writes (first writes of healthy pairs, heartbeats, cleanup) are
// abandoned: the next leader recomputes them. Safe without start and twice.
func (e *pnhExporter) shutdown(ctx context.Context) error {
	e.shutdownOnce.Do(func() {
		if e.writer != nil {
			// A leader hands over its verdicts and Events before it releases the Lease
			// (bounded: the collector's shutdown budget, at most shutdownFlush).
			fctx, cancel := context.WithTimeout(ctx, shutdownFlush)
			// Declared checks' verdicts and Events too, after the pairs'.
			if !e.writer.Flush(fctx, writequeue.CheckEvent) {
				p := e.writer.PendingByPriority()
				if p[writequeue.Verdict]+p[writequeue.Event]+p[writequeue.CheckVerdict]+p[writequeue.CheckEvent] > 0 {
					e.logger.Warn("pod_network_health: shutting down with verdict writes or Events not yet in the API; the next leader re-derives them",
						zap.Int("verdicts", p[writequeue.Verdict]), zap.Int("events", p[writequeue.Event]),
						zap.Int("check_verdicts", p[writequeue.CheckVerdict]), zap.Int("check_events", p[writequeue.CheckEvent]))
				}
			}
			cancel()
		}
		if e.cancel != nil {
			e.cancel()
		}
		if e.relay != nil {
			if err := e.relay.Shutdown(ctx); err != nil {
				e.logger.Warn("pod_network_health: the relay's senders did not stop in time", zap.Error(err))
			}
		}
		e.mu.Lock()
		done := e.done
		e.mu.Unlock()
		for _, d := range done {
			<-d
		}
		if e.writer != nil {
			e.writer.Stop()
		}
		for _, c := range e.controllers {
			c.Shutdown()
		}
		if e.unproduce != nil {
			e.unproduce()
		}
		e.tb.Shutdown()
	})
	return nil
}

// leaseOf maps leader_election onto the apply stage's Lease: each shard leads its own,
// lease_name-index.
func leaseOf(le LeaderElectionConfig, sh ShardConfig) apply.Lease {
	name := le.LeaseName
	if sh.sharded() {
		name = fmt.Sprintf("%s-%d", name, sh.Index)
	}
	return apply.Lease{LeaseName: name, LeaseNamespace: le.LeaseNamespace, Identity: le.Identity,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod, LeaderLabel: le.LeaderLabel}
}
