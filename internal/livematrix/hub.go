// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package livematrix

import (
	"sync"
	"sync/atomic"
	"time"
)

// Hub hands the store from the views that read it to the exporter that fills it, within
// one collector process, without either component importing the other (hack/importcheck):
// both import this package. The netpulse_view extension Attaches (it owns the bounds: no
// view, no store, no memory spent); the pod_network_health exporter reads Store on every
// batch (nil: record nothing), says it Produces while it runs and Leads while it holds the
// writer Lease. Default is the process's hub; tests make their own.
type Hub struct {
	mu    sync.Mutex
	store *Store
	users int

	current   atomic.Pointer[Store]
	producers atomic.Int32
	leading   atomic.Int32
}

// Default is the hub the collector's components share.
var Default = &Hub{}

// Attach returns the hub's store, creating it with cfg when no view holds one (a second
// view shares the first one's store and bounds), and the function that lets it go: the
// store is dropped when its last view detaches. Detach is safe to call twice.
func (h *Hub) Attach(cfg Config) (*Store, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.store == nil {
		h.store = New(cfg)
		h.current.Store(h.store)
	}
	h.users++
	s := h.store
	var once sync.Once
	return s, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.users--; h.users == 0 {
				h.store = nil
				h.current.Store(nil)
			}
		})
	}
}

// Store is the store to record into; nil when no view is attached.
func (h *Hub) Store() *Store { return h.current.Load() }

// Produce marks an exporter feeding the hub; the returned function unmarks it (once).
func (h *Hub) Produce() func() { return mark(&h.producers) }

// Lead marks an exporter holding the writer Lease (so that every agent sends to it); the
// returned function unmarks it (once).
func (h *Hub) Lead() func() { return mark(&h.leading) }

func mark(n *atomic.Int32) func() {
	n.Add(1)
	var once sync.Once
	return func() { once.Do(func() { n.Add(-1) }) }
}

// State says whether this process's live cells are the cluster's.
type State string

// States of Status.
const (
	// StateLive: an exporter here holds the writer Lease: every agent sends to it.
	StateLive State = "live"
	// StateStandby: the exporter here is a standby replica: agents send to the leader.
	StateStandby State = "standby"
	// StateNoExporter: no pod_network_health exporter runs in this process.
	StateNoExporter State = "no-exporter"
	// StateUnavailable: the server cannot read a gateway's memory (kubectl netpulse
	// serve on a workstation): objects only.
	StateUnavailable State = "unavailable"
)

// Status is what a view says about its live cells.
type Status struct {
	State   State  `json:"state"`
	Message string `json:"message"`
	Stats
}

// Status reports the hub's state and its store's size (s may be nil).
func (h *Hub) Status(s *Store) Status {
	st := Status{}
	if s != nil {
		st.Stats = s.Stats()
	}
	switch {
	case h.leading.Load() > 0:
		st.State = StateLive
		st.Message = "live cells: this gateway holds the writer Lease, so every agent's observations arrive here"
	case h.producers.Load() > 0:
		st.State = StateStandby
		st.Message = "no live data: this gateway replica is a standby (it does not hold the writer Lease; agents send to the leader). Open the leader's view for live cells"
	default:
		st.State = StateNoExporter
		st.Message = "no live data: no pod_network_health exporter runs in this collector"
	}
	return st
}

// Reader is a view's access to the live cells: the store it attached, shown only while an
// exporter here holds the writer Lease (a standby's cells are not the cluster's).
type Reader struct {
	hub   *Hub
	store *Store
}

// Reader returns the reader of s (attached from h).
func (h *Hub) Reader(s *Store) Reader { return Reader{hub: h, store: s} }

// Status is the hub's state and the store's size.
func (r Reader) Status() Status { return r.hub.Status(r.store) }

// Row is observer's live cells at now; none unless the state is StateLive.
func (r Reader) Row(observer string, now time.Time) []Result {
	if r.store == nil || r.hub.leading.Load() == 0 {
		return nil
	}
	return r.store.Row(observer, now)
}
