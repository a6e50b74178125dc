// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/checks"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/controllers"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/readiness"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict/zones"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/identity"
)

// defaultMaxChecksPerNamespace is checks.max_checks_per_namespace's default.
const defaultMaxChecksPerNamespace = 100

// newControllers builds the controller of every kind of object this configuration writes
// (internal/controllers, internal/checks), in the order each reconcile tick runs them:
// pairs first (their verdicts are what the rest follows), the node judgement before the
// zone objects and gray node conditions it feeds. One line per kind.
func (e *pnhExporter) newControllers() {
	d := e.controllerDeps()
	cfg := e.cfg
	e.pairs = controllers.NewPairs(d)
	e.nodes = controllers.NewNodes(nodesConfig(cfg), d)
	e.zones = controllers.NewZones(newZoneObjects(cfg), e.nodes, d)
	// Declared checks' results reach shard 0 alone (the agents' logs pipeline), and zone
	// objects are one cluster-wide set: with shards, both are shard 0's.
	if cfg.Checks.Enabled && cfg.Shard.Index == 0 {
		e.checks = newCheckController(e, cfg.Checks)
	}
	if rg := cfg.ReadinessGate; rg.Enabled {
		e.readiness = controllers.NewReadiness(readiness.Config{ConditionType: rg.ConditionType, MaxFlipsPerMinute: rg.MaxFlipsPerMinute,
			FailOpenTimeout: rg.FailOpenTimeout, MinReachingNodes: rg.MinReachingNodes}, d)
	}

	e.controllers = []controllers.Controller{e.pairs}
	if e.checks != nil {
		e.controllers = append(e.controllers, e.checks)
	}
	e.controllers = append(e.controllers, e.nodes, e.zones)
	if nc := cfg.NodeConditions; nc.Enabled && nc.DegradedType != "" {
		e.controllers = append(e.controllers, controllers.NewGrayNodes(nc.DegradedType, verdict.GrayNodeConfig{Heartbeat: nc.Heartbeat, MinHold: nc.MinHold}, e.nodes, d))
	}
	if e.readiness != nil {
		e.controllers = append(e.controllers, e.readiness)
	}
	// Last: it counts what the others queued this tick.
	if cfg.writesSummary() {
		e.controllers = append(e.controllers, newSummary(cfg, d))
	}
}

// newSummary is the NetworkHealthSummary controller of this writer's Lease. Its targets
// are judged once every observer has sent a few rounds (3 x max_probe_interval).
func newSummary(cfg *Config, d controllers.Deps) *controllers.Summary {
	lease := leaseOf(cfg.LeaderElection, cfg.Shard)
	return controllers.NewSummary(&plan.Summary{MinInterval: cfg.Summary.MinInterval, WarmUp: 3 * cfg.MaxProbeInterval,
		Writer: plan.SummaryWriter{LeaseName: lease.LeaseName, Identity: lease.Identity, Shard: cfg.Shard.Index, Shards: cfg.Shard.Count}},
		lease.LeaseNamespace, d)
}

// controllerDeps is what every controller gets of the exporter: the engine, the writer
// (built at start), the Event limits and the shard's nodes.
func (e *pnhExporter) controllerDeps() controllers.Deps {
	d := controllers.Deps{
		Logger:     e.logger,
		Telemetry:  e.tb,
		Engine:     e.engine,
		Writer:     func() *apply.Writer { return e.writer },
		PairEvents: e.emitPlanned,
		Event: func(obj corev1.ObjectReference, typ, reason, msg string, at time.Time) {
			if e.eventsRL == nil || !e.eventsRL.Allow() {
				return
			}
			e.enqueueEvent(obj, typ, reason, msg, at, writequeue.Event)
		},
	}
	if e.cfg.Shard.sharded() {
		d.Owns = e.cfg.Shard.owns
	}
	return d
}

// nodesConfig is the node conditions' controller for this configuration.
func nodesConfig(cfg *Config) controllers.NodesConfig {
	nc := cfg.NodeConditions
	types := []string{nc.Type}
	if nc.DegradedType != "" {
		types = append(types, nc.DegradedType)
	}
	var gray string
	if nc.Enabled {
		gray = nc.DegradedType // the gray controller runs only with node conditions on
	}
	return controllers.NodesConfig{Enabled: nc.Enabled, CacheTypes: types, GrayType: gray,
		Control: plan.NodeConditions{Type: nc.Type,
			Config: verdict.NodeConfig{Quorum: nc.Quorum, MaxFailingShare: nc.MaxFailingShare, Heartbeat: nc.Heartbeat, MinHold: nc.MinHold,
				Zones: zoneConfig(cfg)}}}
}

// zoneConfig is the zone judgement's rules (nil when zones are off).
func zoneConfig(cfg *Config) *zones.Config {
	if !cfg.Zones.Enabled {
		return nil
	}
	z := cfg.Zones
	return &zones.Config{MinNodes: z.MinNodes, MinFailingShare: z.MinFailingShare, MinHealthyShare: z.MinHealthyShare}
}

// newZoneObjects is the ZoneNetworkHealth objects' core (nil unless zones.write_objects,
// and on shard 0). A writer restricted to one namespace (all-in-one: each agent writes its
// own pairs) sees one observer's outcomes, which never cut a zone pair, and may not write
// cluster-scoped objects: it has none.
func newZoneObjects(cfg *Config) *plan.ZoneObjects {
	if !cfg.Zones.Enabled || !cfg.Zones.WriteObjects || cfg.Namespace != "" || cfg.Shard.Index != 0 {
		return nil
	}
	return plan.NewZoneObjects(cfg.Zones.MinHold, cfg.Zones.Retention, cfg.Heartbeat)
}

// newCheckController builds the declared checks' controller (internal/checks) from the
// exporter's configuration. It gets funcs, not the exporter: the writer's enqueue (one
// write budget), the Event emitter (CheckEvent priority, nil without events.enabled), the
// identity binding (nil without require_authenticated_observers) and the writer's verdict
// on refused writes.
func newCheckController(e *pnhExporter, cfg ChecksConfig) *checks.Controller {
	d := checks.Deps{
		Logger:    e.logger,
		Telemetry: e.tb,
		Enqueue: func(key string, p writequeue.Priority, write func(context.Context) error, reason string) {
			e.writer.Enqueue(key, p, write, reason)
		},
		Refused: apply.Rejected,
	}
	if e.cfg.Events.Enabled {
		d.Event = func(obj corev1.ObjectReference, typ, reason, msg string, at time.Time) {
			e.enqueueEvent(obj, typ, reason, msg, at, writequeue.CheckEvent)
		}
	}
	if e.cfg.RequireAuthenticatedObservers {
		d.Bind = identity.MatchResourceContext
	}
	return checks.New(checks.Config{
		OpenShift:                  cfg.OpenShift,
		Heartbeat:                  cfg.Heartbeat,
		PruneAfter:                 cfg.PruneAfter,
		MaxChecks:                  cfg.MaxChecks,
		MaxChecksPerNamespace:      cfg.MaxChecksPerNamespace,
		AllowCrossNamespaceTargets: cfg.AllowCrossNamespaceTargets,
		AllowLoopback:              cfg.AllowLoopback,
		AllowLinkLocal:             cfg.AllowLinkLocal,
		EventsPerMinute:            cfg.EventsPerMinute,
		ExplainNetworkPolicy:       cfg.ExplainNetworkPolicy,
	}, d)
}
