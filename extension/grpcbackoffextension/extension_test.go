// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package grpcbackoffextension

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configmiddleware"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"google.golang.org/grpc"

	"github.com/netpulse/netpulse/extension/grpcbackoffextension/internal/metadata"
)

// dialsWhileDown counts the connection attempts a client made through configgrpc (with the
// extension as its middleware when cfg is set) to an address where nothing listens, over
// down. Counting attempts, not timing a reconnection: the two backoffs differ by far more
// than a loaded machine can blur.
func dialsWhileDown(t *testing.T, cfg *Config, down time.Duration) int64 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // refused from now on

	var dials atomic.Int64
	cc := configgrpc.NewDefaultClientConfig()
	cc.Endpoint = addr
	cc.TLS = configtls.ClientConfig{Insecure: true}
	extensions := map[component.ID]component.Component{}
	if cfg != nil {
		id := component.NewID(metadata.Type)
		ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
		require.NoError(t, err)
		require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
		t.Cleanup(func() { assert.NoError(t, ext.Shutdown(context.Background())) })
		extensions[id] = ext
		cc.Middlewares = []configmiddleware.Config{{ID: id}}
	}
	conn, err := cc.ToClientConn(context.Background(), extensions, componenttest.NewNopTelemetrySettings(),
		configgrpc.WithGrpcDialOption(grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a)
		})))
	require.NoError(t, err)
	defer conn.Close()
	conn.Connect()
	time.Sleep(down)
	return dials.Load()
}

// gRPC's default backoff (1 s, ×1.6, no cap before 120 s) tries 3 times in 2.5 s; capped at
// 100 ms from 20 ms, the client tries every ~100 ms: what a client listing the extension in
// its middlewares gets through configgrpc.
func TestTheMiddlewareSetsTheClientsBackoff(t *testing.T) {
	const down = 2500 * time.Millisecond
	capped := dialsWhileDown(t, &Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 100 * time.Millisecond, MinConnectTimeout: time.Second}, down)
	plain := dialsWhileDown(t, nil, down)
	t.Logf("attempts in %v while refused: %d with max_delay 100ms, %d with gRPC's default", down, capped, plain)
	assert.LessOrEqual(t, plain, int64(4), "gRPC's default: 1 s, then 1.6 s")
	assert.GreaterOrEqual(t, capped, int64(10), "capped at 100 ms")
}

func TestShutdownWithoutStartAndTwice(t *testing.T) {
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), NewFactory().CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Shutdown(context.Background()))
	require.NoError(t, ext.Shutdown(context.Background()))
}
