// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package plan is the pod_network_health exporter's write-policy stage: what to write and
// when. decide.go holds the per-object policy (Decide: a status is rewritten on a verdict
// change, a latency or loss move beyond tolerance, or a heartbeat, never when identical).
// It does no I/O and never reads the clock: callers pass `now`.
package plan

import (
	"encoding/binary"
	"hash"
	"hash/fnv"
	"math"
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// Policy is the write budget of one PodNetworkHealth object.
type Policy struct {
	// HeartbeatInterval: an otherwise unchanged status is rewritten this often, so that
	// staleness is visible (default 10m: 6 writes per object per hour for a steady target,
	// 10x fewer than the one-update-per-minute model of OpenShift's connectivity checks;
	// 5m gives 12/h, only 5x fewer).
	HeartbeatInterval time.Duration
	// RTTTolerance is how far (relative) the RTT p50 may move from the last written value
	// before it is rewritten ahead of the heartbeat (default 0.2 = 20%) ...
	RTTTolerance float64
	// RTTFloor ... but never for a move below this absolute amount (default 100us), so that
	// the jitter of sub-millisecond RTTs never causes writes.
	RTTFloor time.Duration
	// LossTolerance is how far (absolute) the loss ratio may move (default 0.05).
	LossTolerance float64
	// MinChangeInterval: latency- and loss-driven writes happen at most this often after the
	// previous write (default 1m; negative disables it); verdict changes are always written
	// at once. It keeps a target whose RTT or loss keeps moving (congestion, a flapping
	// path) from being rewritten every round.
	MinChangeInterval time.Duration
}

// Defaults of Policy.
const (
	DefaultHeartbeatInterval = 10 * time.Minute
	DefaultRTTTolerance      = 0.2
	DefaultRTTFloor          = 100 * time.Microsecond
	DefaultLossTolerance     = 0.05
	DefaultMinChangeInterval = time.Minute
)

// DefaultPolicy returns the default write budget.
func DefaultPolicy() Policy {
	return Policy{
		HeartbeatInterval: DefaultHeartbeatInterval,
		RTTTolerance:      DefaultRTTTolerance,
		RTTFloor:          DefaultRTTFloor,
		LossTolerance:     DefaultLossTolerance,
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

// Written is what was last written for a pair: the writer records it (WrittenFrom) after a
// successful write. The zero value means "never written".
type Written struct {
	At          time.Time
	Verdict     observation.Verdict
	HasRTT      bool
	RTTP50      time.Duration
	HasLoss     bool
	LossRatio   float64
	Fingerprint uint64
}

// IsZero reports whether nothing was written yet.
func (w Written) IsZero() bool { return w.At.IsZero() && w.Fingerprint == 0 }

// WrittenFrom records that s was written at `at`.
func WrittenFrom(s observation.Summary, at time.Time) Written {
	return Written{
		At:          at,
		Verdict:     s.Verdict,
		HasRTT:      s.RTT.Count > 0,
		RTTP50:      s.RTT.P50,
		HasLoss:     s.HasLoss,
		LossRatio:   s.LossRatio,
		Fingerprint: Fingerprint(s),
	}
}

// Decide says whether the status of a pair should be written now, and why. The rules, in
// order:
//
//  1. never written -> write ("initial");
//  2. identical content (same Fingerprint) -> no write, ever ("unchanged");
//  3. verdict changed -> write at once ("verdict");
//  4. RTT p50 moved by more than max(RTTTolerance x last p50, RTTFloor), or RTT samples
//     appeared or disappeared -> write ("latency"), and likewise the loss ratio by more
//     than LossTolerance ("loss") - unless the last write is younger than
//     MinChangeInterval ("deferred": the change is written once that has passed). Not
//     while Unreachable: then RTT and loss only restate the verdict;
//  5. the last write is at least HeartbeatInterval old -> write ("heartbeat");
//  6. otherwise no write ("within_budget").
//
// The comparison is always against the last *written* status, so slow drift accumulates
// into a write instead of hiding under the tolerance forever. Zero Policy fields take the
// defaults.
func Decide(last Written, cur observation.Summary, now time.Time, p Policy) (write bool, reason string) {
	p = p.withDefaults()
	if last.IsZero() {
		return true, ReasonInitial
	}
	if Fingerprint(cur) == last.Fingerprint {
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
		case cur.HasLoss && math.Abs(cur.LossRatio-last.LossRatio) > p.LossTolerance+1e-12:
			change = ReasonLoss
		}
	}
	if change != "" {
		if since >= p.MinChangeInterval {
			return true, change
		}
		if since < p.HeartbeatInterval {
			return false, ReasonDeferred
		}
	}
	if since >= p.HeartbeatInterval {
		return true, ReasonHeartbeat
	}
	return false, ReasonWithin
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
	switch {
	case p.MinChangeInterval == 0:
		p.MinChangeInterval = d.MinChangeInterval
	case p.MinChangeInterval < 0:
		p.MinChangeInterval = 0 // disabled
	}
	return p
}

// Fingerprint hashes everything a Summary would put into a status (FNV-64a), so that
// identical content is recognised without keeping the last written status.
func Fingerprint(s observation.Summary) uint64 {
	h := fnv.New64a()
	w := fpWriter{h: h}
	k := s.Key
	w.str(k.SourceNamespace, k.SourcePod, k.SourceUID, string(k.TargetKind), k.TargetNamespace, k.TargetName, k.TargetUID, k.TargetAddress)
	w.str(s.Target.Node, s.Target.Zone, s.Target.Address, string(s.Verdict), s.RTTFrom, s.ObservedFromNode)
	w.time(s.VerdictSince, s.LastObserved, s.WindowStart, s.WindowEnd)
	w.latency(s.RTT)
	w.u64(math.Float64bits(s.LossRatio), b2u(s.HasLoss), s.Sent, s.Lost)
	w.u64(uint64(s.Rounds), uint64(s.FailedRounds), uint64(s.Observers), uint64(len(s.ObserverNodes)))
	w.str(s.ObserverNodes...)
	w.u64(uint64(len(s.Probes)))
	for _, r := range s.Probes {
		w.str(r.Type)
		w.u64(r.Probes, r.Failures, r.Sent, r.Lost)
		w.latency(r.RTT)
		w.time(r.LastSuccess)
		if f := r.LastFailure; f != nil {
			w.u64(1)
			w.time(f.Time)
			w.str(f.ErrorType, f.Reason, f.Message)
		} else {
			w.u64(0)
		}
	}
	w.u64(uint64(len(s.Outages)))
	for _, o := range s.Outages {
		w.time(o.Start, o.End)
		w.str(o.Reason, o.Message)
	}
	return h.Sum64()
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

type fpWriter struct {
	h   hash.Hash64
	buf [8]byte
}

func (w *fpWriter) u64(vs ...uint64) {
	for _, v := range vs {
		binary.LittleEndian.PutUint64(w.buf[:], v)
		_, _ = w.h.Write(w.buf[:])
	}
}

func (w *fpWriter) str(ss ...string) {
	for _, s := range ss {
		w.u64(uint64(len(s)))
		_, _ = w.h.Write([]byte(s))
	}
}

func (w *fpWriter) time(ts ...time.Time) {
	for _, t := range ts {
		if t.IsZero() {
			w.u64(0, 0)
			continue
		}
		w.u64(1, uint64(t.UnixNano()))
	}
}

func (w *fpWriter) latency(l observation.Latency) {
	w.u64(l.Count, uint64(l.P50), uint64(l.P90), uint64(l.P99), uint64(l.Max))
}
