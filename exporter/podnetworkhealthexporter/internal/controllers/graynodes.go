// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// GrayNodes is the gray node condition's controller (node_conditions.degraded_type): on
// the ticks the node conditions' controller judged, the nodes the verdict stage blames for
// loss or latency (verdict.Engine.ReconcileGrayNodes), among the nodes it judged, turned
// into patches by plan.NodeConditions. It reads the node cache of Nodes.
type GrayNodes struct {
	control plan.NodeConditions
	cfg     verdict.GrayNodeConfig
	nodes   *Nodes
	d       Deps
	kube    kubernetes.Interface // from Start
}

// NewGrayNodes returns the gray node condition's controller of condition type typ, which
// follows nodes' judgement.
func NewGrayNodes(typ string, cfg verdict.GrayNodeConfig, nodes *Nodes, d Deps) *GrayNodes {
	return &GrayNodes{control: plan.NodeConditions{Type: typ}, cfg: cfg, nodes: nodes, d: d}
}

// Start keeps the client; the node cache is Nodes'.
func (c *GrayNodes) Start(kube kubernetes.Interface, _ versioned.Interface) { c.kube = kube }

// Lead: nothing to resume (the engine seeds its gray node state from the conditions).
func (c *GrayNodes) Lead(context.Context) {}

// EndTerm: the engine forgets the term's state with the pairs'.
func (c *GrayNodes) EndTerm() {}

// Shutdown: nothing of its own to stop.
func (c *GrayNodes) Shutdown() {}

// Reconcile has the gray node conditions written for the nodes Nodes judged at now (this
// shard's).
func (c *GrayNodes) Reconcile(_ context.Context, now time.Time) {
	nodes, _, judged := c.nodes.Judged(now)
	if !judged {
		return
	}
	d := c.d.Engine.ReconcileGrayNodes(now, c.control.Current(nodes), c.cfg)
	if d.Suppressed && len(d.Writes) > 0 {
		c.d.Logger.Warn("pod_network_health: gray node marking suppressed", zap.String("reason", d.SuppressedReason))
	}
	c.d.Writer().NodeConditions(c.kube, c.control.Plan(d, nodes, now))
}
