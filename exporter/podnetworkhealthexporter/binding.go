// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/decode"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/ratelog"
)

// Skip reasons of require_authenticated_observers (otelcol_pod_network_health_datapoints_skipped).
const (
	// skipUnauthenticatedSource: the request carried no authenticated agent identity (a
	// receiver without the k8s_token_auth authenticator, or a batch processor between it
	// and this exporter without the identity in its metadata_keys).
	skipUnauthenticatedSource = string(identity.RefusedUnauthenticated)
	// skipSourceMismatch: the Resource names another pod (namespace, name, UID) or node
	// than the agent that sent it. Nothing is decided from such data points.
	skipSourceMismatch = string(identity.RefusedMismatch)
	// skipSourceNotAgent: the caller is authenticated and names its own pod, but it is not
	// an agent (a sidecar: a workload service account). Only agents observe pairs, count
	// toward quorums and get pair objects; a sidecar's results count for its own pod's
	// declared checks only.
	skipSourceNotAgent = string(identity.RefusedNotAgent)
)

// bindLogEvery bounds the binding's log lines (a misconfigured or compromised agent sends
// every probe interval).
const bindLogEvery = 30 * time.Second

// binder keeps, with require_authenticated_observers, only the observations an agent made
// itself: the Resource's source pod and node must be the authenticated caller's
// (identity.Match), and the caller an agent.
type binder struct {
	log *ratelog.Logger // at most one line per bindLogEvery (burst 2)
}

func newBinder(logger *zap.Logger) *binder {
	return &binder{log: ratelog.New(logger, bindLogEvery, 2)}
}

// bind returns the part of md whose source is the authenticated caller of ctx (md itself
// when that is all of it; a copy otherwise: md is shared with other pipelines and never
// modified) and the data points it left out, by skip reason. Resources without a
// complete source (namespace, name, UID) are kept: Decode counts them as missing_source.
func (b *binder) bind(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, map[string]int) {
	rms := md.ResourceMetrics()
	info := client.FromContext(ctx)
	if _, _, ok := identity.FromClientInfo(info); !ok {
		n := 0
		for i := 0; i < rms.Len(); i++ {
			n += decode.ProbeDataPoints(rms.At(i))
		}
		if n == 0 {
			return md, nil
		}
		b.log.Log(zap.WarnLevel, "pod_network_health: data points without an authenticated agent identity are not used (require_authenticated_observers: the receiver needs auth: k8s_token_auth, and a batch processor before this exporter the identity keys in metadata_keys)",
			zap.Int("data_points", n))
		return pmetric.NewMetrics(), map[string]int{skipUnauthenticatedSource: n}
	}
	var keep []int
	skipped := map[string]int{}
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		src, complete := decode.SourceOf(rm.Resource().Attributes())
		if !complete {
			keep = append(keep, i) // Decode counts it as missing_source
			continue
		}
		bd := identity.MatchResource(info, identity.Source{Namespace: src.Namespace, PodName: src.Name, PodUID: src.UID, NodeName: src.Node}, rm.Resource().Attributes())
		refusal, ok := bd.Agent()
		if ok {
			keep = append(keep, i)
			continue
		}
		n := decode.ProbeDataPoints(rm)
		if n == 0 {
			continue // nothing of ours in it
		}
		skipped[string(refusal)] += n
		msg := "pod_network_health: an agent sent observations in another pod's or node's name; they are not used"
		if refusal == identity.RefusedNotAgent {
			msg = "pod_network_health: a caller that is not an agent (a sidecar's service account) sent observations; only agents observe pairs, they are not used"
		}
		b.log.Log(zap.WarnLevel, msg,
			zap.Stringer("authenticated", bd.Identity), zap.String("role", string(bd.Identity.Role)), zap.String("via", string(bd.Via)),
			zap.Stringer("claimed", identity.Source{Namespace: src.Namespace, PodName: src.Name, PodUID: src.UID, NodeName: src.Node}),
			zap.Int("data_points", n))
	}
	if len(skipped) == 0 {
		return md, nil
	}
	out := pmetric.NewMetrics()
	for _, i := range keep {
		rms.At(i).CopyTo(out.ResourceMetrics().AppendEmpty())
	}
	return out, skipped
}
