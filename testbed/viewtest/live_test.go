// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewtest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	corev1 "k8s.io/api/core/v1"

	"github.com/netpulse/netpulse/extension/netpulseviewextension"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/livematrix"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
	"github.com/netpulse/netpulse/internal/planner"
	"github.com/netpulse/netpulse/internal/viewserver"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// LiveScreenshotEnv, when set, is where TestLiveMatrix saves the page's screenshot (the
// committed docs/images/matrix-live.png is made with
// NETPULSE_VIEW_LIVE_SCREENSHOT=$PWD/docs/images/matrix-live.png).
const LiveScreenshotEnv = "NETPULSE_VIEW_LIVE_SCREENSHOT"

// The sampled cluster: 16 nodes in 4 zones, each agent with 1 stable peer (16 objects) and
// K = 2 rotating targets a round, as the planner deals them; node-6 partitioned.
const (
	liveNodes       = 16
	livePartitioned = "node-6"
	liveK           = 2
	liveInterval    = 10 * time.Second
)

// TestLiveMatrix: a 16-node sampled cluster's objects cover 16 of its 240 cells; after one
// rotation of the planner (internal/planner: every agent has probed every other once),
// the newest results the gateway received fill every other cell, and the page shows them
// as observations with their age, distinct from the objects' verdicts.
func TestLiveMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a local control plane (testbed/kubetest); make test runs it")
	}
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	ctx := context.Background()
	require.NoError(t, kubetest.Apply(ctx, cp.Config, kubetest.DeployPath("crds")))
	now := time.Now().UTC().Truncate(time.Second)
	fx := matrixtest.Cluster(matrixtest.Options{Nodes: liveNodes, Zones: 4, Stable: 1, Partitioned: livePartitioned, Now: now})
	require.NoError(t, Seed(ctx, cp.Config, fx))

	cfg := netpulseviewextension.NewFactory().CreateDefaultConfig().(*netpulseviewextension.Config)
	cfg.NetAddr.Endpoint = freeAddr(t)
	cfg.AuthType, cfg.Kubeconfig = kubeclient.AuthKubeConfig, cp.Kubeconfig
	ext, err := netpulseviewextension.NewFactory().Create(ctx, extensiontest.NewNopSettings(component.MustNewType("netpulse_view")), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	base := "http://" + cfg.NetAddr.Endpoint

	// What the pod_network_health exporter does in the same collector (its own tests show
	// it records every accepted observation): it feeds the store the view attached, and
	// says it runs and holds the writer Lease.
	hub := livematrix.Default
	store := hub.Store()
	require.NotNil(t, store, "the view attached the live matrix")
	t.Cleanup(hub.Produce())
	unlead := hub.Lead()
	t.Cleanup(unlead)

	var mx viewserver.MatrixResponse
	getJSON(t, base+"/api/v1/matrix", &mx)
	objectCells := len(mx.Cells)
	assert.Equal(t, 0, mx.LiveCells)
	assert.Equal(t, livematrix.StateLive, mx.Live.State)

	// One rotation of the real planner, ending now: each agent's round, its targets, and
	// each probe's outcome (nothing reaches node-6's agent, and it reaches nobody).
	zone := map[string]string{}
	for _, n := range fx.Nodes {
		zone[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	var members []planner.Member
	for _, p := range fx.Pods {
		members = append(members, planner.Member{ID: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName, Zone: zone[p.Spec.NodeName]})
	}
	plan, err := planner.New(members, planner.Config{K: liveK, Stable: 1, BaseInterval: liveInterval})
	require.NoError(t, err)
	period := plan.RoundsToFullCoverage()
	last := plan.Round(time.Now()) - 1
	probed := map[[2]string]bool{}
	for r := last - uint64(period) + 1; r <= last; r++ {
		for _, m := range members {
			stable := map[string]bool{}
			for _, s := range plan.StableTargets(m.ID) {
				stable[s.ID] = true
			}
			at := time.Unix(0, int64(r)*int64(plan.Interval())).Add(plan.Jitter(m.ID))
			var samples []livematrix.Sample
			for _, tg := range plan.Targets(m.ID, r) {
				ok := m.Node != livePartitioned && tg.Node != livePartitioned
				rtt := 300 * time.Microsecond
				if zone[m.Node] != zone[tg.Node] {
					rtt = 1200 * time.Microsecond
				}
				if !ok {
					rtt = 0
				}
				samples = append(samples, livematrix.Sample{Observer: m.Node, Target: tg.Node, At: at, Probe: "icmp", OK: ok, RTT: rtt, Stable: stable[tg.ID]})
				probed[[2]string{m.Node, tg.Node}] = true
			}
			store.Record(at.Add(time.Second), samples...)
		}
	}
	t.Logf("one rotation: %d rounds of %s, %d nodes x (1 stable + %d rotating) probes: %d distinct pairs probed",
		period, plan.Interval(), liveNodes, liveK, len(probed))
	require.Len(t, probed, liveNodes*(liveNodes-1), "the planner covers every pair in one rotation")

	getJSON(t, base+"/api/v1/matrix", &mx)
	require.Len(t, mx.Nodes, liveNodes)
	assert.Len(t, mx.Cells, liveNodes*(liveNodes-1), "dense: every off-diagonal cell is filled")
	assert.Equal(t, liveNodes*(liveNodes-1)-objectCells, mx.LiveCells, "the cells without an object are the live ones")
	t.Logf("after one rotation: %d cells, %d with objects, %d live only", len(mx.Cells), objectCells, mx.LiveCells)
	for _, c := range mx.Cells {
		o, tg := mx.Nodes[c.O].Name, mx.Nodes[c.T].Name
		require.NotNil(t, c.Live, "%s -> %s", o, tg)
		assert.Equal(t, o != livePartitioned && tg != livePartitioned, c.Live.Reachable, "%s -> %s", o, tg)
		assert.LessOrEqual(t, c.Live.AgeSeconds, (time.Duration(period+1) * plan.Interval()).Seconds())
		if c.Pairs == 0 {
			assert.Equal(t, matrix.None, c.Verdict, "a live cell is no verdict")
		}
	}
	var liveOnly matrix.MatrixCell
	for _, c := range mx.Cells {
		if c.Pairs == 0 && c.Live.Reachable {
			liveOnly = c
			break
		}
	}
	pairRoute := mx.Nodes[liveOnly.O].Name + "," + mx.Nodes[liveOnly.T].Name

	t.Run("chromium", func(t *testing.T) {
		shot := os.Getenv(LiveScreenshotEnv)
		if shot == "" {
			shot = filepath.Join(t.TempDir(), "matrix-live.png")
		}
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		dom, err := RenderPage(rctx, base+"/#pair="+pairRoute, shot)
		require.NoError(t, err)
		assert.Contains(t, dom, `data-state="ready"`)
		assert.Contains(t, dom, `data-live="live"`)
		// Every cell without an object shows its live result; none is empty.
		live := regexp.MustCompile(`<td class="live live-(ok|fail)[^"]*" data-o="[^"]+" data-t="[^"]+" data-live="(reachable|unreachable)" data-age="\d+"`).FindAllString(dom, -1)
		assert.Len(t, live, mx.LiveCells)
		assert.NotRegexp(t, `<td class="none`, dom, "no empty cell after one rotation")
		assert.Regexp(t, `<td class="live live-fail[^"]*" data-o="node-2" data-t="node-6" data-live="unreachable"`, dom)
		assert.Regexp(t, `<td[^>]*data-v="Unreachable"`, dom, "objects keep their verdicts")
		// The pair panel of a live-only cell: the observation and its age, no verdict.
		assert.Contains(t, dom, `id="live-detail" data-live="reachable"`)
		assert.Contains(t, dom, "No object: this pair is not probed as a stable pair")
		assert.Regexp(t, `observed \d+s ago`, dom)
		assert.Contains(t, dom, "live: "+itoa(store.Stats().Cells)+" cells from 16 observers")
		st, err := os.Stat(shot)
		require.NoError(t, err)
		assert.Greater(t, st.Size(), int64(10_000))
		t.Logf("screenshot %s", shot)
	})

	t.Run("standby", func(t *testing.T) {
		unlead() // the replica lost the Lease: its cells are no longer the cluster's
		getJSON(t, base+"/api/v1/matrix", &mx)
		assert.Equal(t, livematrix.StateStandby, mx.Live.State)
		assert.Equal(t, 0, mx.LiveCells)
		assert.Len(t, mx.Cells, objectCells)
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		dom, err := RenderPage(rctx, base+"/#matrix", "")
		require.NoError(t, err)
		assert.Contains(t, dom, "no live data: this gateway replica is a standby")
		assert.NotContains(t, dom, `data-live="reachable"`)
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
