// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/identity"
)

// ConsumeLogs folds check results (pod_probe's check log records; others are ignored) into
// their checks' status. It never waits for the API.
func (c *Controller) ConsumeLogs(ctx context.Context, ld plog.Logs) {
	skipped := map[string]int{}
	var events []checkEvent
	now := c.d.Now()
	c.mu.Lock()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		ra := rl.Resource().Attributes()
		rNs, rPod, rUID, rNode := str(ra, contract.K8sNamespaceName), str(ra, contract.K8sPodName), str(ra, contract.K8sPodUID), str(ra, contract.K8sNodeName)
		var bd *identity.Binding // nil: no binding required
		if c.d.Bind != nil {
			b := c.d.Bind(ctx, identity.Source{Namespace: rNs, PodName: rPod, PodUID: rUID, NodeName: rNode}, ra)
			bd = &b
		}
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				if lr.EventName() != contract.CheckResultEvent {
					continue
				}
				if bd != nil && bd.Refused != "" {
					skipped[SkipCheckUnauthentic]++
					continue
				}
				evs, reason := c.book.fold(resultOf(lr, rNs, rPod, rNode), bd, now)
				if reason != "" {
					skipped[reason]++
					continue
				}
				events = append(events, evs...)
			}
		}
	}
	// Events only from a leader that has resumed from the API (decided under c.mu, so
	// they were derived from the resumed state).
	emit := c.leading.Load() && c.resumed
	c.mu.Unlock()
	for reason, n := range skipped {
		if c.d.Telemetry != nil {
			c.d.Telemetry.PodNetworkHealthDatapointsSkipped.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", reason)))
		}
		c.skipLog.Log(zap.WarnLevel, "pod_network_health: check results not used", zap.String("reason", reason), zap.Int("records", n))
	}
	if emit {
		c.emitEvents(events)
	}
}

func str(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.Str()
	}
	return ""
}

// resultOf decodes one check record (the contract's attributes) from reporter rNs/rPod on
// rNode.
func resultOf(lr plog.LogRecord, rNs, rPod, rNode string) result {
	a := lr.Attributes()
	attr := func(k string) string {
		if v, ok := a.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	succ, okSucc := a.Get(contract.CheckSuccess)
	r := result{key: checkKey{attr(contract.CheckKind), attr(contract.CheckNamespace), attr(contract.CheckName)},
		uid: types.UID(attr(contract.CheckUID)), complete: okSucc && lr.Timestamp() != 0,
		at: lr.Timestamp().AsTime(), reason: attr(contract.CheckReason), message: lr.Body().AsString(),
		source: attr(contract.SourceAddress), reporterNS: rNs, reporterPod: rPod, reporterNode: rNode}
	if okSucc {
		r.success = succ.Bool()
	}
	if v, ok := a.Get(contract.CheckLatency); ok {
		r.latency = v.Double()
	}
	return r
}
