// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor // import "github.com/netpulse/netpulse/processor/k8snetattributesprocessor"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/k8sindex"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/admission"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/metadata"
)

// userAgent identifies the processor's watches in API server logs and audit events.
const userAgent = "netpulse/k8s_net_attributes"

// restConfigHook, when set (tests only), adjusts the client configuration, e.g. to count
// requests with a wrapping transport.
var restConfigHook func(*rest.Config)

// registry is the process-wide index registry; tests may point it elsewhere.
var registry = k8sindex.DefaultRegistry

type source uint8

const (
	srcResource source = iota
	srcDataPoint
	srcSpan
	srcLog
	numSources
)

var sourceNames = [numSources]string{"resource", "datapoint", "span", "log"}

func sourceOf(k SourceKind) source {
	switch k {
	case SourceDataPoint:
		return srcDataPoint
	case SourceSpan:
		return srcSpan
	case SourceLog:
		return srcLog
	default:
		return srcResource
	}
}

// outcome of one address.
type outcome uint8

const (
	enrichedPod outcome = iota
	enrichedNode
	enrichedDeletedPod
	unresolvedNotFound
	unresolvedNotIP
	unresolvedConflict
	numOutcomes
)

type signal uint8

const (
	sigMetrics signal = iota
	sigTraces
	sigLogs
	numSignals
)

var signalNames = [numSignals]string{"metrics", "traces", "logs"}

type netAttributesProcessor struct {
	cfg    *Config
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder
	// admitter is nil unless admission.enabled.
	admitter *admitter

	resourceRules, dataPointRules, spanRules, logRules []*rule

	key        k8sindex.Key
	restConfig func() (*rest.Config, error)
	// acquire gets the shared index at Start (tests substitute a static index).
	acquire  func() (*k8sindex.Handle, error)
	handle   atomic.Pointer[k8sindex.Handle]
	shutdown atomic.Bool

	// Pre-built counter options, so that recording allocates nothing.
	counterOpts [numSignals][numSources][numOutcomes]metric.AddOption

	resolvers sync.Pool
}

func newProcessor(set processor.Settings, cfg *Config) (*netAttributesProcessor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &netAttributesProcessor{cfg: cfg, logger: set.Logger, tb: tb}
	if cfg.Admission.Enabled {
		p.admitter = newAdmitter(cfg.Admission, set.Logger)
	}
	for _, rc := range cfg.Rules {
		r := compileRule(rc, cfg.Attributes, cfg.PodLabels)
		switch r.source {
		case srcResource:
			p.resourceRules = append(p.resourceRules, r)
		case srcDataPoint:
			p.dataPointRules = append(p.dataPointRules, r)
		case srcSpan:
			p.spanRules = append(p.spanRules, r)
		case srcLog:
			p.logRules = append(p.logRules, r)
		}
	}
	scope := k8sindex.Scope{
		Namespace:     cfg.Scope.Namespace,
		LabelSelector: cfg.Scope.LabelSelector,
		NodeName:      cfg.Scope.NodeName,
		NoNodes:       !cfg.Scope.WatchNodes,
	}
	// Processors with the same client, scope, labels and grace share one index and one
	// set of watches, in any pipeline.
	p.key = k8sindex.NewKey(fmt.Sprintf("%+v", cfg.Config), scope, cfg.PodLabels, cfg.DeletedPodGrace)
	clientCfg := cfg.Config
	p.restConfig = func() (*rest.Config, error) {
		rc, err := clientCfg.RESTConfig(userAgent)
		if err != nil {
			return nil, err
		}
		if restConfigHook != nil {
			restConfigHook(rc)
		}
		return rc, nil
	}
	for sig := signal(0); sig < numSignals; sig++ {
		for src := source(0); src < numSources; src++ {
			for oc := outcome(0); oc < numOutcomes; oc++ {
				attrs := []attribute.KeyValue{
					attribute.String("otelcol.signal", signalNames[sig]),
					attribute.String("source", sourceNames[src]),
				}
				switch oc {
				case enrichedPod:
					attrs = append(attrs, attribute.String("kind", "pod"))
				case enrichedNode:
					attrs = append(attrs, attribute.String("kind", "node"))
				case enrichedDeletedPod:
					attrs = append(attrs, attribute.String("kind", "deleted_pod"))
				case unresolvedNotFound:
					attrs = append(attrs, attribute.String("reason", "not_found"))
				case unresolvedNotIP:
					attrs = append(attrs, attribute.String("reason", "not_an_ip"))
				case unresolvedConflict:
					attrs = append(attrs, attribute.String("reason", "conflict"))
				}
				p.counterOpts[sig][src][oc] = metric.WithAttributeSet(attribute.NewSet(attrs...))
			}
		}
	}
	p.acquire = func() (*k8sindex.Handle, error) { return registry.Acquire(p.key, p.restConfig, p.logger) }
	p.resolvers.New = func() any { return &resolver{memo: make(map[string]int32)} }
	return p, nil
}

func (p *netAttributesProcessor) start(ctx context.Context, _ component.Host) error {
	if p.shutdown.Load() {
		return nil
	}
	h, err := p.acquire()
	if err != nil {
		return err
	}
	p.handle.Store(h)
	ix := h.Index()
	_ = p.tb.RegisterK8sNetAttributesIndexPodsCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(int64(ix.Stats().Pods))
		return nil
	})
	_ = p.tb.RegisterK8sNetAttributesIndexNodesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(int64(ix.Stats().Nodes))
		return nil
	})
	if a := p.admitter; a != nil {
		_ = p.tb.RegisterK8sNetAttributesAdmissionSourcesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(a.table.Stats().Sources))
			return nil
		})
		_ = p.tb.RegisterK8sNetAttributesAdmissionTargetsCallback(func(_ context.Context, o metric.Int64Observer) error {
			st := a.table.Stats()
			o.Observe(int64(st.StableTargets + st.ExternalTargets))
			return nil
		})
	}
	if !p.cfg.WaitForSync {
		p.logger.Info("k8s_net_attributes: pod/node index starting in the background; addresses resolve as it fills (wait_for_sync: false)")
		return nil
	}
	began := time.Now()
	p.logger.Info("k8s_net_attributes: waiting for the pod/node index to sync", zap.Duration("timeout", p.cfg.WaitForSyncTimeout))
	wctx, cancel := context.WithTimeout(ctx, p.cfg.WaitForSyncTimeout)
	defer cancel()
	if err := h.WaitForSync(wctx); err != nil {
		p.logger.Warn("k8s_net_attributes: pod/node index not synced within wait_for_sync_timeout; starting anyway, addresses resolve as the index fills",
			zap.Duration("timeout", p.cfg.WaitForSyncTimeout), zap.Error(err))
		return nil
	}
	st := ix.Stats()
	p.logger.Info("k8s_net_attributes: pod/node index synced",
		zap.Duration("took", time.Since(began)), zap.Int("pods", st.Pods), zap.Int("nodes", st.Nodes))
	return nil
}

func (p *netAttributesProcessor) stop(context.Context) error {
	p.shutdown.Store(true)
	if h := p.handle.Swap(nil); h != nil {
		h.Release()
	}
	p.tb.Shutdown()
	return nil
}

// resolver resolves the addresses of one batch: each distinct address string is parsed
// and looked up once (one short read lock per lookup; the index is never locked while
// pdata is written).
type resolver struct {
	ix     *k8sindex.Index
	memo   map[string]int32 // address -> index in ids, or -(outcome+1) when unresolved
	ids    []k8sindex.Identity
	counts [numSources][numOutcomes]int64
}

// maxMemo bounds the per-batch memo (a batch of unique addresses gains nothing from it).
const maxMemo = 4096

func (r *resolver) resolve(s string) (*k8sindex.Identity, outcome) {
	if v, ok := r.memo[s]; ok {
		if v < 0 {
			return nil, outcome(-v - 1)
		}
		return &r.ids[v], identityOutcome(&r.ids[v])
	}
	oc := unresolvedNotIP
	if addr, ok := parseAddress(s); ok {
		r.ids = append(r.ids, k8sindex.Identity{})
		id := &r.ids[len(r.ids)-1]
		if r.ix.LookupInto(addr, id) {
			if len(r.memo) < maxMemo {
				r.memo[s] = int32(len(r.ids) - 1)
			}
			return id, identityOutcome(id)
		}
		r.ids = r.ids[:len(r.ids)-1]
		oc = unresolvedNotFound
	}
	if len(r.memo) < maxMemo {
		r.memo[s] = -int32(oc) - 1
	}
	return nil, oc
}

func identityOutcome(id *k8sindex.Identity) outcome {
	switch {
	case id.Kind == k8sindex.KindNode:
		return enrichedNode
	case id.Deleted:
		return enrichedDeletedPod
	default:
		return enrichedPod
	}
}

func (p *netAttributesProcessor) getResolver() *resolver { return p.resolvers.Get().(*resolver) }

func (p *netAttributesProcessor) putResolver(r *resolver) {
	clear(r.memo)
	clear(r.ids)
	r.ids = r.ids[:0]
	r.counts = [numSources][numOutcomes]int64{}
	r.ix = nil
	p.resolvers.Put(r)
}

// applyRules runs rules against one element's attributes.
func (res *resolver) applyRules(rules []*rule, attrs pcommon.Map) {
	for _, r := range rules {
		if r.prefix == contract.DestinationPrefix {
			// Only the index says a pod is going away: a sender's value is never kept.
			attrs.Remove(contract.DestinationPodLeaving)
			attrs.Remove(contract.DestinationDisruption)
		}
		v, ok := attrs.Get(r.attribute)
		if !ok {
			continue
		}
		if v.Type() != pcommon.ValueTypeStr {
			res.counts[r.source][unresolvedNotIP]++
			continue
		}
		id, oc := res.resolve(v.Str())
		if id != nil && !r.apply(attrs, id) {
			oc = unresolvedConflict
		}
		if r.prefix == contract.DestinationPrefix {
			if id != nil && oc != unresolvedConflict && id.Kind == k8sindex.KindPod && (id.Deleted || id.Terminating) {
				attrs.PutBool(contract.DestinationPodLeaving, true)
			}
			if id != nil && oc != unresolvedConflict {
				if d := disruptionOf(id); d != "" {
					attrs.PutStr(contract.DestinationDisruption, d)
				}
			}
		}
		res.counts[r.source][oc]++
	}
}

// disruptionOf is the known disruption of a destination (contract.DestinationDisruption):
// the first that applies in precedence order, "" when none.
func disruptionOf(id *k8sindex.Identity) string {
	switch {
	case id.Kind == k8sindex.KindPod && (id.Deleted || id.Terminating):
		return contract.DisruptionPodTerminating
	case id.NodeNotReady:
		return contract.DisruptionNodeNotReady
	case id.NodeCordoned:
		return contract.DisruptionNodeDraining
	case id.Kind == k8sindex.KindPod && id.Phase == k8sindex.PhasePending:
		return contract.DisruptionNotReady
	}
	return ""
}

// run enriches one batch, then records the outcomes.
func (p *netAttributesProcessor) run(ctx context.Context, sig signal, fn func(res *resolver)) {
	h := p.handle.Load()
	if h == nil {
		return // not started (or shut down): pass through untouched
	}
	res := p.getResolver()
	res.ix = h.Index()
	fn(res)
	for src := source(0); src < numSources; src++ {
		for oc := outcome(0); oc < numOutcomes; oc++ {
			n := res.counts[src][oc]
			if n == 0 {
				continue
			}
			if oc <= enrichedDeletedPod {
				p.tb.K8sNetAttributesAddressesEnriched.Add(ctx, n, p.counterOpts[sig][src][oc])
			} else {
				p.tb.K8sNetAttributesAddressesUnresolved.Add(ctx, n, p.counterOpts[sig][src][oc])
			}
		}
	}
	p.putResolver(res)
}

func (p *netAttributesProcessor) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	p.run(ctx, sigMetrics, func(res *resolver) {
		var reqs map[string]*request
		var refused map[admission.Reason]int
		if p.admitter != nil {
			reqs, refused = map[string]*request{}, map[admission.Reason]int{}
		}
		// A relay (a gateway shard forwarding its agents' points to their owner) vouches
		// for each Resource's agent on the Resource (identity.Relayed): kept through the
		// sanitising for a relay's requests only, matched per Resource by admission.
		id, _, _ := identity.FromContext(ctx)
		relay := id.Role == identity.RoleRelay
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			rm := rms.At(i)
			if p.admitter != nil && hasProbeMetrics(rm) {
				relayed, vouched := identity.Identity{}, false
				if relay {
					relayed, vouched = identity.RelayedOf(rm.Resource().Attributes())
				}
				p.admitter.sanitizeResource(rm)
				if vouched {
					identity.SetRelayed(rm.Resource().Attributes(), relayed)
				}
				res.applyRules(p.resourceRules, rm.Resource().Attributes())
				verifySourceIP(res, rm.Resource().Attributes())
				p.admitResource(ctx, res, rm, reqs, refused)
				if vouched && !p.admitter.cfg.KeepRelayedIdentity {
					identity.StripRelayed(rm.Resource().Attributes())
				}
				continue
			}
			res.applyRules(p.resourceRules, rm.Resource().Attributes())
			if len(p.dataPointRules) == 0 {
				continue
			}
			sms := rm.ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					p.processMetric(res, ms.At(k))
				}
			}
		}
		if p.admitter != nil && len(refused) > 0 {
			removeEmpty(md)
			for r, c := range refused {
				p.tb.K8sNetAttributesAdmissionRefused.Add(ctx, int64(c), metric.WithAttributes(attribute.String("reason", string(r))))
			}
			p.admitter.logRefused(refused)
		}
	})
	return md, nil
}

func (p *netAttributesProcessor) processMetric(res *resolver, m pmetric.Metric) {
	rules := p.dataPointRules
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps := m.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			res.applyRules(rules, dps.At(i).Attributes())
		}
	case pmetric.MetricTypeSum:
		dps := m.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			res.applyRules(rules, dps.At(i).Attributes())
		}
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			res.applyRules(rules, dps.At(i).Attributes())
		}
	case pmetric.MetricTypeExponentialHistogram:
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			res.applyRules(rules, dps.At(i).Attributes())
		}
	case pmetric.MetricTypeSummary:
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			res.applyRules(rules, dps.At(i).Attributes())
		}
	}
}

func (p *netAttributesProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	p.run(ctx, sigTraces, func(res *resolver) {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			res.applyRules(p.resourceRules, rs.Resource().Attributes())
			if len(p.spanRules) == 0 {
				continue
			}
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					res.applyRules(p.spanRules, spans.At(k).Attributes())
				}
			}
		}
	})
	return td, nil
}

func (p *netAttributesProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	p.run(ctx, sigLogs, func(res *resolver) {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			rl := rls.At(i)
			res.applyRules(p.resourceRules, rl.Resource().Attributes())
			if len(p.logRules) == 0 {
				continue
			}
			sls := rl.ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					res.applyRules(p.logRules, lrs.At(k).Attributes())
				}
			}
		}
	})
	return ld, nil
}
