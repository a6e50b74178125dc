// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor // import "github.com/netpulse/netpulse/processor/k8snetattributesprocessor"

import (
	"context"
	"hash/maphash"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/pdatautil"
	"github.com/netpulse/netpulse/processor/k8snetattributesprocessor/internal/admission"
)

// Refusal reasons of the admission (otelcol_k8s_net_attributes_admission_refused) beyond
// those of the admission table.
const (
	// refusedMissingSource: a pod_probe metric on a Resource without k8s.pod.uid.
	refusedMissingSource admission.Reason = "missing_source"
	// require_authenticated_source refuses with identity.Match's own reasons
	// (identity.Refused*): no identity, another pod's or node's name, or a caller that is
	// not an agent (a sidecar holds no admission slot).
	// refusedRequestLimit: data points of one source beyond max_data_points_per_request.
	refusedRequestLimit admission.Reason = "request_data_point_limit"
	// refusedRoundLimit: distinct targets of one source and round beyond max_targets_per_round.
	refusedRoundLimit admission.Reason = "round_target_limit"
	// refusedUndeclared: an external target that declared_external_targets does not name.
	refusedUndeclared admission.Reason = "undeclared_external_target"
	// refusedInvalid: a data point without destination.address or netpulse.probe.type, with
	// an attribute value outside the contract's, or a pod_probe metric of a type the
	// receiver never sends.
	refusedInvalid admission.Reason = "invalid_data_point"
)

// probeDataPointKeys are the data point attributes of the telemetry contract: everything
// else a sender adds is removed before it can become a label (the series bound), and
// destination identity is removed before enrichment so that only the index's survives.
var probeDataPointKeys = map[string]bool{
	contract.DestinationAddress: true, contract.DestinationPort: true, contract.NetworkType: true,
	contract.ProbeType: true, contract.TargetKind: true, contract.PairStable: true, contract.ErrorType: true,
	contract.TargetEndpoint: true, contract.PathMTUStatus: true,
}

// maxEndpointLen bounds netpulse.target.endpoint (a URL or a DNS question).
const maxEndpointLen = 512

// probeUnits are the units of the contract's metrics (the receiver's metadata.yaml); the
// Prometheus exporter puts the unit into the metric name, so a sender's own unit would
// mint new metrics.
var probeUnits = map[string]string{
	contract.MetricStatus: "1", contract.MetricLossRatio: "1", contract.MetricDuration: "s", contract.MetricJitter: "s",
	contract.MetricPacketsSent: "{packet}", contract.MetricPacketsLost: "{packet}", contract.MetricErrors: "{probe}",
	contract.MetricPathMTU: "By", contract.MetricRounds: "{round}",
}

// probeResourceKeys are the Resource attributes of the contract's source, and those the
// resource rule adds: anything else a sender puts on the Resource is removed before it
// can become a label (resource_to_telemetry_conversion).
var probeResourceKeys = map[string]bool{
	contract.K8sNamespaceName: true, contract.K8sPodName: true, contract.K8sPodUID: true,
	contract.K8sNodeName: true, contract.K8sPodIP: true,
}

// enumValues are the closed attributes of the contract with their values (contract.Enums):
// a data point with any other value is refused.
var enumValues = func() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for k, values := range contract.Enums() {
		out[k] = map[string]bool{}
		for _, v := range values {
			out[k][v] = true
		}
	}
	return out
}()

// admissionLogEvery bounds the admission's log lines.
const admissionLogEvery = 30 * time.Second

// admitter applies AdmissionConfig to pod_probe metrics.
type admitter struct {
	cfg      AdmissionConfig
	table    *admission.Table
	seed     maphash.Seed
	declared []netip.Prefix
	hosts    map[string]bool
	anyExt   bool

	now func() time.Time // time.Now; tests move it

	logger *zap.Logger
	logMu  sync.Mutex
	logRL  *rate.Limiter
	// refusedSinceLog by reason, since the last log line.
	refusedSinceLog map[admission.Reason]int
}

func newAdmitter(cfg AdmissionConfig, logger *zap.Logger) *admitter {
	a := &admitter{
		cfg: cfg,
		table: admission.New(admission.Limits{
			MaxSources:                  cfg.MaxSources,
			MaxStableTargetsPerSource:   cfg.MaxStableTargetsPerSource,
			MaxExternalTargetsPerSource: cfg.MaxExternalTargetsPerSource,
			IdleTTL:                     cfg.IdleTTL,
		}),
		seed:            maphash.MakeSeed(),
		now:             time.Now,
		hosts:           map[string]bool{},
		logger:          logger,
		logRL:           rate.NewLimiter(rate.Every(admissionLogEvery), 1),
		refusedSinceLog: map[admission.Reason]int{},
	}
	for _, d := range cfg.DeclaredExternalTargets {
		if d == "*" {
			a.anyExt = true
			continue
		}
		if p, err := parseDeclared(d); err == nil {
			a.declared = append(a.declared, p)
		} else {
			a.hosts[strings.ToLower(d)] = true
		}
	}
	return a
}

// parseDeclared reads an IP or CIDR.
func parseDeclared(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

func (a *admitter) isDeclared(addr string) bool {
	if a.anyExt {
		return true
	}
	if ip, err := netip.ParseAddr(strings.Trim(addr, "[]")); err == nil {
		ip = ip.Unmap()
		for _, p := range a.declared {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	}
	return a.hosts[strings.ToLower(addr)]
}

func isProbeMetric(name string) bool { return strings.HasPrefix(name, "netpulse.probe.") }

// request is the admission state of one request: per source, its data points and the
// distinct targets of each round (timestamp).
type request struct {
	points int
	rounds map[pcommon.Timestamp]map[admission.Target]struct{}
}

// admitResource enriches and admits the pod_probe metrics of one Resource (whose own
// attributes are already enriched); other metrics go through processMetric unchanged.
// refused counts what it removed, by reason.
func (p *netAttributesProcessor) admitResource(ctx context.Context, res *resolver, rm pmetric.ResourceMetrics, reqs map[string]*request, refused map[admission.Reason]int) {
	a := p.admitter
	ra := rm.Resource().Attributes()
	uid := strAttr(ra, contract.K8sPodUID)
	var why admission.Reason
	switch {
	case uid == "":
		why = refusedMissingSource
	case a.cfg.RequireAuthenticatedSource:
		b := identity.MatchResourceContext(ctx, identity.Source{Namespace: strAttr(ra, contract.K8sNamespaceName),
			PodName: strAttr(ra, contract.K8sPodName), PodUID: uid, NodeName: strAttr(ra, contract.K8sNodeName)}, ra)
		if refusal, ok := b.Agent(); !ok {
			why = admission.Reason(refusal)
		}
	}
	sms := rm.ScopeMetrics()
	if why != "" {
		for j := 0; j < sms.Len(); j++ {
			sms.At(j).Metrics().RemoveIf(func(m pmetric.Metric) bool {
				if !isProbeMetric(m.Name()) {
					p.processMetric(res, m)
					return false
				}
				refused[why] += pdatautil.DataPointCount(m)
				return true
			})
		}
		return
	}
	req := reqs[uid]
	if req == nil {
		req = &request{rounds: map[pcommon.Timestamp]map[admission.Target]struct{}{}}
		reqs[uid] = req
	}
	now := a.now()
	admit := func(attrs pcommon.Map, ts pcommon.Timestamp) bool {
		why := p.admitPoint(res, uid, now, req, attrs, ts)
		if why != admission.Admitted {
			refused[why]++
			return false
		}
		return true
	}
	for j := 0; j < sms.Len(); j++ {
		sms.At(j).Metrics().RemoveIf(func(m pmetric.Metric) bool {
			if !isProbeMetric(m.Name()) {
				p.processMetric(res, m)
				return false
			}
			if m.Name() == contract.MetricRounds {
				if why := admitRounds(m, req, a.cfg.MaxDataPointsPerRequest); why != admission.Admitted {
					refused[why] += pdatautil.DataPointCount(m)
					return true
				}
				return false
			}
			if _, known := probeUnits[m.Name()]; !known {
				refused[refusedInvalid] += pdatautil.DataPointCount(m)
				return true
			}
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				m.Gauge().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool { return !admit(dp.Attributes(), dp.Timestamp()) })
				return m.Gauge().DataPoints().Len() == 0
			case pmetric.MetricTypeSum:
				m.Sum().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool { return !admit(dp.Attributes(), dp.Timestamp()) })
				return m.Sum().DataPoints().Len() == 0
			case pmetric.MetricTypeExponentialHistogram:
				m.ExponentialHistogram().DataPoints().RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool {
					return !admit(dp.Attributes(), dp.Timestamp())
				})
				return m.ExponentialHistogram().DataPoints().Len() == 0
			case pmetric.MetricTypeHistogram:
				m.Histogram().DataPoints().RemoveIf(func(dp pmetric.HistogramDataPoint) bool { return !admit(dp.Attributes(), dp.Timestamp()) })
				return m.Histogram().DataPoints().Len() == 0
			}
			refused[refusedInvalid] += pdatautil.DataPointCount(m)
			return true
		})
	}
}

// admitRounds admits an agent's heartbeat (sharded gateways): a cumulative sum, a point a
// round, about its own source only, so it carries no attribute at all (whatever a sender
// adds is removed). It names no target, so it can move nothing but its own observer's
// liveness on the shards that receive it; its points count towards the request's limit.
func admitRounds(m pmetric.Metric, req *request, maxPoints int) admission.Reason {
	if m.Type() != pmetric.MetricTypeSum || m.Sum().DataPoints().Len() == 0 {
		return refusedInvalid
	}
	dps := m.Sum().DataPoints()
	if req.points += dps.Len(); req.points > maxPoints {
		return refusedRequestLimit
	}
	for i := range dps.Len() {
		dps.At(i).Attributes().Clear()
	}
	return admission.Admitted
}

// admitPoint sanitises, enriches and admits one data point.
func (p *netAttributesProcessor) admitPoint(res *resolver, uid string, now time.Time, req *request, attrs pcommon.Map, ts pcommon.Timestamp) admission.Reason {
	a := p.admitter
	req.points++
	if req.points > a.cfg.MaxDataPointsPerRequest {
		return refusedRequestLimit
	}
	// Only the contract's keys, with the contract's values; a claimed destination identity
	// goes, so that only the index's can be written below.
	invalid := false
	attrs.RemoveIf(func(k string, v pcommon.Value) bool {
		if !probeDataPointKeys[k] {
			return true
		}
		if allowed := enumValues[k]; allowed != nil && !(v.Type() == pcommon.ValueTypeStr && allowed[v.Str()]) {
			invalid = true
		}
		return false
	})
	addr := strAttr(attrs, contract.DestinationAddress)
	probe := strAttr(attrs, contract.ProbeType)
	endpoint := ""
	if v, ok := attrs.Get(contract.TargetEndpoint); ok {
		if v.Type() != pcommon.ValueTypeStr || len(v.Str()) > maxEndpointLen {
			return refusedInvalid
		}
		endpoint = v.Str()
	}
	if invalid || addr == "" || probe == "" {
		return refusedInvalid
	}
	var port int64
	if v, ok := attrs.Get(contract.DestinationPort); ok {
		if v.Type() != pcommon.ValueTypeInt || v.Int() < 1 || v.Int() > 65535 {
			return refusedInvalid
		}
		port = v.Int()
	}
	stable := false
	if v, ok := attrs.Get(contract.PairStable); ok {
		if v.Type() != pcommon.ValueTypeBool {
			return refusedInvalid
		}
		stable = v.Bool()
	}
	res.applyRules(p.dataPointRules, attrs)
	_, isPod := attrs.Get(contract.DestinationPrefix + contract.K8sPodUID)
	_, isNode := attrs.Get(contract.DestinationPrefix + contract.K8sNodeName)
	external := !isPod && !isNode
	if external && !a.isDeclared(addr) {
		return refusedUndeclared
	}
	var h maphash.Hash
	h.SetSeed(a.seed)
	var portBuf [8]byte
	h.WriteString(addr)
	h.Write(strconv.AppendInt(portBuf[:0], port, 10))
	h.WriteByte('|')
	h.WriteString(probe)
	h.WriteByte('|')
	h.WriteString(endpoint)
	tg := admission.Target(h.Sum64())
	round := req.rounds[ts]
	if round == nil {
		round = map[admission.Target]struct{}{}
		req.rounds[ts] = round
	}
	if _, seen := round[tg]; !seen {
		if len(round) >= a.cfg.MaxTargetsPerRound {
			return refusedRoundLimit
		}
		round[tg] = struct{}{}
	}
	return a.table.Admit(uid, now, tg, stable, external)
}

// logRefused writes at most one line per admissionLogEvery with what was refused since.
func (a *admitter) logRefused(refused map[admission.Reason]int) {
	a.logMu.Lock()
	for r, n := range refused {
		a.refusedSinceLog[r] += n
	}
	if !a.logRL.Allow() {
		a.logMu.Unlock()
		return
	}
	fields := make([]zap.Field, 0, len(a.refusedSinceLog))
	for r, n := range a.refusedSinceLog {
		fields = append(fields, zap.Int(string(r), n))
	}
	clear(a.refusedSinceLog)
	a.logMu.Unlock()
	a.logger.Warn("k8s_net_attributes: pod_probe data points refused by admission limits (data points by reason, since the previous line; see the processor's README, admission)", fields...)
}

func strAttr(m pcommon.Map, k string) string {
	v, ok := m.Get(k)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		return ""
	}
	return v.Str()
}

// hasProbeMetrics reports whether a Resource carries pod_probe metrics.
func hasProbeMetrics(rm pmetric.ResourceMetrics) bool {
	sms := rm.ScopeMetrics()
	for j := 0; j < sms.Len(); j++ {
		ms := sms.At(j).Metrics()
		for k := 0; k < ms.Len(); k++ {
			if isProbeMetric(ms.At(k).Name()) {
				return true
			}
		}
	}
	return false
}

// sanitizeResource keeps the contract's source keys on a Resource carrying pod_probe
// metrics (enrichment adds the rest from the index), and gives the scopes carrying them the
// receiver's name and nothing else, and each pod_probe metric its contract unit: a sender
// cannot mint labels or metric names.
func (a *admitter) sanitizeResource(rm pmetric.ResourceMetrics) {
	rm.Resource().Attributes().RemoveIf(func(k string, _ pcommon.Value) bool { return !probeResourceKeys[k] })
	rm.SetSchemaUrl("")
	sms := rm.ScopeMetrics()
	for j := 0; j < sms.Len(); j++ {
		sm := sms.At(j)
		ms := sm.Metrics()
		probes := false
		for k := 0; k < ms.Len(); k++ {
			m := ms.At(k)
			if unit, ok := probeUnits[m.Name()]; ok {
				m.SetUnit(unit)
				m.Metadata().Clear()
				probes = true
			}
		}
		if probes {
			sm.Scope().SetName(contract.ProbeScopeName)
			sm.Scope().SetVersion("")
			sm.Scope().Attributes().Clear()
			sm.SetSchemaUrl("")
		}
	}
}

// verifySourceIP removes a k8s.pod.ip the index does not give to the Resource's pod.
func verifySourceIP(res *resolver, attrs pcommon.Map) {
	ip := strAttr(attrs, contract.K8sPodIP)
	if ip == "" {
		return
	}
	if id, _ := res.resolve(ip); id == nil || id.PodUID != strAttr(attrs, contract.K8sPodUID) {
		attrs.Remove(contract.K8sPodIP)
	}
}

// removeEmpty drops the scopes and Resources that admission emptied.
func removeEmpty(md pmetric.Metrics) {
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool { return sm.Metrics().Len() == 0 })
		return rm.ScopeMetrics().Len() == 0
	})
}
