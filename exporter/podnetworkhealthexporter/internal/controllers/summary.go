// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
)

// Summary is the NetworkHealthSummary controller: every conditionsEvery it feeds the
// engine's targets, gray verdicts and observers and the writer's queue to plan.Summary,
// and has the writer write what that returns (news only). The object lives in the Lease's
// namespace under the Lease's name.
type Summary struct {
	core      *plan.Summary
	namespace string
	d         Deps
	last      time.Time
}

// NewSummary returns the summary's controller for the Lease namespace/core.Writer.LeaseName.
func NewSummary(core *plan.Summary, namespace string, d Deps) *Summary {
	return &Summary{core: core, namespace: namespace, d: d}
}

// Start: the summary is read from the API at each write; nothing to watch.
func (c *Summary) Start(kubernetes.Interface, versioned.Interface) {}

// Lead starts the term: its first judgement is written.
func (c *Summary) Lead(context.Context) {
	c.core.Lead(time.Now())
	c.last = time.Time{}
}

// Reconcile judges the summary every conditionsEvery and queues it when it is news.
func (c *Summary) Reconcile(_ context.Context, now time.Time) {
	if now.Sub(c.last) < conditionsEvery {
		return
	}
	c.last = now
	w := c.d.Writer()
	in := plan.SummaryInput{Targets: c.d.Engine.Targets(), Gray: c.d.Engine.GrayStatuses(), Observers: c.d.Engine.Observers()}
	in.PendingVerdict, in.Pending = w.PendingVerdicts(c.namespace, c.core.Writer.LeaseName)
	if st, write := c.core.Plan(in, now); write {
		w.Summary(c.namespace, c.core.Writer.LeaseName, st)
	}
}

// EndTerm forgets the term's last write.
func (c *Summary) EndTerm() { c.core.Forget() }

// Shutdown: nothing of its own to stop.
func (c *Summary) Shutdown() {}
