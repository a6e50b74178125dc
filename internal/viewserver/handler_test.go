// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

var now = time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)

type fixed struct {
	m       *matrix.Model
	version uint64
	synced  bool
}

func (f *fixed) Snapshot() (*matrix.Model, uint64, bool) { return f.m, f.version, f.synced }

func model(o matrixtest.Options) *matrix.Model {
	f := matrixtest.Cluster(o)
	in := matrix.Input{Objects: f.Objects, Now: now}
	for _, n := range f.Nodes {
		in.Nodes = append(in.Nodes, matrix.NodeFrom(n, ""))
	}
	for _, p := range f.Pods {
		in.Pods = append(in.Pods, matrix.PodFrom(p))
	}
	return matrix.Build(in)
}

func serve(t *testing.T, src Snapshotter, opts HandlerOptions) *httptest.Server {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = func() time.Time { return now }
	}
	h, err := NewHandler(src, opts)
	require.NoError(t, err)
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func TestEndpoints(t *testing.T) {
	src := &fixed{m: model(matrixtest.Options{Nodes: 6, Zones: 2, Stable: 5, Partitioned: "node-2", Now: now}), version: 7, synced: true}
	s := serve(t, src, HandlerOptions{})

	resp, body := get(t, s.URL+"/api/v1/zones")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	var z ZonesResponse
	require.NoError(t, json.Unmarshal([]byte(body), &z))
	assert.Equal(t, 6, z.Nodes)
	assert.Equal(t, uint64(7), z.Version)
	assert.Equal(t, 2.0, z.RefreshSeconds)
	require.Len(t, z.Problems, 1)
	assert.Equal(t, "node-2", z.Problems[0].Name)

	// Polling: unchanged state answers 304.
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	resp, _ = get(t, s.URL+"/api/v1/zones", "If-None-Match", etag)
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	src.version = 8
	resp, _ = get(t, s.URL+"/api/v1/zones", "If-None-Match", etag)
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	resp, body = get(t, s.URL+"/api/v1/matrix?zone=zone-b")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var mx MatrixResponse
	require.NoError(t, json.Unmarshal([]byte(body), &mx))
	require.Len(t, mx.Nodes, 3)
	assert.Equal(t, "node-2", mx.Nodes[0].Name)
	assert.Equal(t, "True", mx.Nodes[0].Condition.Status)
	unreachable := 0
	for _, c := range mx.Cells {
		if c.T == 0 {
			assert.Equal(t, matrix.Unreachable, c.Verdict)
			unreachable++
		}
	}
	assert.Equal(t, 2, unreachable)

	resp, body = get(t, s.URL+"/api/v1/pair?observer=node-1&target=node-2")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var pr PairResponse
	require.NoError(t, json.Unmarshal([]byte(body), &pr))
	require.Len(t, pr.Pairs, 1)
	assert.Len(t, pr.Pairs[0].Status.Probes, 2)
	assert.Len(t, pr.Pairs[0].Status.Outages, 2)

	resp, body = get(t, s.URL+"/api/v1/node/node-2")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var why WhyResponse
	require.NoError(t, json.Unmarshal([]byte(body), &why))
	assert.Equal(t, matrix.Unreachable, why.Verdict)
	assert.Len(t, why.Failing, 5)
	assert.Contains(t, why.Lines[1], "UnreachableFromPeers")

	resp, body = get(t, s.URL+"/api/v1/target/netpulse/netpulse-agent-2")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, _ = get(t, s.URL+"/api/v1/target/netpulse/nobody")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = get(t, s.URL+"/api/v1/node/nobody")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	resp, body = get(t, s.URL+"/api/v1/top?n=3")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var top TopResponse
	require.NoError(t, json.Unmarshal([]byte(body), &top))
	require.Len(t, top.Pairs, 3)
	assert.Equal(t, 1.0, top.Pairs[0].Loss)
	resp, _ = get(t, s.URL+"/api/v1/top?n=0")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = get(t, s.URL+"/api/v1/pair?observer=node-1")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = get(t, s.URL+"/api/v1/nothing")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestPageAndAssets(t *testing.T) {
	s := serve(t, &fixed{m: model(matrixtest.Options{}), synced: true}, HandlerOptions{})
	for path, ct := range map[string]string{"/": "text/html", "/app.js": "javascript", "/style.css": "text/css"} {
		resp, body := get(t, s.URL+path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("Content-Type"), ct, path)
		assert.NotEmpty(t, body)
		resp, _ = get(t, s.URL+path, "If-None-Match", resp.Header.Get("ETag"))
		assert.Equal(t, http.StatusNotModified, resp.StatusCode, path)
	}
	_, body := get(t, s.URL+"/")
	// Offline: nothing is loaded from anywhere but this server.
	for _, bad := range []string{"http://", "https://", "//cdn"} {
		assert.NotContains(t, body, bad)
	}
	resp, _ := get(t, s.URL+"/../etc/passwd")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestReadOnly(t *testing.T) {
	s := serve(t, &fixed{m: model(matrixtest.Options{}), synced: true}, HandlerOptions{})
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, err := http.NewRequest(m, s.URL+"/api/v1/zones", strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, m)
	}
}

func TestNotSyncedAndTooLarge(t *testing.T) {
	src := &fixed{}
	s := serve(t, src, HandlerOptions{MaxMatrixNodes: 5})
	resp, body := get(t, s.URL+"/api/v1/zones")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "waiting for the first LIST")
	src.m, src.synced = model(matrixtest.Options{Nodes: 8, Zones: 2}), true
	resp, body = get(t, s.URL+"/api/v1/matrix")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, body, "8 nodes selected, at most 5")
	resp, _ = get(t, s.URL+"/api/v1/matrix?zone=zone-a")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, body = get(t, s.URL+"/api/v1/matrix?from=zone-a&to=zone-b")
	require.Equal(t, http.StatusOK, resp.StatusCode, "4 x 4 fits where 8 x 8 does not")
	var mx MatrixResponse
	require.NoError(t, json.Unmarshal([]byte(body), &mx))
	assert.Len(t, mx.Nodes, 4)
	assert.Len(t, mx.Targets, 4)
}
