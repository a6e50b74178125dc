// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// NodeWritePriority is how urgent a node condition write of the verdict stage is: a change
// that finds or ends a problem goes with the verdicts; everything that touches many nodes
// at once without an outage in it goes behind them; an unchanged condition is a heartbeat.
// gray: the write is the gray condition's (verdict.NodeDecision.Gray), which never goes
// ahead of an outage's verdicts.
func NodeWritePriority(w verdict.NodeWrite, gray bool) Priority {
	base := w.Replaces
	switch {
	case !w.Changed:
		return PriorityHeartbeat
	case gray:
		return PriorityUpdate
	case w.Condition.Reason == verdict.NodeReasonSuppressed || base != nil && base.Reason == verdict.NodeReasonSuppressed:
		// Entering or leaving suppression touches every node at once: behind the
		// verdicts of objects, within the budget.
		return PriorityUpdate
	}
	return PriorityVerdict
}

// HeartbeatRule is the verdict stage's heartbeat stretching under the write budget
// (verdict.Config.HeartbeatInterval): the heartbeats of all objects and node conditions
// together use at most HeartbeatShare of WritesPerSecond (writequeue.HeartbeatInterval).
// Zero fields take verdict's defaults.
func HeartbeatRule(cfg verdict.Config) func(configured time.Duration, objects int) time.Duration {
	perSecond, share := cfg.WritesPerSecond, cfg.HeartbeatShare
	if perSecond <= 0 {
		perSecond = verdict.DefaultWritesPerSecond
	}
	if share <= 0 || share > 1 {
		share = verdict.DefaultHeartbeatShare
	}
	return func(configured time.Duration, objects int) time.Duration {
		return writequeue.HeartbeatInterval(configured, objects, perSecond, share)
	}
}
