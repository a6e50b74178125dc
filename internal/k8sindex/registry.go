// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8sindex

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"
)

// Key identifies a shareable index: components that acquire the same key share one Index
// and one Watcher (one set of watches) per process.
type Key struct {
	// Client identifies the API endpoint and credentials (e.g. the component's client
	// configuration, printed).
	Client          string
	Scope           Scope
	PodLabels       string // label keys joined with ","
	DeletedPodGrace time.Duration
}

// NewKey builds a Key from its parts.
func NewKey(client string, scope Scope, podLabels []string, grace time.Duration) Key {
	return Key{Client: client, Scope: scope, PodLabels: strings.Join(podLabels, ","), DeletedPodGrace: grace}
}

// Registry hands out shared indexes, reference-counted by key. Most code uses the
// process-wide DefaultRegistry through Acquire.
type Registry struct {
	mu      sync.Mutex
	entries map[Key]*shared
}

type shared struct {
	key     Key
	ix      *Index
	watcher *Watcher
	refs    int
}

// DefaultRegistry is the process-wide registry.
var DefaultRegistry = &Registry{}

// Acquire is DefaultRegistry.Acquire.
func Acquire(key Key, restConfig func() (*rest.Config, error), logger *zap.Logger) (*Handle, error) {
	return DefaultRegistry.Acquire(key, restConfig, logger)
}

// Acquire returns a handle on the index for key, creating the index and starting its
// watcher (with restConfig and logger) if this is the first holder. It does not wait for
// the initial sync. Release the handle when done; the watcher stops with the last one.
func (r *Registry) Acquire(key Key, restConfig func() (*rest.Config, error), logger *zap.Logger) (*Handle, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.entries[key]; s != nil {
		s.refs++
		return &Handle{r: r, s: s}, nil
	}
	cfg, err := restConfig()
	if err != nil {
		return nil, err
	}
	var labelKeys []string
	if key.PodLabels != "" {
		labelKeys = strings.Split(key.PodLabels, ",")
	}
	ix := New(Config{PodLabels: labelKeys, DeletedPodGrace: key.DeletedPodGrace})
	w, err := Watch(cfg, ix, key.Scope, logger)
	if err != nil {
		return nil, fmt.Errorf("k8sindex: %w", err)
	}
	if r.entries == nil {
		r.entries = make(map[Key]*shared)
	}
	s := &shared{key: key, ix: ix, watcher: w, refs: 1}
	r.entries[key] = s
	return &Handle{r: r, s: s}, nil
}

// Len is the number of live shared indexes (for tests and diagnostics).
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

func (r *Registry) release(s *shared) {
	r.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(r.entries, s.key)
	}
	r.mu.Unlock()
	if last {
		s.watcher.Stop()
	}
}

// Handle is one holder's reference to a shared index.
type Handle struct {
	r    *Registry // nil for a static handle
	s    *shared
	once sync.Once
}

// StaticHandle wraps an index that its owner feeds itself (tests, or a component with
// its own source of records): it is always synced and Release does nothing.
func StaticHandle(ix *Index) *Handle { return &Handle{s: &shared{ix: ix}} }

// Index is the shared index.
func (h *Handle) Index() *Index { return h.s.ix }

// Watcher is the shared watcher (nil for a static handle).
func (h *Handle) Watcher() *Watcher { return h.s.watcher }

// HasSynced reports whether the initial state is in the index.
func (h *Handle) HasSynced() bool { return h.s.watcher == nil || h.s.watcher.HasSynced() }

// WaitForSync blocks until the initial state is in the index or ctx ends.
func (h *Handle) WaitForSync(ctx context.Context) error {
	if h.s.watcher == nil {
		return nil
	}
	return h.s.watcher.WaitForSync(ctx)
}

// Release drops the reference; it is safe to call more than once.
func (h *Handle) Release() {
	h.once.Do(func() {
		if h.r != nil {
			h.r.release(h.s)
		}
	})
}
