// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpulseviewextension

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/netpulse/netpulse/extension/netpulseviewextension/internal/metadata"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/livematrix"
)

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// Without an API server the extension starts at once, serves the page, answers 503 on
// the API until its informers have listed, and shuts down cleanly (goleak in TestMain).
func TestStartsQuicklyWithoutAPIServer(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = freeAddr(t)
	cfg.AuthType, cfg.Kubeconfig = kubeclient.AuthKubeConfig, "testdata/unreachable.kubeconfig"
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	t0 := time.Now()
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	assert.Less(t, time.Since(t0), time.Second)
	require.NotNil(t, livematrix.Default.Store(), "the view holds the live matrix the exporter fills")
	assert.Equal(t, 1_000_000, livematrix.Default.Store().Config().MaxCells)

	resp, err := http.Get("http://" + cfg.NetAddr.Endpoint + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "netpulse")
	resp, err = http.Get("http://" + cfg.NetAddr.Endpoint + "/api/v1/zones")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	require.NoError(t, ext.Shutdown(context.Background()))
	assert.Nil(t, livematrix.Default.Store(), "let go at shutdown")
	require.NoError(t, ext.Shutdown(context.Background()), "twice")
	assert.Error(t, ext.Start(context.Background(), componenttest.NewNopHost()), "no restart after shutdown")
}

// A page whose name was re-pointed at the view's address (DNS rebinding) is refused; the
// same request by address or by an allowed name is served.
func TestRebindingHostIsRefused(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = freeAddr(t)
	cfg.AuthType, cfg.Kubeconfig = kubeclient.AuthKubeConfig, "testdata/unreachable.kubeconfig"
	cfg.AllowedHosts = []string{"netpulse.example.com"}
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()
	_, port, err := net.SplitHostPort(cfg.NetAddr.Endpoint)
	require.NoError(t, err)
	status := func(host, path string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+cfg.NetAddr.Endpoint+path, nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/", "/api/v1/pair?observer=a&target=b"} {
		assert.Equal(t, http.StatusMisdirectedRequest, status("rebind.attacker.example:"+port, path), path)
	}
	assert.Equal(t, http.StatusOK, status("localhost:"+port, "/"))
	assert.Equal(t, http.StatusOK, status("127.0.0.1:"+port, "/"))
	assert.Equal(t, http.StatusOK, status("netpulse.example.com", "/"))
}

func TestShutdownWithoutStart(t *testing.T) {
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), NewFactory().CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Shutdown(context.Background()))
	require.NoError(t, ext.Shutdown(context.Background()))
}

func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = l.Addr().String()
	cfg.AuthType, cfg.Kubeconfig = kubeclient.AuthKubeConfig, "testdata/unreachable.kubeconfig"
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.Error(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	assert.Nil(t, livematrix.Default.Store(), "a failed start holds no live matrix")
	require.NoError(t, ext.Shutdown(context.Background()))
}

func TestLiveDisabled(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = freeAddr(t)
	cfg.AuthType, cfg.Kubeconfig = kubeclient.AuthKubeConfig, "testdata/unreachable.kubeconfig"
	cfg.Live.Enabled = false
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	assert.Nil(t, livematrix.Default.Store(), "nothing for the exporter to fill")
	require.NoError(t, ext.Shutdown(context.Background()))
}
