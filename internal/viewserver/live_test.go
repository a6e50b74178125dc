// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewserver

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/livematrix"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

// liveFixture: 6 nodes, 1 stable peer each (6 object cells); the gateway's store holds
// node-1's results towards every other node (node-1 -> node-2 has an object too), node-3's
// towards node-6 failing; hub says whether it leads.
func liveFixture(t *testing.T, lead bool) (*fixed, livematrix.Reader, *livematrix.Store) {
	t.Helper()
	src := &fixed{m: model(matrixtest.Options{Nodes: 6, Zones: 2, Stable: 1, Now: now}), version: 3, synced: true}
	h := &livematrix.Hub{}
	store, detach := h.Attach(livematrix.Config{})
	t.Cleanup(detach)
	t.Cleanup(h.Produce())
	if lead {
		t.Cleanup(h.Lead())
	}
	at := now.Add(-4 * time.Second)
	for _, tg := range []string{"node-2", "node-3", "node-4", "node-5", "node-6"} {
		store.Record(now, livematrix.Sample{Observer: "node-1", Target: tg, At: at, Probe: "icmp", OK: true, RTT: 800 * time.Microsecond, Stable: tg == "node-2"})
	}
	store.Record(now, livematrix.Sample{Observer: "node-3", Target: "node-6", At: at, Probe: "icmp", OK: false})
	return src, h.Reader(store), store
}

func TestMatrixLiveCells(t *testing.T) {
	src, live, store := liveFixture(t, true)
	s := serve(t, src, HandlerOptions{Live: live})

	var mx MatrixResponse
	resp, body := get(t, s.URL+"/api/v1/matrix")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &mx))
	assert.Equal(t, livematrix.StateLive, mx.Live.State)
	assert.Equal(t, 6, mx.Live.Cells)
	name := func(i int) string { return mx.Nodes[i].Name }
	cells := map[string]matrix.MatrixCell{}
	for _, c := range mx.Cells {
		cells[name(c.O)+">"+name(c.T)] = c
	}
	// node-1 -> node-2: the object's verdict, and the live result beside it.
	c := cells["node-1>node-2"]
	assert.Equal(t, matrix.Reachable, c.Verdict)
	assert.Equal(t, 1, c.Pairs)
	require.NotNil(t, c.Live)
	assert.True(t, c.Live.Stable)
	// node-1 -> node-4: no object, the live result only: not a verdict.
	c = cells["node-1>node-4"]
	assert.Equal(t, matrix.None, c.Verdict)
	assert.Equal(t, 0, c.Pairs)
	require.NotNil(t, c.Live)
	assert.Equal(t, livematrix.Result{Target: "node-4", At: now.Add(-4 * time.Second), AgeSeconds: 4, Reachable: true, OK: []string{"icmp"}, P50: "800µs"}, *c.Live)
	c = cells["node-3>node-6"]
	require.NotNil(t, c.Live)
	assert.False(t, c.Live.Reachable)
	assert.Equal(t, []string{"icmp"}, c.Live.Failed)
	// 6 object cells; node-1's 4 cells without an object and node-3 -> node-6 are added.
	assert.Equal(t, 5, mx.LiveCells)
	assert.Len(t, mx.Cells, 11)

	// A cross matrix places them by its target axis.
	getJSONInto(t, s.URL+"/api/v1/matrix?from=zone-a&to=zone-b", &mx)
	found := false
	for _, c := range mx.Cells {
		if mx.Nodes[c.O].Name == "node-1" && mx.Targets[c.T].Name == "node-4" {
			found = c.Live != nil && c.Verdict == matrix.None
		}
	}
	assert.True(t, found, "%+v", mx.Cells)

	// The pair drill-down carries the cell's live result.
	var pr PairResponse
	getJSONInto(t, s.URL+"/api/v1/pair?observer=node-1&target=node-5", &pr)
	assert.Empty(t, pr.Pairs)
	require.NotNil(t, pr.Live)
	assert.Equal(t, "node-5", pr.Live.Target)
	assert.Equal(t, livematrix.StateLive, pr.LiveStatus.State)

	// A new result changes the ETag of an unchanged object state: the page redraws.
	resp, _ = get(t, s.URL+"/api/v1/zones")
	etag := resp.Header.Get("ETag")
	resp, _ = get(t, s.URL+"/api/v1/zones", "If-None-Match", etag)
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	store.Record(now, livematrix.Sample{Observer: "node-2", Target: "node-5", At: now, Probe: "tcp", OK: true})
	resp, body = get(t, s.URL+"/api/v1/zones", "If-None-Match", etag)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	var z ZonesResponse
	require.NoError(t, json.Unmarshal([]byte(body), &z))
	assert.Equal(t, 7, z.Live.Cells)
}

// A standby replica holds what reached it, but those are not the cluster's: no live cell,
// and the answer says why.
func TestMatrixLiveStandby(t *testing.T) {
	src, live, _ := liveFixture(t, false)
	s := serve(t, src, HandlerOptions{Live: live})
	var mx MatrixResponse
	getJSONInto(t, s.URL+"/api/v1/matrix", &mx)
	assert.Equal(t, livematrix.StateStandby, mx.Live.State)
	assert.Contains(t, mx.Live.Message, "standby")
	assert.Equal(t, 0, mx.LiveCells)
	for _, c := range mx.Cells {
		assert.Nil(t, c.Live)
	}
	var pr PairResponse
	getJSONInto(t, s.URL+"/api/v1/pair?observer=node-1&target=node-5", &pr)
	assert.Nil(t, pr.Live)
}

// Without a live source (kubectl netpulse serve) the answers say objects only.
func TestMatrixNoLiveSource(t *testing.T) {
	src, _, _ := liveFixture(t, true)
	s := serve(t, src, HandlerOptions{NoLive: "workstation: objects only"})
	var z ZonesResponse
	getJSONInto(t, s.URL+"/api/v1/zones", &z)
	assert.Equal(t, livematrix.Status{State: livematrix.StateUnavailable, Message: "workstation: objects only"}, z.Live)
	var mx MatrixResponse
	getJSONInto(t, s.URL+"/api/v1/matrix", &mx)
	assert.Equal(t, 0, mx.LiveCells)
	assert.Len(t, mx.Cells, 6)
}

func getJSONInto(t *testing.T, url string, into any) {
	t.Helper()
	resp, body := get(t, url)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), into))
}
