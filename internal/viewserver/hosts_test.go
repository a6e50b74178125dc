// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewserver

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

// getHost is a GET with the Host header a browser would send after loading a page from
// that name.
func getHost(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// A page on attacker.example that re-points its name at the server's address is same-origin
// with it in the browser; its requests still name attacker.example, and get nothing.
func TestDNSRebindingHostIsRefused(t *testing.T) {
	src := &fixed{m: model(matrixtest.Options{Nodes: 4, Zones: 1, Stable: 3, Now: now}), version: 1, synced: true}
	var refused []string
	s := serve(t, src, HandlerOptions{AllowedHosts: []string{"netpulse.example.com", "*.view.example.org"},
		OnMisdirected: func(h string) { refused = append(refused, h) }})
	_, port, err := net.SplitHostPort(s.Listener.Addr().String())
	require.NoError(t, err)
	for _, host := range []string{"attacker.example:" + port, "attacker.example", "localhost.attacker.example:" + port,
		"127.0.0.1.nip.io:" + port, "view.example.org:" + port, "netpulse.example.com.attacker.example"} {
		for _, path := range []string{"/api/v1/pair?observer=node-1&target=node-2", "/api/v1/zones", "/", "/app.js"} {
			code, body := getHost(t, s.URL+path, host)
			assert.Equal(t, http.StatusMisdirectedRequest, code, "Host %q %s", host, path)
			assert.NotContains(t, body, "node-1", "Host %q %s: nothing of the cluster", host, path)
		}
	}
	assert.Contains(t, refused, "attacker.example:"+port)
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "10.0.0.7:8089",
		"netpulse.example.com:" + port, "NetPulse.Example.Com.", "a.view.example.org", "a.b.view.example.org:443"} {
		code, body := getHost(t, s.URL+"/api/v1/zones", host)
		assert.Equal(t, http.StatusOK, code, "Host %q: %s", host, body)
	}
}

func TestAllowedHostsValidation(t *testing.T) {
	require.NoError(t, ValidateAllowedHosts([]string{"netpulse.example.com", "*.example.org", "gateway"}))
	assert.False(t, HostAllowed("", nil), "no Host: not a name of ours")
	assert.False(t, HostAllowed("[fe80::1%eth0]:8089", nil), "a zoned address is not a literal a browser sends")
	for _, bad := range []string{"http://x", "x:8089", "*", "a.*.b", "", "*."} {
		require.Error(t, ValidateAllowedHosts([]string{bad}), bad)
	}
	_, err := NewHandler(&fixed{}, HandlerOptions{AllowedHosts: []string{"x:1"}})
	require.Error(t, err)
}
