// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package gray

import "time"

// Counts are echoes sent and lost.
type Counts struct{ Sent, Lost uint64 }

// Ratio is Lost/Sent (0 without samples).
func (c Counts) Ratio() float64 {
	if c.Sent == 0 {
		return 0
	}
	return float64(min(c.Lost, c.Sent)) / float64(c.Sent)
}

// Sub removes o, never below zero.
func (c Counts) Sub(o Counts) Counts {
	return Counts{Sent: c.Sent - min(o.Sent, c.Sent), Lost: c.Lost - min(o.Lost, c.Lost)}
}

// Scale is the counts of the newest slots of a window: Span back from the newest slot's end.
type Scale struct {
	Counts
	Span time.Duration
	// Start is the start of the oldest slot in it.
	Start time.Time
	// Worst is the most echoes lost in any one slot of it, or in a third of one among the
	// newest two: a burst (a starved agent, a restarting peer) sits in one or two of them,
	// a gray loss spreads over all of them.
	Worst uint64
}

// slot counts the echoes of one time slot; id is its start divided by the slot width.
type slot struct {
	id         int64
	sent, lost uint32
}

// Window counts echoes in Slots time slots of Width: 16 bytes a slot, so the default (60
// slots of 30 s: half an hour) is about 1 KB per target or observer, whatever the probe
// rate, plus the losses of the newest two slots in thirds (fine: the burst test's grain).
// Evidence older than the window is forgotten, never averaged in.
type Window struct {
	ring   []slot
	width  int64
	newest int64
	used   bool
	// fine counts the losses of the newest fineSlots thirds of a slot: a burst (a starved
	// agent, a restarting peer) is judged by the most lost in a third of a slot, not in a
	// whole slot, so a loss that began at a slot's start needs a third of a slot more, not
	// a whole one, to show in two parts of it. 100 bytes.
	fine       [fineSlots]fineSlot
	fineNewest int64
}

// fineSlot is the losses of a third of a slot; id is the slot's id times fineDiv plus the
// third.
type fineSlot struct {
	id   int64
	lost uint32
}

const (
	fineDiv   = 3
	fineSlots = 2 * fineDiv
)

// NewWindow returns a window of slots slots of width.
func NewWindow(slots int, width time.Duration) *Window {
	return &Window{ring: make([]slot, max(slots, 1)), width: max(int64(width), int64(time.Millisecond))}
}

// Add counts sent echoes of which lost were lost, at ts. Counts older than the window are
// dropped; a slot saturates rather than wraps.
func (w *Window) Add(ts time.Time, sent, lost uint64) {
	id := floorDiv(ts.UnixNano(), w.width)
	if !w.addSlot(id, sent, lost) || lost == 0 {
		return
	}
	third := (ts.UnixNano() - id*w.width) * fineDiv / w.width
	w.addFine(id*fineDiv+min(max(third, 0), fineDiv-1), lost)
}

// addSlot counts into slot id; it reports whether the counts were kept.
func (w *Window) addSlot(id int64, sent, lost uint64) bool {
	if sent == 0 {
		return false
	}
	n := int64(len(w.ring))
	if !w.used || id > w.newest {
		w.newest, w.used = id, true
	}
	if id <= w.newest-n {
		return false
	}
	s := &w.ring[((id%n)+n)%n]
	if s.id != id {
		if s.id > id && (s.sent > 0) {
			return false
		}
		*s = slot{id: id}
	}
	s.sent = satAdd(s.sent, sent)
	s.lost = satAdd(s.lost, min(lost, sent))
	return true
}

// addFine counts lost echoes into the fine slot fid (dropped when older than the fine
// ring holds: the burst test then takes the whole slot's losses as the burst).
func (w *Window) addFine(fid int64, lost uint64) {
	w.fineNewest = max(w.fineNewest, fid)
	if fid <= w.fineNewest-fineSlots {
		return
	}
	f := &w.fine[((fid%fineSlots)+fineSlots)%fineSlots]
	if f.id != fid {
		if f.id > fid && f.lost > 0 {
			return
		}
		*f = fineSlot{id: fid}
	}
	f.lost = satAdd(f.lost, lost)
}

// burst is the most echoes of slot s that may have been lost together: the most lost in a
// third of it when the fine ring holds its thirds (losses the ring missed count as one
// more burst), else all of its losses.
func (w *Window) burst(s *slot) uint64 {
	lost := uint64(s.lost)
	if s.id*fineDiv <= w.fineNewest-fineSlots {
		return lost
	}
	var most, sum uint64
	for t := range int64(fineDiv) {
		fid := s.id*fineDiv + t
		if f := &w.fine[((fid%fineSlots)+fineSlots)%fineSlots]; f.id == fid {
			most = max(most, uint64(f.lost))
			sum += uint64(f.lost)
		}
	}
	return max(most, lost-min(sum, lost))
}

func satAdd(a uint32, b uint64) uint32 {
	if v := uint64(a) + b; v < 1<<32 {
		return uint32(v)
	}
	return 1<<32 - 1
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Scales returns the cumulative counts of the newest 1, 2, 4, ... slots and of the whole
// window, ending at now's slot, over slots that start at or after notBefore (zero: no such
// bound). Scales without samples are left out; they are ordered shortest first.
func (w *Window) Scales(now, notBefore time.Time, out []Scale) []Scale {
	out = out[:0]
	if !w.used {
		return out
	}
	n := int64(len(w.ring))
	cur := floorDiv(now.UnixNano(), w.width)
	var acc Counts
	var emitted, worst uint64
	next := int64(1)
	for k := int64(0); k < n; k++ {
		id := cur - k
		start := time.Unix(0, id*w.width)
		if !notBefore.IsZero() && start.Before(notBefore.Truncate(time.Duration(w.width))) {
			if acc.Sent > emitted { // the evidence since notBefore, whatever its scale
				out = append(out, Scale{Counts: acc, Span: time.Duration(k * w.width), Start: start.Add(time.Duration(w.width)), Worst: worst})
			}
			break
		}
		if s := &w.ring[((id%n)+n)%n]; s.id == id {
			acc.Sent += uint64(s.sent)
			acc.Lost += uint64(s.lost)
			worst = max(worst, w.burst(s))
		}
		if k+1 == next || k+1 == n {
			if acc.Sent > 0 {
				out = append(out, Scale{Counts: acc, Span: time.Duration((k + 1) * w.width), Start: start, Worst: worst})
				emitted = acc.Sent
			}
			next *= 2
		}
	}
	return out
}

// Total is the counts of the whole window ending at now.
func (w *Window) Total(now time.Time) Counts {
	var buf [16]Scale
	s := w.Scales(now, time.Time{}, buf[:0])
	if len(s) == 0 {
		return Counts{}
	}
	return s[len(s)-1].Counts
}

// Reset empties the window, keeping its slots.
func (w *Window) Reset() {
	clear(w.ring)
	w.newest, w.used = 0, false
	w.fine, w.fineNewest = [fineSlots]fineSlot{}, 0
}

// AddWindow adds src's counts slot by slot: windows of one slot width share slot
// boundaries (a slot is its start time over the width), so the sum is the window of the
// union of their echoes. Slots of src older than w's range are dropped, as Add drops them.
func (w *Window) AddWindow(src *Window) {
	if !src.used {
		return
	}
	n := int64(len(src.ring))
	for k := int64(0); k < n; k++ {
		id := src.newest - k
		s := &src.ring[((id%n)+n)%n]
		if s.id != id || s.sent == 0 {
			continue
		}
		w.addSlot(id, uint64(s.sent), uint64(s.lost))
	}
	for _, f := range src.fine {
		if f.lost > 0 && f.id > src.fineNewest-fineSlots {
			w.addFine(f.id, uint64(f.lost))
		}
	}
}
