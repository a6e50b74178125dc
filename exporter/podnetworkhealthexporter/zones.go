// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// Zone pairs, wired: the node judgement localises cut zone pairs first
// (verdict.NodeConfig.Zones), the controller plan.ZoneObjects turns the result into
// ZoneNetworkHealth writes and Events, and the writer (apply) makes them.

// zoneConfig is the zone judgement's rules (nil when zones are off).
func zoneConfig(cfg *Config) *zones.Config {
	if !cfg.Zones.Enabled {
		return nil
	}
	z := cfg.Zones
	return &zones.Config{MinNodes: z.MinNodes, MinFailingShare: z.MinFailingShare, MinHealthyShare: z.MinHealthyShare}
}

// writeZones has the zone judgement's objects and Events written (leader only). Until the
// ZoneNetworkHealth cache has synced (it never does without the RBAC for the objects)
// nothing is written; the judgement itself goes on.
func (e *pnhExporter) writeZones(r zones.Result, now time.Time) {
	e.recordZones(r)
	if e.zoneObjects == nil {
		return
	}
	existing, synced := e.writer.Zones()
	if !synced {
		return
	}
	writes := e.zoneObjects.Plan(r, existing, now)
	e.writer.ZoneObjects(writes)
	for _, w := range writes {
		if w.Event == nil {
			continue
		}
		e.logger.Info("pod_network_health: zone pair verdict", zap.String("from", w.Object.Spec.SourceZone), zap.String("to", w.Object.Spec.TargetZone),
			zap.String("reachability", string(w.Object.Status.Reachability)), zap.String("message", w.Event.Message))
		if e.eventsRL == nil || !e.eventsRL.Allow() {
			continue
		}
		// Events of cluster-scoped objects live in the default namespace, as Nodes' do.
		e.enqueueEvent(corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ZoneNetworkHealth",
			Namespace: corev1.NamespaceDefault, Name: w.Object.Name}, w.Event.Type, w.Event.Reason, w.Event.Message, now, writequeue.Event)
	}
}

// recordZones keeps the newest zone judgement for the zone pair gauge.
func (e *pnhExporter) recordZones(r zones.Result) {
	e.mu.Lock()
	e.lastZones = r
	e.mu.Unlock()
}

// zonePairs is the newest zone judgement (the gauge reads it).
func (e *pnhExporter) zonePairs() []zones.Pair {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastZones.Pairs
}

// newZoneObjects is the ZoneNetworkHealth controller (nil unless zones.write_objects).
// A writer restricted to one namespace (all-in-one: each agent writes its own pairs) sees
// one observer's outcomes, which never cut a zone pair, and may not write cluster-scoped
// objects: it has none.
func newZoneObjects(cfg *Config) *plan.ZoneObjects {
	if !cfg.Zones.Enabled || !cfg.Zones.WriteObjects || cfg.Namespace != "" {
		return nil
	}
	return plan.NewZoneObjects(cfg.Zones.MinHold, cfg.Zones.Retention, cfg.Heartbeat)
}

// Event reasons of zone pairs (on their ZoneNetworkHealth, in the default namespace).
const (
	EventZoneConnectivityLost     = plan.EventZonePairUnreachable
	EventZoneConnectivityRestored = plan.EventZonePairRestored
)
