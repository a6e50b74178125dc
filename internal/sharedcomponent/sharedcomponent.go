// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package sharedcomponent shares one component instance between the pipelines that use
// the same configuration: the pod_probe receiver between its metrics, traces and logs
// pipelines (probes run once and feed all of them), the pod_network_health exporter
// between its metrics and logs pipelines (one writer, one Lease, one write budget).
//
// It is modelled on opentelemetry-collector-contrib's internal/sharedcomponent (Apache-2.0),
// which contrib's components cannot export to us, with one difference: contrib stops the
// instance on the first Shutdown; here it stops when the last pipeline using it shuts down
// (or when no pipeline that started it is left), so an exporter keeps accepting data until
// the last of its pipelines has stopped.
package sharedcomponent // import "github.com/netpulse/netpulse/internal/sharedcomponent"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// Map holds one shared component per key (a factory keys it by the *Config it was created
// with: the collector passes the same pointer to each pipeline of one component ID).
type Map[K comparable, V component.Component] struct {
	mu         sync.Mutex
	components map[K]*Component[V]
}

// NewMap returns an empty Map.
func NewMap[K comparable, V component.Component]() *Map[K, V] {
	return &Map[K, V]{components: map[K]*Component[V]{}}
}

// LoadOrStore returns the live component for key, calling create when there is none. Each
// call counts one more user (one pipeline's instance) that is expected to call Shutdown.
func (m *Map[K, V]) LoadOrStore(key K, create func() (V, error)) (*Component[V], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.components[key]; ok {
		c.mu.Lock()
		live := !c.stopped
		if live {
			c.users++
		}
		c.mu.Unlock()
		if live {
			return c, nil
		}
	}
	v, err := create()
	if err != nil {
		return nil, err
	}
	c := &Component[V]{component: v, users: 1}
	c.remove = func() {
		m.mu.Lock()
		if m.components[key] == c {
			delete(m.components, key)
		}
		m.mu.Unlock()
	}
	m.components[key] = c
	return c, nil
}

// Len is the number of live shared components.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.components)
}

// Component is one shared instance. Its Start starts the wrapped component once; its
// Shutdown stops it once, when no user is left or no user that started it is left, and
// then removes it from its Map (a later LoadOrStore creates a new instance). Start after
// that is a no-op: the collector never restarts a component, it creates a new one.
type Component[V component.Component] struct {
	component V
	remove    func()

	mu       sync.Mutex
	users    int // LoadOrStore calls not yet matched by a Shutdown
	running  int // Start calls not yet matched by a Shutdown
	started  bool
	startErr error
	stopped  bool
}

var _ component.Component = (*Component[component.Component])(nil)

// Unwrap returns the wrapped component.
func (c *Component[V]) Unwrap() V { return c.component }

// Start starts the wrapped component on the first call and returns that call's error on
// every later call. The lock is held across the wrapped Start (which returns quickly, per
// the collector's contract) so that a second pipeline never runs ahead of a start in
// progress.
func (c *Component[V]) Start(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.running++
	if !c.started {
		c.started = true
		c.startErr = c.component.Start(ctx, host)
	}
	return c.startErr
}

// Shutdown ends one user's use; the wrapped component is shut down (once) when no user is
// left, or when none of the remaining users has started it. Safe without Start and twice.
func (c *Component[V]) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.users--
	if c.running > 0 {
		c.running--
	}
	if c.users > 0 && c.running > 0 {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	// The wrapped Shutdown runs under the lock so that a concurrent Start (which then sees
	// stopped) cannot return before the component is down. remove takes Map.mu, which
	// LoadOrStore holds while it takes Component.mu, so it runs after the unlock; meanwhile
	// LoadOrStore already treats this instance as gone.
	err := c.component.Shutdown(ctx)
	c.mu.Unlock()
	c.remove()
	return err
}
