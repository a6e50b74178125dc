// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package writequeue

// Heap slots: every item records its position in each heap it can be in, so it can be
// removed or re-ordered in O(log n) without a search.
const (
	slotReady   = iota // ready[p]: ready items of one priority, oldest first
	slotAll            // all[p]: every pending item of one priority, newest first (eviction)
	slotDelayed        // delayed: items waiting for their retry time, earliest first
	numSlots
)

// heap is a binary heap of items that keeps item.idx[slot] current (-1 when absent).
type heap[V any] struct {
	items []*item[V]
	slot  int
	less  func(a, b *item[V]) bool
}

func (h *heap[V]) len() int { return len(h.items) }

func (h *heap[V]) has(it *item[V]) bool { return it.idx[h.slot] >= 0 }

func (h *heap[V]) peek() *item[V] {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *heap[V]) push(it *item[V]) {
	it.idx[h.slot] = len(h.items)
	h.items = append(h.items, it)
	h.up(len(h.items) - 1)
}

func (h *heap[V]) pop() *item[V] {
	it := h.items[0]
	h.remove(it)
	return it
}

func (h *heap[V]) remove(it *item[V]) {
	i := it.idx[h.slot]
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	it.idx[h.slot] = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// fix restores the order after it's key changed.
func (h *heap[V]) fix(it *item[V]) {
	i := it.idx[h.slot]
	if !h.down(i) {
		h.up(i)
	}
}

func (h *heap[V]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].idx[h.slot] = i
	h.items[j].idx[h.slot] = j
}

func (h *heap[V]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down reports whether the item moved.
func (h *heap[V]) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			j = r
		}
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
