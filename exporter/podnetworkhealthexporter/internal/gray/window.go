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
	// Worst is the most echoes lost in any one slot of it: a burst (a starved agent, a
	// restarting peer) sits in one or two slots, a gray loss spreads over all of them.
	Worst uint64
	// WorstTick is the most echoes lost in any one tick of it (a third of a slot: one
	// round at the shipped 10 s rounds and 30 s slots): a burst sits in one round or two,
	// whatever the number of observers it hits.
	WorstTick uint64
}

// Ticks is how many ticks a slot is cut into for Scale.WorstTick: three, so that at the
// shipped budget a tick is a round (with shorter rounds a tick holds several, and the
// guard asks for losses further apart).
const Ticks = 3

// slot counts the echoes of one time slot; id is its start divided by the slot width;
// ticks the losses of each third of it (saturating).
type slot struct {
	id         int64
	sent, lost uint32
	ticks      [Ticks]uint16
}

// Window counts echoes in Slots time slots of Width: 24 bytes a slot, so the default (60
// slots of 30 s: half an hour) is about 1.4 KB per target or observer, whatever the probe
// rate. Evidence older than the window is forgotten, never averaged in.
type Window struct {
	ring   []slot
	width  int64
	newest int64
	used   bool
}

// NewWindow returns a window of slots slots of width.
func NewWindow(slots int, width time.Duration) *Window {
	return &Window{ring: make([]slot, max(slots, 1)), width: max(int64(width), int64(time.Millisecond))}
}

// Add counts sent echoes of which lost were lost, at ts. Counts older than the window are
// dropped; a slot saturates rather than wraps.
func (w *Window) Add(ts time.Time, sent, lost uint64) {
	if sent == 0 {
		return
	}
	id := floorDiv(ts.UnixNano(), w.width)
	n := int64(len(w.ring))
	if !w.used || id > w.newest {
		w.newest, w.used = id, true
	}
	if id <= w.newest-n {
		return
	}
	s := &w.ring[((id%n)+n)%n]
	if s.id != id {
		if s.id > id && (s.sent > 0) {
			return
		}
		*s = slot{id: id}
	}
	s.sent = satAdd(s.sent, sent)
	s.lost = satAdd(s.lost, min(lost, sent))
	if lost > 0 {
		t := &s.ticks[min((ts.UnixNano()-id*w.width)*Ticks/w.width, Ticks-1)]
		*t = uint16(min(uint64(*t)+min(lost, sent), 1<<16-1))
	}
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
	return ScalesOf(now, notBefore, out, w)
}

// ScalesOf is Scales over the sum of windows of the same shape (slots and width: a node's
// target and observer sides), each slot and tick summed across them; nil windows, and
// windows of another shape than the first used one, are skipped.
func ScalesOf(now, notBefore time.Time, out []Scale, ws ...*Window) []Scale {
	out = out[:0]
	var buf [8]*Window
	use := buf[:0]
	for _, x := range ws {
		if x != nil && x.used && (len(use) == 0 || len(x.ring) == len(use[0].ring) && x.width == use[0].width) {
			use = append(use, x)
		}
	}
	if len(use) == 0 {
		return out
	}
	w := use[0]
	n := int64(len(w.ring))
	cur := floorDiv(now.UnixNano(), w.width)
	var cut int64 // the slot notBefore falls in: older ones are left out
	if !notBefore.IsZero() {
		cut = floorDiv(notBefore.UnixNano(), w.width)
	}
	var acc Counts
	var emitted, worst, worstTick uint64
	next := int64(1)
	for k := int64(0); k < n; k++ {
		id := cur - k
		if !notBefore.IsZero() && id < cut {
			if acc.Sent > emitted { // the evidence since notBefore, whatever its scale
				out = append(out, Scale{Counts: acc, Span: time.Duration(k * w.width), Start: time.Unix(0, (id+1)*w.width), Worst: worst, WorstTick: worstTick})
			}
			break
		}
		i := ((id % n) + n) % n
		if len(use) == 1 { // one window: its slot as it is
			if s := &w.ring[i]; s.id == id && s.lost > 0 {
				acc.Sent += uint64(s.sent)
				acc.Lost += uint64(s.lost)
				worst = max(worst, uint64(s.lost))
				worstTick = max(worstTick, uint64(s.ticks[0]), uint64(s.ticks[1]), uint64(s.ticks[2]))
			} else if s.id == id {
				acc.Sent += uint64(s.sent)
			}
		} else {
			var slotLost uint64
			var ticks [Ticks]uint64
			for _, x := range use {
				if s := &x.ring[i]; s.id == id {
					acc.Sent += uint64(s.sent)
					acc.Lost += uint64(s.lost)
					slotLost += uint64(s.lost)
					for t, l := range s.ticks {
						ticks[t] += uint64(l)
					}
				}
			}
			worst = max(worst, slotLost)
			worstTick = max(worstTick, ticks[0], ticks[1], ticks[2])
		}
		if k+1 == next || k+1 == n {
			if acc.Sent > 0 {
				out = append(out, Scale{Counts: acc, Span: time.Duration((k + 1) * w.width), Start: time.Unix(0, id*w.width), Worst: worst, WorstTick: worstTick})
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
