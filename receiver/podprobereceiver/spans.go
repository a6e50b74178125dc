// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"crypto/rand"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// buildSpans makes one CLIENT span per probe (or per failed probe in "failures" mode) with
// a child span per phase (dns, connect, tls, first_byte, lookup). The source pod is on the
// Resource, the target on span attributes, as for metrics.
func buildSpans(cfg *Config, obs []observation) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	putIfSet(res, contract.K8sPodName, cfg.Source.PodName)
	putIfSet(res, contract.K8sPodUID, cfg.Source.PodUID)
	putIfSet(res, contract.K8sNamespaceName, cfg.Source.Namespace)
	putIfSet(res, contract.K8sNodeName, cfg.Source.NodeName)
	if ips := splitIPs(cfg.Source.PodIPs); len(ips) > 0 {
		res.PutStr(contract.K8sPodIP, ips[0])
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName)
	for _, o := range obs {
		if cfg.Spans == SpansFailures && o.success {
			continue
		}
		var traceID pcommon.TraceID
		var spanID pcommon.SpanID
		_, _ = rand.Read(traceID[:])
		_, _ = rand.Read(spanID[:])
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(traceID)
		sp.SetSpanID(spanID)
		sp.SetName("probe " + o.target.probe)
		sp.SetKind(ptrace.SpanKindClient)
		end := o.start
		for _, d := range o.durations {
			end = end.Add(d)
		}
		for _, p := range o.phases {
			if e := p.start.Add(p.duration); e.After(end) {
				end = e
			}
		}
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(o.start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
		a := sp.Attributes()
		a.PutStr(contract.DestinationAddress, o.target.addressText())
		if o.target.port != 0 {
			a.PutInt(contract.DestinationPort, int64(o.target.port))
		}
		a.PutStr(contract.NetworkType, networkType(o.target).String())
		a.PutStr(contract.ProbeType, o.target.probe)
		a.PutStr(contract.TargetKind, o.target.kind)
		if o.success {
			sp.Status().SetCode(ptrace.StatusCodeOk)
		} else {
			a.PutStr(contract.ErrorType, o.errorType)
			sp.Status().SetCode(ptrace.StatusCodeError)
			sp.Status().SetMessage(o.message)
		}
		for _, p := range o.phases {
			var childID pcommon.SpanID
			_, _ = rand.Read(childID[:])
			c := ss.Spans().AppendEmpty()
			c.SetTraceID(traceID)
			c.SetSpanID(childID)
			c.SetParentSpanID(spanID)
			c.SetName(p.name)
			c.SetKind(ptrace.SpanKindInternal)
			c.SetStartTimestamp(pcommon.NewTimestampFromTime(p.start))
			c.SetEndTimestamp(pcommon.NewTimestampFromTime(p.start.Add(p.duration)))
		}
	}
	return td
}

func putIfSet(m pcommon.Map, k, v string) {
	if v != "" {
		m.PutStr(k, v)
	}
}
