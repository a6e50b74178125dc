package podnetworkhealthexporter

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/quorum"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/readiness"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/summary"
)

// Event reasons on verdict transitions.
const (
	EventOutageDetected = "ConnectivityOutageDetected"
	EventRestored       = "ConnectivityRestored"
)

// reconcileEvery is how often the leader turns summaries into writes. Verdict changes
// reach the API within one probe interval plus this.
const reconcileEvery = time.Second

// pnhExporter summarises observations on every replica (so a new leader starts warm) and,
// on the replica holding the Lease, writes them to the API within the write budget.
type pnhExporter struct {
	cfg    *Config
	set    exporter.Settings
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder
	policy summary.Policy

	mu      sync.Mutex // guards the pure state below
	decoder *summary.Decoder
	summ    *summary.Summarizer
	written map[summary.PairKey]summary.Written
	gate    *readiness.Gate // nil unless readiness_gate.enabled
	// badObservers are the nodes the quorum rule found to have a pod-network problem; the
	// Unreachable pairs observed from them are the observer's fault, not the target's.
	badObservers map[string]bool
	// writtenBadObserver records, per pair, whether its last write said so.
	writtenBadObserver map[summary.PairKey]bool
	// dirty holds the pairs observed since the last reconcile; fullPass asks the next one
	// to look at every pair (a new leadership term, a change of blamed observers). Only
	// these and the pairs whose heartbeat is due are summarised each tick, so the work
	// per tick follows the observation rate, not the number of pairs.
	dirty    map[summary.PairKey]struct{}
	fullPass bool

	kube     kubernetes.Interface
	pnh      versioned.Interface
	writer   *writer
	events   record.EventRecorder
	eventsBC record.EventBroadcaster
	eventsRL *rate.Limiter
	nodes    cache.SharedIndexInformer
	nodesF   informers.SharedInformerFactory
	nodeSeen map[string]nodeWrite
	gated    *gatedPods

	leading      bool
	cancel       context.CancelFunc
	done         []<-chan struct{}
	shutdownOnce sync.Once
	stopNodes    chan struct{}
}

type nodeWrite struct {
	cond corev1.NodeCondition
	at   time.Time
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
		policy: summary.Policy{
			HeartbeatInterval: cfg.Heartbeat,
			RTTTolerance:      cfg.RTTTolerance,
			LossTolerance:     cfg.LossTolerance,
		},
		decoder: summary.NewDecoder(summary.DecoderConfig{StreamTTL: max(2*cfg.TargetTTL, time.Hour)}),
		summ: summary.NewSummarizer(summary.Config{
			Window:                cfg.Window,
			FailuresToUnreachable: cfg.FailuresToUnreachable,
			SuccessesToReachable:  cfg.SuccessesToReachable,
			MaxOutages:            cfg.MaxOutages,
		}),
		written:            map[summary.PairKey]summary.Written{},
		badObservers:       map[string]bool{},
		writtenBadObserver: map[summary.PairKey]bool{},
		dirty:              map[summary.PairKey]struct{}{},
		nodeSeen:           map[string]nodeWrite{},
		stopNodes:          make(chan struct{}),
	}
	if cfg.ReadinessGate.Enabled {
		e.gate = readiness.NewGate(readiness.Config{
			ConditionType:     cfg.ReadinessGate.ConditionType,
			MaxFlipsPerMinute: cfg.ReadinessGate.MaxFlipsPerMinute,
			FailOpenTimeout:   cfg.ReadinessGate.FailOpenTimeout,
		})
	}
	return e, nil
}

// consume decodes and summarises; it never waits for the API, so the pipeline never blocks
// on an unreachable API server and nothing already collected is lost.
func (e *pnhExporter) consume(ctx context.Context, md pmetric.Metrics) error {
	now := time.Now()
	e.mu.Lock()
	res := e.decoder.Decode(md, now)
	ignored := e.summ.Add(res.Observations...)
	for i := range res.Observations {
		e.dirty[summary.KeyOf(&res.Observations[i])] = struct{}{}
	}
	if e.gate != nil {
		e.gate.Observe(res.Observations...)
	}
	e.mu.Unlock()
	for reason, n := range res.Skipped {
		e.tb.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", string(reason))))
	}
	if n := len(res.Observations) - ignored; n > 0 {
		e.tb.PodNetworkHealthObservations.Add(ctx, int64(n))
	}
	if ignored > 0 {
		e.tb.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(ignored), metric.WithAttributes(attribute.String("reason", "unusable_observation")))
	}
	return nil
}

// start builds the clients and starts campaigning (or writing, without leader election).
// It returns at once: nothing here waits for the API server.
func (e *pnhExporter) start(_ context.Context, _ component.Host) error {
	restCfg, err := e.cfg.RESTConfig("netpulse-pod-network-health")
	if err != nil {
		return fmt.Errorf("pod_network_health: %w", err)
	}
	if e.kube, err = kubernetes.NewForConfig(restCfg); err != nil {
		return fmt.Errorf("pod_network_health: %w", err)
	}
	// The CRD has no protobuf encoding.
	crdCfg := *restCfg
	crdCfg.ContentType, crdCfg.AcceptContentTypes = "application/json", "application/json"
	if e.pnh, err = versioned.NewForConfig(&crdCfg); err != nil {
		return fmt.Errorf("pod_network_health: %w", err)
	}
	e.writer = newWriter(e.pnh, e.cfg.Namespace, float64(e.cfg.QPS), e.cfg.Burst, e.logger, e.onWritten)

	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	if e.cfg.Events.Enabled {
		e.eventsBC = record.NewBroadcaster(record.WithContext(ctx))
		e.eventsBC.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.kube.CoreV1().Events("")})
		e.events = e.eventsBC.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "netpulse-pod-network-health"})
		e.eventsRL = rate.NewLimiter(rate.Limit(float64(e.cfg.Events.PerMinute)/60), e.cfg.Events.PerMinute)
	}
	if e.cfg.NodeConditions.Enabled {
		e.nodesF = informers.NewSharedInformerFactoryWithOptions(e.kube, 0, informers.WithTransform(stripNodeToCondition(e.cfg.NodeConditions.Type)))
		e.nodes = e.nodesF.Core().V1().Nodes().Informer()
		e.nodesF.Start(e.stopNodes)
	}
	if e.gate != nil {
		e.gated = newGatedPods(e)
		e.gated.factory.Start(e.stopNodes)
	}

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
	done, err := leaderLoop(ctx, e.kube, e.cfg.LeaderElection, e.logger, lead)
	if err != nil {
		cancel()
		return fmt.Errorf("pod_network_health: leader election: %w", err)
	}
	e.mu.Lock()
	e.done = append(e.done, done)
	e.mu.Unlock()
	return nil
}

// lead is the writer's life while this replica holds the Lease.
func (e *pnhExporter) lead(ctx context.Context) {
	e.tb.PodNetworkHealthIsLeader.Record(ctx, 1)
	defer e.tb.PodNetworkHealthIsLeader.Record(context.Background(), 0)
	if le := e.cfg.LeaderElection; le.Enabled && le.LeaderLabel != "" {
		if err := labelOwnPod(ctx, e.kube, le, "true"); err != nil {
			e.logger.Error("pod_network_health: cannot label this pod as the leader; agents behind a leader-selecting Service will not reach it", zap.Error(err))
		}
		defer func() {
			// Best effort: a replica that crashed loses its pod (and label) anyway.
			unlabelCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := labelOwnPod(unlabelCtx, e.kube, le, ""); err != nil {
				e.logger.Warn("pod_network_health: cannot remove the leader label", zap.Error(err))
			}
		}()
	}
	e.writer.startInformer()
	for !e.writer.synced(ctx) {
		if ctx.Err() != nil {
			return
		}
	}
	// Resume the write budget from what the API already holds: a restart or a new leader
	// does not rewrite every object.
	e.mu.Lock()
	e.leading = true
	e.fullPass = true
	for _, o := range e.writer.existing() {
		k := keyOfObject(o)
		if _, ok := e.written[k]; !ok {
			e.written[k] = writtenOf(o)
		}
	}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.leading = false
		// A future leadership starts from the API's state again.
		clear(e.written)
		clear(e.writtenBadObserver)
		e.mu.Unlock()
	}()
	if !e.cfg.NodeConditions.Enabled {
		e.cleanupNodeConditions(ctx)
	}
	workerCtx, stopWorkers := context.WithCancel(ctx)
	e.writer.run(workerCtx, e.cfg.Workers)
	defer stopWorkers()

	tick := time.NewTicker(reconcileEvery)
	defer tick.Stop()
	lastNodes := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			e.reconcile(ctx, now)
			if now.Sub(lastNodes) >= 5*time.Second {
				lastNodes = now
				if e.cfg.NodeConditions.Enabled {
					e.reconcileNodes(ctx, now)
				}
				e.reconcileReadiness(ctx, now)
			}
		}
	}
}

// reconcile turns summaries into desired objects, within the write budget.
func (e *pnhExporter) reconcile(ctx context.Context, now time.Time) {
	e.mu.Lock()
	for _, k := range e.summ.ExpireIdle(now, e.cfg.TargetTTL) {
		delete(e.written, k)
		delete(e.writtenBadObserver, k)
		e.writer.set(&desired{obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: k.SourceNamespace, Name: nameOf(k)}}, reason: "delete", delete: true})
	}
	e.decoder.Expire(now)
	transitions := e.summ.Transitions()
	var keys []summary.PairKey
	if e.fullPass {
		keys = e.summ.Keys()
		e.fullPass = false
	} else {
		for k := range e.dirty {
			keys = append(keys, k)
		}
		for k, w := range e.written {
			if _, ok := e.dirty[k]; !ok && now.Sub(w.At) >= e.policy.HeartbeatInterval {
				keys = append(keys, k)
			}
		}
	}
	clear(e.dirty)
	var sets []*desired
	for _, k := range keys {
		if k.SourceUID == "" || k.SourceNamespace == "" || (e.cfg.Namespace != "" && k.SourceNamespace != e.cfg.Namespace) {
			continue
		}
		s, ok := e.summ.Summary(k)
		if !ok {
			continue
		}
		badObserver := s.Verdict == summary.VerdictUnreachable && e.badObservers[s.ObservedFromNode]
		write, reason := summary.Decide(e.written[s.Key], s, now, e.policy)
		if !write && badObserver != e.writtenBadObserver[s.Key] {
			write, reason = true, "observer"
		}
		if !write {
			continue
		}
		e.written[s.Key] = summary.WrittenFrom(s, now)
		e.writtenBadObserver[s.Key] = badObserver
		obj := objectOf(s)
		if badObserver {
			markObserverUnhealthy(&obj.Status, s.ObservedFromNode)
		}
		sets = append(sets, &desired{obj: obj, reason: reason})
	}
	e.mu.Unlock()
	for _, d := range sets {
		e.writer.set(d)
	}
	e.tb.PodNetworkHealthPairs.Record(ctx, int64(e.summ.Stats().Pairs))
	e.tb.PodNetworkHealthPendingObjects.Record(ctx, int64(e.writer.pendingCount()))
	e.emitEvents(transitions)
}

func (e *pnhExporter) onWritten(r writeResult) {
	outcome := "success"
	if r.err != nil {
		outcome = "error"
		e.logger.Debug("pod_network_health: write failed; retrying with back-off", zap.String("object", r.key), zap.Error(r.err))
	}
	e.tb.PodNetworkHealthAPIWrites.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("write_reason", r.reason), attribute.String("outcome", outcome)))
}

// emitEvents records an Event per real verdict change (rate-limited; excess is dropped and
// logged, the status still carries the outage history).
func (e *pnhExporter) emitEvents(ts []summary.Transition) {
	if e.events == nil {
		return
	}
	for _, t := range ts {
		var typ, reason string
		switch {
		case t.New == summary.VerdictUnreachable && t.Old != summary.VerdictUnreachable:
			typ, reason = corev1.EventTypeWarning, EventOutageDetected
		case t.New == summary.VerdictReachable && t.Old == summary.VerdictUnreachable:
			typ, reason = corev1.EventTypeNormal, EventRestored
		default:
			continue
		}
		if !e.eventsRL.Allow() {
			e.logger.Info("pod_network_health: event rate limit reached; event dropped", zap.String("pair", t.Key.String()), zap.String("reason", reason))
			continue
		}
		ref := &corev1.ObjectReference{
			APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodNetworkHealth",
			Namespace: t.Key.SourceNamespace, Name: nameOf(t.Key),
		}
		msg := t.Message
		if msg == "" {
			msg = fmt.Sprintf("%s: %s -> %s", t.Key.String(), t.Old, t.New)
		}
		e.events.Event(ref, typ, reason, v1alpha1.TruncateMessage(msg, 1024))
	}
}

// reconcileNodes evaluates the quorum rule and writes the node condition where it changed
// (or its heartbeat is due). Nothing is written while the rule suppresses itself.
func (e *pnhExporter) reconcileNodes(ctx context.Context, now time.Time) {
	if !e.nodes.HasSynced() {
		return
	}
	var nodes []string
	byName := map[string]*corev1.Node{}
	for _, obj := range e.nodes.GetStore().List() {
		n := obj.(*corev1.Node)
		nodes = append(nodes, n.Name)
		byName[n.Name] = n
	}
	e.mu.Lock()
	edges := quorum.EdgesFromSummaries(e.summ.Summaries(), now, max(e.cfg.Window, 2*time.Minute))
	e.mu.Unlock()
	res := quorum.Evaluate(nodes, edges, quorum.Config{Quorum: e.cfg.NodeConditions.Quorum, MaxFailingShare: e.cfg.NodeConditions.MaxFailingShare})
	bad := map[string]bool{}
	if !res.Suppressed {
		for _, n := range res.Marked() {
			bad[n] = true
		}
	}
	e.mu.Lock()
	if !maps.Equal(bad, e.badObservers) {
		e.badObservers = bad
		e.fullPass = true // the attribution of some pairs changed
	}
	e.mu.Unlock()
	if res.Suppressed {
		e.logger.Warn("pod_network_health: node conditions suppressed", zap.String("reason", res.SuppressedReason))
		return
	}
	for _, ns := range res.Nodes {
		n := byName[ns.Node]
		if n == nil {
			continue
		}
		cond := corev1.NodeCondition{
			Type:               corev1.NodeConditionType(e.cfg.NodeConditions.Type),
			Status:             corev1.ConditionFalse,
			Reason:             ns.Reason,
			Message:            ns.Message,
			LastHeartbeatTime:  metav1.NewTime(now),
			LastTransitionTime: metav1.NewTime(now),
		}
		if ns.Problem {
			cond.Status = corev1.ConditionTrue
		}
		prev, seen := e.nodeSeen[n.Name]
		if !seen {
			// Compare with what the API has (e.g. after a restart).
			for _, c := range n.Status.Conditions {
				if string(c.Type) == e.cfg.NodeConditions.Type {
					prev, seen = nodeWrite{cond: c, at: c.LastHeartbeatTime.Time}, true
				}
			}
		}
		same := seen && prev.cond.Status == cond.Status && prev.cond.Reason == cond.Reason && prev.cond.Message == cond.Message
		if same && now.Sub(prev.at) < e.cfg.NodeConditions.Heartbeat {
			continue
		}
		if err := setNodeCondition(ctx, e.kube, n, cond); err != nil {
			e.onWritten(writeResult{key: "node/" + n.Name, reason: "node_condition", err: err})
			continue
		}
		e.onWritten(writeResult{key: "node/" + n.Name, reason: "node_condition"})
		e.nodeSeen[n.Name] = nodeWrite{cond: cond, at: now}
	}
}

// stripNodeToCondition keeps only the node's name and our condition in the cache.
func stripNodeToCondition(condType string) cache.TransformFunc {
	return func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
		for _, c := range n.Status.Conditions {
			if string(c.Type) == condType {
				out.Status.Conditions = append(out.Status.Conditions, c)
			}
		}
		return out, nil
	}
}

// shutdown stops campaigning (releasing the Lease), the writer and the informers. Pending
// writes that did not reach the API are abandoned: the next leader recomputes them from
// its own summaries. Safe without start and twice.
func (e *pnhExporter) shutdown(context.Context) error {
	e.shutdownOnce.Do(func() {
		if e.cancel != nil {
			e.cancel()
		}
		e.mu.Lock()
		done := e.done
		e.mu.Unlock()
		for _, d := range done {
			<-d
		}
		if e.writer != nil {
			e.writer.stop()
		}
		close(e.stopNodes)
		if e.nodesF != nil {
			e.nodesF.Shutdown()
		}
		if e.gated != nil {
			e.gated.factory.Shutdown()
		}
		if e.eventsBC != nil {
			e.eventsBC.Shutdown()
		}
		e.tb.Shutdown()
	})
	return nil
}
