// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package plan is the pod_network_health exporter's write-policy stage: what to write and
// when. decide.go holds the per-object policy (Decide: a status is rewritten on a verdict
// change, a latency or loss move beyond tolerance, or a heartbeat, never when identical).
// It does no I/O and never reads the clock: callers pass `now`.
package plan

import (
	"math"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// Policy is the write budget of one PodNetworkHealth object.
type Policy struct {
	// HeartbeatInterval: an otherwise unchanged status is rewritten this often, so that
	// staleness is visible (default 10m: 6 writes per object per hour for a steady target,
	// 10x fewer than the one-update-per-minute model of OpenShift's connectivity checks;
	// 5m gives 12/h, only 5x fewer).
	HeartbeatInterval time.Duration
	// LeaseFreshness (the exporter's freshness: lease): an unchanged status is never
	// rewritten and carries no freshUntil; readers take its currency from the writer's Lease
	// (named by its NetworkHealthSummary). A healthy pair is written once, then only on news:
	// at 65,000 nodes the heartbeats were a shard's whole steady-state write budget.
	LeaseFreshness bool
	// RTTTolerance is how far (relative) the RTT p50 may move from the last written value
	// before it is rewritten ahead of the heartbeat (default 0.2 = 20%) ...
	RTTTolerance float64
	// RTTFloor ... but never for a move below this absolute amount (default 100us), so that
	// the jitter of sub-millisecond RTTs never causes writes.
	RTTFloor time.Duration
	// LossTolerance is how far (absolute) the loss ratio may move (default 0.02), and the
	// written ratio must also lie outside the current window's 3-sigma Wilson interval: a
	// move the counts make certain, not one lost echo.
	LossTolerance float64
	// LossFloor: a loss ratio at or below it is no loss worth a write (default the gray
	// judgement's threshold, 0.5 %): a written ratio at or below it is not rewritten while
	// the current window's is plausibly at or below it too (its 3-sigma Wilson lower bound).
	// Two lost echoes of a window's 90 under a 0.2 % background otherwise rewrote a written
	// 0 % (0.82 writes per object-hour in the shard simulation, with the latency moves).
	LossFloor float64
	// MinChangeInterval: latency- and loss-driven writes happen at most this often after the
	// previous write (default 1m; negative disables it); verdict changes are always written
	// at once. It keeps a target whose RTT or loss keeps moving (congestion, a flapping
	// path) from being rewritten every round.
	MinChangeInterval time.Duration
	// FlapWindow (the exporter's flap_window; 0: off): a gray verdict that returns within
	// it of its end is the same episode, as a pair failing again within it reopens its
	// outage: the object says Degraded again, with no second ConnectivityDegraded Event.
	FlapWindow time.Duration
}

// Defaults of Policy.
const (
	DefaultHeartbeatInterval = 10 * time.Minute
	DefaultRTTTolerance      = 0.2
	DefaultRTTFloor          = 100 * time.Microsecond
	DefaultLossTolerance     = 0.02
	DefaultLossFloor         = gray.DefaultThreshold
	DefaultMinChangeInterval = time.Minute
)

// DefaultPolicy returns the default write budget.
func DefaultPolicy() Policy {
	return Policy{
		HeartbeatInterval: DefaultHeartbeatInterval,
		RTTTolerance:      DefaultRTTTolerance,
		RTTFloor:          DefaultRTTFloor,
		LossTolerance:     DefaultLossTolerance,
		LossFloor:         DefaultLossFloor,
		MinChangeInterval: DefaultMinChangeInterval,
	}
}

// Reasons returned by Decide. The first five come with write == true.
const (
	ReasonInitial   = "initial"   // never written
	ReasonVerdict   = "verdict"   // the verdict changed
	ReasonLatency   = "latency"   // RTT p50 moved beyond tolerance (or appeared/disappeared)
	ReasonLoss      = "loss"      // loss ratio moved beyond tolerance (or appeared/disappeared)
	ReasonHeartbeat = "heartbeat" // the last write is HeartbeatInterval old
	// No write:
	ReasonUnchanged = "unchanged" // identical content
	ReasonDeferred  = "deferred"  // a latency/loss change within MinChangeInterval of the last write
	ReasonWithin    = "within_budget"
)

// Decide says whether the status of a pair should be written now, and why. The rules, in
// order:
//
//  1. never written -> write ("initial");
//  2. identical content (same Fingerprint) -> no write, ever ("unchanged");
//  3. verdict changed -> write at once ("verdict");
//  4. RTT p50 moved by more than max(RTTTolerance x last p50, RTTFloor), or RTT samples
//     appeared or disappeared -> write ("latency"), and likewise the loss ratio by more
//     than LossTolerance ("loss") - unless the last write is younger than
//     MinChangeInterval ("deferred": the change is written once that has passed); figures
//     that appear where the last write had none are written at once. Not while
//     Unreachable: then RTT and loss only restate the verdict;
//  5. the last write is at least HeartbeatInterval old -> write ("heartbeat"), unless
//     LeaseFreshness;
//  6. otherwise no write ("within_budget").
//
// The comparison is always against the last *written* status, so slow drift accumulates
// into a write instead of hiding under the tolerance forever. Zero Policy fields take the
// defaults.
func Decide(last observation.Written, cur observation.Summary, now time.Time, p Policy) (write bool, reason string) {
	p = p.withDefaults()
	if last.IsZero() {
		return true, ReasonInitial
	}
	if observation.Fingerprint(cur) == last.Fingerprint {
		return false, ReasonUnchanged
	}
	if cur.Verdict != last.Verdict {
		return true, ReasonVerdict
	}
	since := now.Sub(last.At)
	change := ""
	hasRTT := cur.RTT.Count > 0
	switch {
	case cur.Verdict == observation.VerdictUnreachable:
		// Nothing answers: the falling RTT count and the rising loss only restate the
		// verdict, which was written when it changed.
	case hasRTT != last.HasRTT:
		change = ReasonLatency
	case hasRTT:
		diff := cur.RTT.P50 - last.RTTP50
		if diff < 0 {
			diff = -diff
		}
		tol := max(time.Duration(p.RTTTolerance*float64(last.RTTP50)), p.RTTFloor)
		if diff > tol {
			change = ReasonLatency
		}
	}
	if change == "" && cur.Verdict != observation.VerdictUnreachable {
		switch {
		case cur.HasLoss != last.HasLoss:
			change = ReasonLoss
		case cur.HasLoss && math.Abs(cur.LossRatio-last.LossRatio) > p.LossTolerance+1e-12 && lossMoved(last.LossRatio, cur, p.LossFloor):
			change = ReasonLoss
		}
	}
	if change != "" {
		if appeared(last, cur) {
			// Figures where the object shows none: news at once, not a drift to pace. A
			// write without them is usually the first after a restart or a takeover (a
			// cumulative histogram's first point only sets the decoder's baseline), and
			// pacing the figures behind it left Reachable objects without latency for a
			// minute. At most once per write that dropped them.
			return true, change
		}
		if since >= p.MinChangeInterval {
			return true, change
		}
		if since < p.HeartbeatInterval || p.LeaseFreshness {
			return false, ReasonDeferred
		}
	}
	if since >= p.HeartbeatInterval && !p.LeaseFreshness {
		return true, ReasonHeartbeat
	}
	return false, ReasonWithin
}

// appeared: the current window has RTT samples (or loss counts) and the last write had
// none.
func appeared(last observation.Written, cur observation.Summary) bool {
	return cur.RTT.Count > 0 && !last.HasRTT || cur.HasLoss && !last.HasLoss
}

// lossMovedZ: a written loss ratio is stale when it lies outside the current window's
// Wilson interval at this many standard deviations.
const lossMovedZ = 3

// lossMoved reports whether the written loss ratio is no longer a plausible reading of the
// current window's counts: one lost echo more or less among a window's ~90 (5 minutes of
// 10 s rounds of 3 echoes) moves the ratio by 1.1 %, and at a 0.1 % background that would
// rewrite objects all the time (about 0.3 writes/s at 5,000 nodes) for noise. A written
// ratio at or below floor stays while the window's is plausibly at or below it too. Without
// counts (non-ICMP figures) the tolerance alone decides.
func lossMoved(written float64, cur observation.Summary, floor float64) bool {
	if cur.Sent == 0 {
		return true
	}
	lower := gray.WilsonLower(cur.Lost, cur.Sent, lossMovedZ)
	if written <= floor && lower <= floor {
		return false
	}
	return written < lower || written > gray.WilsonUpper(cur.Lost, cur.Sent, lossMovedZ)
}

func (p Policy) withDefaults() Policy {
	d := DefaultPolicy()
	if p.HeartbeatInterval <= 0 {
		p.HeartbeatInterval = d.HeartbeatInterval
	}
	if p.RTTTolerance <= 0 {
		p.RTTTolerance = d.RTTTolerance
	}
	if p.RTTFloor <= 0 {
		p.RTTFloor = d.RTTFloor
	}
	if p.LossTolerance <= 0 {
		p.LossTolerance = d.LossTolerance
	}
	if p.LossFloor <= 0 {
		p.LossFloor = d.LossFloor
	}
	switch {
	case p.MinChangeInterval == 0:
		p.MinChangeInterval = d.MinChangeInterval
	case p.MinChangeInterval < 0:
		p.MinChangeInterval = 0 // disabled
	}
	return p
}
