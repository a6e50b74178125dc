// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package sharedcomponent

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counting records how often it was started and shut down; it runs a goroutine while
// started, so that a missed Shutdown shows as a leak.
type counting struct {
	mu               sync.Mutex
	starts, shutdown int
	startErr         error
	stop             chan struct{}
	done             chan struct{}
}

func (c *counting) Start(context.Context, component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts++
	if c.startErr != nil {
		return c.startErr
	}
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}) { <-stop; close(done) }(c.stop, c.done)
	return nil
}

func (c *counting) Shutdown(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shutdown++
	if c.stop != nil {
		close(c.stop)
		<-c.done
		c.stop = nil
	}
	return nil
}

func (c *counting) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starts, c.shutdown
}

type config struct{ name string }

func newCounting() (*counting, error) { return &counting{}, nil }

func TestTwoPipelinesShareOneInstance(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	m := NewMap[*config, *counting]()
	cfg := &config{name: "a"}
	metrics, err := m.LoadOrStore(cfg, newCounting)
	require.NoError(t, err)
	logs, err := m.LoadOrStore(cfg, func() (*counting, error) {
		t.Fatal("a second create for the same configuration")
		return nil, nil
	})
	require.NoError(t, err)
	require.Same(t, metrics, logs)
	other, err := m.LoadOrStore(&config{name: "a"}, newCounting)
	require.NoError(t, err)
	require.NotSame(t, metrics, other, "another *Config (another component ID) gets its own instance")
	require.Equal(t, 2, m.Len())

	require.NoError(t, metrics.Start(ctx, host))
	require.NoError(t, logs.Start(ctx, host))
	starts, shutdowns := metrics.Unwrap().counts()
	assert.Equal(t, 1, starts, "started once")
	assert.Equal(t, 0, shutdowns)

	require.NoError(t, metrics.Shutdown(ctx))
	_, shutdowns = metrics.Unwrap().counts()
	assert.Equal(t, 0, shutdowns, "the logs pipeline still runs")
	require.NoError(t, logs.Shutdown(ctx))
	_, shutdowns = metrics.Unwrap().counts()
	assert.Equal(t, 1, shutdowns, "stopped with the last pipeline")
	require.NoError(t, logs.Shutdown(ctx), "twice")
	_, shutdowns = metrics.Unwrap().counts()
	assert.Equal(t, 1, shutdowns, "stopped once")
	require.NoError(t, metrics.Start(ctx, host), "no restart after shutdown")
	starts, _ = metrics.Unwrap().counts()
	assert.Equal(t, 1, starts)

	again, err := m.LoadOrStore(cfg, newCounting)
	require.NoError(t, err)
	require.NotSame(t, metrics, again, "a stopped instance is never handed out again")
	require.NoError(t, again.Shutdown(ctx), "without Start")
	require.NoError(t, other.Shutdown(ctx), "without Start")
	assert.Equal(t, 0, m.Len())
}

// A pipeline that was created but never started (the collector failed to start a later
// component) does not keep the instance running.
func TestStopsWhenNoStartedUserIsLeft(t *testing.T) {
	ctx := context.Background()
	m := NewMap[*config, *counting]()
	cfg := &config{}
	a, err := m.LoadOrStore(cfg, newCounting)
	require.NoError(t, err)
	_, err = m.LoadOrStore(cfg, newCounting)
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, a.Shutdown(ctx))
	_, shutdowns := a.Unwrap().counts()
	assert.Equal(t, 1, shutdowns)
	assert.Equal(t, 0, m.Len())
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	m := NewMap[*config, *counting]()
	_, err := m.LoadOrStore(&config{}, func() (*counting, error) { return nil, errors.New("bad config") })
	require.EqualError(t, err, "bad config")
	assert.Equal(t, 0, m.Len())

	cfg := &config{}
	c, err := m.LoadOrStore(cfg, func() (*counting, error) { return &counting{startErr: errors.New("no socket")}, nil })
	require.NoError(t, err)
	_, err = m.LoadOrStore(cfg, newCounting)
	require.NoError(t, err)
	require.EqualError(t, c.Start(ctx, componenttest.NewNopHost()), "no socket")
	require.EqualError(t, c.Start(ctx, componenttest.NewNopHost()), "no socket", "the second pipeline learns the first start failed")
	starts, _ := c.Unwrap().counts()
	assert.Equal(t, 1, starts)
	require.NoError(t, c.Shutdown(ctx))
	require.NoError(t, c.Shutdown(ctx))
	_, shutdowns := c.Unwrap().counts()
	assert.Equal(t, 1, shutdowns)
}

func TestConcurrentPipelines(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	m := NewMap[*config, *counting]()
	cfg := &config{}
	const pipelines = 8
	comps := make([]*Component[*counting], pipelines)
	var wg sync.WaitGroup
	for i := range pipelines {
		wg.Go(func() {
			c, err := m.LoadOrStore(cfg, newCounting)
			assert.NoError(t, err)
			comps[i] = c
			assert.NoError(t, c.Start(ctx, host))
		})
	}
	wg.Wait()
	for _, c := range comps[1:] {
		require.Same(t, comps[0], c)
	}
	for _, c := range comps {
		wg.Go(func() { assert.NoError(t, c.Shutdown(ctx)) })
	}
	wg.Wait()
	starts, shutdowns := comps[0].Unwrap().counts()
	assert.Equal(t, [2]int{1, 1}, [2]int{starts, shutdowns})
	assert.Equal(t, 0, m.Len())
}
