// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"encoding/binary"
	"hash"
	"hash/fnv"
	"math"
	"time"
)

// Written is what was last written for a pair: the writer records it (WrittenFrom) after a
// successful write. The zero value means "never written".
type Written struct {
	At          time.Time
	Verdict     Verdict
	HasRTT      bool
	RTTP50      time.Duration
	HasLoss     bool
	LossRatio   float64
	Fingerprint uint64
}

// IsZero reports whether nothing was written yet.
func (w Written) IsZero() bool { return w.At.IsZero() && w.Fingerprint == 0 }

// WrittenFrom records that s was written at `at`.
func WrittenFrom(s Summary, at time.Time) Written {
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

// Fingerprint hashes everything a Summary would put into a status (FNV-64a), so that
// identical content is recognised without keeping the last written status.
func Fingerprint(s Summary) uint64 {
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

func (w *fpWriter) latency(l Latency) {
	w.u64(l.Count, uint64(l.P50), uint64(l.P90), uint64(l.P99), uint64(l.Max))
}
