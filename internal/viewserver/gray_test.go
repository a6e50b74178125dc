// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewserver

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

// The JSON the page colours and explains gray cells by, and the page's legend and colours
// for them (the rendering itself: testbed/viewtest).
func TestGrayCellsInTheAPIAndThePage(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 4, Stable: 3, Now: now})
	msg := "packet loss at the target's node node-3: 5.2 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, lost from 3 observer nodes"
	for _, i := range []int{1, 2, 4} {
		matrixtest.Degrade(f.Find(i, 3), v1alpha1.ReasonPacketLoss, msg, now.Add(-time.Minute))
	}
	matrixtest.Degrade(f.Find(4, 1), v1alpha1.ReasonHighLatency,
		"high latency at the observer's own node node-4: 85 % of its recent rounds are slow against their targets' baselines", now.Add(-time.Minute))
	in := matrix.Input{Objects: f.Objects, Now: now}
	for _, n := range f.Nodes {
		in.Nodes = append(in.Nodes, matrix.NodeFrom(n, ""))
	}
	s := serve(t, &fixed{m: matrix.Build(in), synced: true}, HandlerOptions{})

	resp, body := get(t, s.URL+"/api/v1/matrix")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Contains(t, body, `"v":"Degraded","p50":`)
	assert.Contains(t, body, `"dr":["PacketLoss"]`)
	assert.Contains(t, body, `"dr":["HighLatency"]`)
	_, body = get(t, s.URL+"/api/v1/zones")
	assert.Contains(t, body, `"degraded":["PacketLoss","HighLatency"]`)
	_, body = get(t, s.URL+"/api/v1/pair?observer=node-1&target=node-3")
	assert.Contains(t, body, `"degradedReason":"PacketLoss"`)
	assert.Contains(t, body, `"gray":{"reason":"PacketLoss","side":"target","node":"node-3","figures":"5.2 % (95 % CI 3.1-8.0 %)`)
	_, body = get(t, s.URL+"/api/v1/node/node-3")
	assert.Contains(t, body, `"gray":[{"reason":"PacketLoss","side":"target","direction":"towards","blamed":true`)
	assert.Contains(t, body, "gray verdict: it is blamed for PacketLoss (packet loss) on its targets' side")
	_, body = get(t, s.URL+"/api/v1/node/node-4")
	assert.Contains(t, body, `"observedGray":[{`)

	_, page := get(t, s.URL+"/")
	assert.Contains(t, page, `<span class="key v-Degraded g-PacketLoss">~</span>Degraded: packet loss`)
	assert.Contains(t, page, `<span class="key v-Degraded g-HighLatency">~</span>Degraded: high latency`)
	_, css := get(t, s.URL+"/style.css")
	assert.Contains(t, css, ".v-Degraded.g-PacketLoss { background: var(--gray-loss); }")
	assert.Contains(t, css, ".v-Degraded.g-HighLatency { background: var(--gray-latency); }")
	_, js := get(t, s.URL+"/app.js")
	assert.Contains(t, js, `if (v === "Degraded" && GRAY[r]) c += " g-" + r;`)
}

// A lossy link between zones: the cells across it carry the zone pair (zl, zoneLoss) the
// page names on hover, the pairs their side, and the zone's explanation the figures.
func TestZoneLinkLossInTheAPIAndThePage(t *testing.T) {
	f := matrixtest.Cluster(matrixtest.Options{Nodes: 4, Zones: 2, Stable: 3, Now: now})
	msg := "packet loss between zones zone-a and zone-b: 5.2 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, from 2 observer nodes in zone-a towards 2 target nodes in zone-b"
	for _, i := range []int{1, 3} {
		for _, j := range []int{2, 4} {
			matrixtest.Degrade(f.Find(i, j), v1alpha1.ReasonPacketLoss, msg, now.Add(-time.Minute))
		}
	}
	in := matrix.Input{Objects: f.Objects, Now: now}
	for _, n := range f.Nodes {
		in.Nodes = append(in.Nodes, matrix.NodeFrom(n, ""))
	}
	s := serve(t, &fixed{m: matrix.Build(in), synced: true}, HandlerOptions{})

	resp, body := get(t, s.URL+"/api/v1/matrix")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Contains(t, body, `"dr":["PacketLoss"],"zl":{"from":"zone-a","to":"zone-b"}`)
	_, body = get(t, s.URL+"/api/v1/zones")
	assert.Contains(t, body, `"degraded":["PacketLoss"],"zoneLoss":{"from":"zone-a","to":"zone-b"}`)
	_, body = get(t, s.URL+"/api/v1/pair?observer=node-1&target=node-2")
	assert.Contains(t, body, `"gray":{"reason":"PacketLoss","side":"zone","fromZone":"zone-a","toZone":"zone-b","figures":"5.2 %`)
	_, body = get(t, s.URL+"/api/v1/node/node-2")
	assert.Contains(t, body, "gray verdict: it is not blamed: packet loss between zones zone-a and zone-b")
	_, js := get(t, s.URL+"/app.js")
	assert.Contains(t, js, `if (g.side === "zone") return g.reason + " between zones " + g.fromZone + " and " + g.toZone;`)
	assert.Contains(t, js, `degradedText(cell.dr, cell.zl)`)
	assert.Contains(t, js, `degradedText(c.degraded, c.zoneLoss)`)
	assert.Contains(t, js, `(zp.degradedMessage ? "\nDegraded " + zp.degradedReason + ": " + zp.degradedMessage : "")`)
}
