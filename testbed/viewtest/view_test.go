// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/cmd/kubectl-netpulse/plugin"
	"github.com/netpulse/netpulse/extension/netpulseviewextension"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
	"github.com/netpulse/netpulse/internal/viewserver"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// ScreenshotEnv, when set, is where TestView saves the page's screenshot (the committed
// docs/images/matrix.png is made with NETPULSE_VIEW_SCREENSHOT=$PWD/docs/images/matrix.png);
// otherwise it goes to the test's temporary directory.
const ScreenshotEnv = "NETPULSE_VIEW_SCREENSHOT"

// The fixture: 12 nodes in 3 zones, each agent with 3 stable peers (36 objects), node-5
// partitioned (the pairs towards it Unreachable, its condition True; the pairs it
// observes Unknown).
const partitioned = "node-5"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*loggingT).flushDaemon"),
		// client-go's shared HTTP/2 transports keep idle connections to the test API server.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.BackoffUntil"),
	)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// TestView runs everything a user sees against one real API server: the extension's
// JSON API, the kubectl plugin's output, the page in headless Chromium, and a live
// update through the informers.
func TestView(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a local control plane (testbed/kubetest); make test runs it")
	}
	t0 := time.Now()
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	ctx := context.Background()
	require.NoError(t, kubetest.Apply(ctx, cp.Config, kubetest.DeployPath("crds")))
	now := time.Now().UTC().Truncate(time.Second)
	fx := matrixtest.Cluster(matrixtest.Options{Nodes: 12, Zones: 3, Stable: 3, Partitioned: partitioned, Now: now})
	require.NoError(t, Seed(ctx, cp.Config, fx))
	t.Logf("control plane up and %d nodes, %d pods, %d objects written in %s", len(fx.Nodes), len(fx.Pods), len(fx.Objects), time.Since(t0).Round(time.Millisecond))

	// The extension as the gateway runs it (kubeConfig instead of the service account).
	cfg := netpulseviewextension.NewFactory().CreateDefaultConfig().(*netpulseviewextension.Config)
	cfg.NetAddr.Endpoint = freeAddr(t)
	cfg.AuthType, cfg.Kubeconfig = kubeclient.AuthKubeConfig, cp.Kubeconfig
	ext, err := netpulseviewextension.NewFactory().Create(ctx, extensiontest.NewNopSettings(component.MustNewType("netpulse_view")), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	base := "http://" + cfg.NetAddr.Endpoint

	t.Run("json", func(t *testing.T) { testJSON(t, base) })
	t.Run("plugin", func(t *testing.T) { testPlugin(t, cp.Kubeconfig) })
	t.Run("chromium", func(t *testing.T) { testChromium(t, base) })
	t.Run("live", func(t *testing.T) { testLive(t, base, cp) })
	t.Run("zone pairs", func(t *testing.T) { testZonePairs(t, base, cp) })
	t.Run("gray", func(t *testing.T) { testGray(t, base, cp) })
	t.Run("status", func(t *testing.T) { testStatus(t, cp.Kubeconfig, cp) })
}

// testGray: a pair's gray verdict (Degraded PacketLoss, written as the exporter would)
// reaches the page as a cell in the loss colour with its reason, and its drill-down shows
// the reason, the side and the message; `kubectl netpulse why` quotes it.
func testGray(t *testing.T, base string, cp *kubetest.ControlPlane) {
	ctx := context.Background()
	pc, err := versioned.NewForConfig(cp.Config)
	require.NoError(t, err)
	const msg = "packet loss at the target's node node-11: 5.2 % (95 % CI 3.1-8.0 %) of 1440 echoes over 2m0s, lost from 4 observer nodes"
	obj, err := pc.NetpulseV1alpha1().PodNetworkHealths("netpulse").Get(ctx, "netpulse-agent-10-to-netpulse-agent-11", metav1.GetOptions{})
	require.NoError(t, err)
	matrixtest.Degrade(obj, v1alpha1.ReasonPacketLoss, msg, time.Now().Add(-time.Minute).UTC().Truncate(time.Second))
	_, err = pc.NetpulseV1alpha1().PodNetworkHealths("netpulse").UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var mx viewserver.MatrixResponse
		getJSON(t, base+"/api/v1/matrix", &mx)
		for _, c := range mx.Cells {
			if mx.Nodes[c.O].Name == "node-10" && mx.Nodes[c.T].Name == "node-11" {
				return c.Verdict == matrix.Degraded && len(c.Degraded) == 1 && c.Degraded[0] == v1alpha1.ReasonPacketLoss
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond)

	ctx2, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	dom, err := RenderPage(ctx2, base+"/#pair=node-10,node-11", filepath.Join(t.TempDir(), "gray.png"))
	require.NoError(t, err)
	assert.Regexp(t, `<td class="v-Degraded g-PacketLoss[^"]*" data-o="node-10" data-t="node-11" data-v="Degraded" data-degraded="PacketLoss"`, dom)
	assert.Contains(t, dom, `<span class="key v-Degraded g-PacketLoss">~</span>Degraded: packet loss`)
	assert.Contains(t, dom, "Degraded: PacketLoss at the target's node node-11")
	assert.Contains(t, dom, msg)

	out, err := run(t, cp.Kubeconfig, "why", "node-11")
	require.NoError(t, err)
	t.Log("\n" + out)
	assert.Contains(t, out, "gray verdict: it is blamed for PacketLoss (packet loss) on its targets' side")
	assert.Contains(t, out, "worst (netpulse/netpulse-agent-10-to-netpulse-agent-11): "+msg)
	out, err = run(t, cp.Kubeconfig, "why", "node-10,node-11")
	require.NoError(t, err)
	assert.Contains(t, out, "degraded: PacketLoss at the target's node node-11 since ")
}

// getJSON polls url until it answers 200 (the informers list first), then decodes it.
func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			require.NoError(t, json.Unmarshal(body, into), string(body))
			return
		}
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s: %s", url, body)
		require.True(t, time.Now().Before(deadline), "%s: still 503 after 30s: %s", url, body)
		time.Sleep(100 * time.Millisecond)
	}
}

func testJSON(t *testing.T, base string) {
	var z viewserver.ZonesResponse
	getJSON(t, base+"/api/v1/zones", &z)
	assert.Equal(t, 12, z.Nodes)
	assert.Equal(t, 36, z.Pairs) // 3 stable pairs per agent
	assert.Equal(t, 0, z.Unplaced)
	assert.Equal(t, matrix.Counts{matrix.Reachable: 30, matrix.Unreachable: 3, matrix.Unknown: 3}, z.Counts)
	require.Len(t, z.Zones, 3)
	require.Len(t, z.Problems, 1)
	assert.Equal(t, partitioned, z.Problems[0].Name)
	assert.Equal(t, "True", z.Problems[0].Condition.Status)
	assert.Equal(t, "UnreachableFromPeers", z.Problems[0].Condition.Reason)

	var mx viewserver.MatrixResponse
	getJSON(t, base+"/api/v1/matrix?zone=zone-b", &mx) // node-2, node-5, node-8, node-11
	require.Len(t, mx.Nodes, 4)
	idx := map[string]int{}
	for i, n := range mx.Nodes {
		idx[n.Name] = i
	}
	verdicts := map[string]matrix.Verdict{}
	for _, c := range mx.Cells {
		verdicts[mx.Nodes[c.O].Name+">"+mx.Nodes[c.T].Name] = c.Verdict
	}
	assert.Equal(t, matrix.Unreachable, verdicts["node-2>node-5"])
	assert.Equal(t, matrix.Unknown, verdicts["node-5>node-8"])
	assert.Equal(t, matrix.Reachable, verdicts["node-8>node-11"])
	_, probed := verdicts["node-2>node-11"]
	assert.False(t, probed, "not a stable pair: no cell")

	var pr viewserver.PairResponse
	getJSON(t, base+"/api/v1/pair?observer=node-4&target=node-5", &pr)
	require.Len(t, pr.Pairs, 1)
	p := pr.Pairs[0]
	assert.Equal(t, "netpulse-agent-4-to-netpulse-agent-5", p.Name)
	assert.Equal(t, matrix.Unreachable, p.Verdict)
	assert.Len(t, p.Status.Probes, 2)
	assert.Len(t, p.Status.Outages, 2)
	assert.Nil(t, p.Status.Outages[0].End, "ongoing")
	// What the pair detail shows besides the verdict: since when it holds, and until when
	// the unchanged status is current (status.freshUntil).
	assert.False(t, p.VerdictSince.IsZero())
	assert.True(t, p.FreshUntil.After(p.LastObserved))

	var why viewserver.WhyResponse
	getJSON(t, base+"/api/v1/node/"+partitioned, &why)
	assert.Equal(t, matrix.Unreachable, why.Verdict)
	assert.Equal(t, []string{"node-2", "node-3", "node-4"}, why.Failing)
	assert.Contains(t, strings.Join(why.Lines, "\n"), "node condition netpulse.io/PodNetworkProblem=True (UnreachableFromPeers)")
	getJSON(t, base+"/api/v1/target/netpulse/netpulse-agent-5", &why)
	assert.Equal(t, "node-5", why.Node)
	assert.Equal(t, matrix.Unreachable, why.Verdict)

	var top viewserver.TopResponse
	getJSON(t, base+"/api/v1/top?n=5", &top)
	require.Len(t, top.Pairs, 5)
	assert.Equal(t, 1.0, top.Pairs[0].Loss)
}

// run runs `kubectl netpulse args...` in process with a kubeconfig for the test API server.
func run(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := plugin.NewCommand(plugin.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := cmd.Execute()
	return out.String(), err
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

func testPlugin(t *testing.T, kubeconfig string) {
	out, err := run(t, kubeconfig, "matrix")
	require.NoError(t, err)
	t.Log("\n" + out)
	assert.NotRegexp(t, ansi, out, "no colour when stdout is not a terminal")
	assert.Contains(t, out, "netpulse: 12 nodes in 3 zones, 36 pairs (3 Unreachable, 3 Unknown, 30 Reachable)")
	// Cells of a row: the glyphs after the COND column (and a trailing reason).
	cells := func(node string) string {
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			for i := range f {
				if f[i] == node && i+2 < len(f) {
					return strings.Join(f[i+2:], " ")
				}
			}
		}
		t.Fatalf("no row for %s in\n%s", node, out)
		return ""
	}
	// Rows and columns: zone-a node-1, 4, 7, 10; zone-b node-2, 5, 8, 11; zone-c node-3, 6, 9, 12.
	assert.Equal(t, ". . ? . . - ? . . ? . . UnreachableFromPeers", cells("node-5"))
	assert.Equal(t, ". - + . . X . . . + . .", cells("node-4"))
	assert.Equal(t, "+ . . . + . . - . . . +", cells("node-11"))
	assert.Regexp(t, `node problems \(1\):\n  node-5 \(zone zone-b\): netpulse.io/PodNetworkProblem=True UnreachableFromPeers for 1m5\ds`, out)

	out, err = run(t, kubeconfig, "matrix", "--color", "always")
	require.NoError(t, err)
	assert.Contains(t, out, "\x1b[1;31mX\x1b[0m", "Unreachable in red")

	out, err = run(t, kubeconfig, "matrix", "--zones")
	require.NoError(t, err)
	t.Log("\n" + out)
	assert.Regexp(t, `zone-a \(4\)\s+\+ \d+\s+X \d+ \(\d X\)`, out)

	out, err = run(t, kubeconfig, "matrix", "--zone", "zone-b")
	require.NoError(t, err)
	assert.Contains(t, out, "node-11")
	assert.NotContains(t, out, "node-1 ")

	out, err = run(t, kubeconfig, "why", partitioned)
	require.NoError(t, err)
	t.Log("\n" + out)
	for _, want := range []string{
		"node node-5 (zone zone-b): Unreachable (every observer that judged it fails) since ",
		"node condition netpulse.io/PodNetworkProblem=True (UnreachableFromPeers)",
		"observer nodes: 3 fail to reach it (node-2, node-3, node-4), 0 reach it, 0 unknown",
		"failing probes: icmp 360/360 lost, last Timeout",
		"as an observer (3 pairs observed from it): 3 Unknown",
		"OBSERVER  SOURCE POD",
		"node-4    netpulse/netpulse-agent-4",
	} {
		assert.Contains(t, out, want)
	}
	out, err = run(t, kubeconfig, "why", "pod/netpulse-agent-5", "-n", "netpulse")
	require.NoError(t, err)
	assert.Contains(t, out, "pod netpulse/netpulse-agent-5 on node node-5 (zone zone-b): Unreachable")
	out, err = run(t, kubeconfig, "why", "netpulse/netpulse-agent-1")
	require.NoError(t, err)
	assert.Contains(t, out, "pod netpulse/netpulse-agent-1 on node node-1 (zone zone-a): Reachable")
	_, err = run(t, kubeconfig, "why", "nobody")
	assert.ErrorContains(t, err, `"nobody": no node of that name, and no PodNetworkHealth object targets a pod of that name`)
	_, err = run(t, kubeconfig, "why", "pod/netpulse-agent-5", "-n", "elsewhere")
	assert.ErrorContains(t, err, "in namespace elsewhere")

	out, err = run(t, kubeconfig, "top", "--limit", "4")
	require.NoError(t, err)
	t.Log("\n" + out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 7) // title, blank, header, 4 pairs
	assert.Regexp(t, `^NAMESPACE\s+NAME\s+OBSERVER\s+TARGET\s+TARGET NODE\s+REACHABLE\s+LOSS\s+RTT P50\s+RTT P99\s+OUTAGE SINCE$`, lines[2])
	for _, l := range lines[3:] {
		assert.Regexp(t, `\s1\s`, l, "loss 1 first")
	}
	assert.Regexp(t, `netpulse-agent-4-to-netpulse-agent-5\s+node-4\s+netpulse/netpulse-agent-5\s+node-5\s+Unreachable\s+1\s`, out)

	_, err = run(t, kubeconfig, "--context", "nope", "matrix")
	assert.ErrorContains(t, err, `context "nope" does not exist`)
}

func testChromium(t *testing.T, base string) {
	shot := os.Getenv(ScreenshotEnv)
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "matrix.png")
	}
	if _, err := Chromium(); err != nil {
		t.Fatal(err) // never pass by skipping: hack/deps.sh installs it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	dom, err := RenderPage(ctx, base+"/#node="+partitioned, shot)
	require.NoError(t, err)
	t.Logf("rendered in %s (DOM %d bytes), screenshot %s", time.Since(t0).Round(time.Millisecond), len(dom), shot)
	assert.Contains(t, dom, `data-state="ready"`, "the page fetched the API and rendered")
	// The partitioned node: in the problem list with its condition, its column judged
	// Unreachable, the observers' cells towards it Unreachable, and the why panel open.
	assert.Contains(t, dom, `data-problem-node="node-5" data-status="True"`)
	assert.Regexp(t, `<th[^>]*data-node="node-5"[^>]*data-condition="True"[^>]*data-target-verdict="Unreachable"`, dom)
	assert.Regexp(t, `<td[^>]*data-o="node-4" data-t="node-5" data-v="Unreachable"`, dom)
	assert.Regexp(t, `<td[^>]*data-o="node-5" data-t="node-8" data-v="Unknown"`, dom)
	assert.Contains(t, dom, "node condition netpulse.io/PodNetworkProblem=True (UnreachableFromPeers)")
	assert.Contains(t, dom, "12 nodes · 36 pairs")
	st, err := os.Stat(shot)
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(10_000), "a real picture, not a blank page")
}

// testLive: a change in the API reaches the view through the watch, without a reload.
func testLive(t *testing.T, base string, cp *kubetest.ControlPlane) {
	pc, err := versioned.NewForConfig(cp.Config)
	require.NoError(t, err)
	ctx := context.Background()
	var before viewserver.ZonesResponse
	getJSON(t, base+"/api/v1/zones", &before)
	obj, err := pc.NetpulseV1alpha1().PodNetworkHealths("netpulse").Get(ctx, "netpulse-agent-8-to-netpulse-agent-9", metav1.GetOptions{})
	require.NoError(t, err)
	obj.Status.Reachability = v1alpha1.Unreachable
	obj.Status.Latency = nil
	obj.Status.LossRatio = "1"
	obj.Status.Conditions[0].Status, obj.Status.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.ReasonProbesFailed
	t0 := time.Now()
	_, err = pc.NetpulseV1alpha1().PodNetworkHealths("netpulse").UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var z viewserver.ZonesResponse
		getJSON(t, base+"/api/v1/zones", &z)
		return z.Counts[matrix.Unreachable] == before.Counts[matrix.Unreachable]+1 && z.Version > before.Version
	}, 10*time.Second, 50*time.Millisecond)
	t.Logf("a status update reached the view in %s", time.Since(t0).Round(time.Millisecond))
	var mx viewserver.MatrixResponse
	getJSON(t, base+"/api/v1/matrix", &mx)
	found := false
	for _, c := range mx.Cells {
		if mx.Nodes[c.O].Name == "node-8" && mx.Nodes[c.T].Name == "node-9" {
			found = true
			assert.Equal(t, matrix.Unreachable, c.Verdict)
		}
	}
	assert.True(t, found, fmt.Sprint(mx.Cells))
}

// testZonePairs: the gateway's zone pair verdicts (ZoneNetworkHealth objects, written here
// as the exporter would) reach the zone x zone summary's cell, `kubectl netpulse matrix
// --zones` (CUT) and `kubectl netpulse why zone/<zone>`.
func testZonePairs(t *testing.T, base string, cp *kubetest.ControlPlane) {
	ctx := context.Background()
	pc, err := versioned.NewForConfig(cp.Config)
	require.NoError(t, err)
	since := metav1.NewTime(time.Now().Add(-3 * time.Minute).UTC().Truncate(time.Second))
	o, err := pc.NetpulseV1alpha1().ZoneNetworkHealths().Create(ctx, &v1alpha1.ZoneNetworkHealth{
		ObjectMeta: metav1.ObjectMeta{Name: "zone-a.zone-c"},
		Spec:       v1alpha1.ZoneNetworkHealthSpec{SourceZone: "zone-a", TargetZone: "zone-c"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	o.Status = v1alpha1.ZoneNetworkHealthStatus{Reachability: v1alpha1.Unreachable, NodePairs: 12, FailingNodePairs: 12,
		FailingObserverNodes: []string{"node-1", "node-4"}, FailingObserverNodeCount: 4, FailingTargetNodes: []string{"node-3", "node-6"}, FailingTargetNodeCount: 4,
		LastFailureTime: &since, Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonZonePairUnreachable, Message: "zone zone-a cannot reach zone zone-c", LastTransitionTime: since}}}
	_, err = pc.NetpulseV1alpha1().ZoneNetworkHealths().UpdateStatus(ctx, o, metav1.UpdateOptions{})
	require.NoError(t, err)

	// The extension's informer delivers it to the summary.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var z viewserver.ZonesResponse
		getJSON(t, base+"/api/v1/zones", &z)
		// The object is created, then its status written: the informer may deliver the
		// first state (no status, Unknown) first.
		found := false
		for _, c := range z.Summary.Cells {
			if c.From == "zone-a" && c.To == "zone-c" && c.ZonePair != nil && c.ZonePair.Verdict == matrix.Unreachable {
				assert.Equal(t, matrix.Unreachable, c.Verdict)
				found = true
			}
		}
		if found {
			break
		}
		require.False(t, time.Now().After(deadline), "the zone pair never reached /api/v1/zones")
		time.Sleep(200 * time.Millisecond)
	}

	out, err := run(t, cp.Kubeconfig, "matrix", "--zones")
	require.NoError(t, err)
	t.Log("\n" + out)
	assert.Regexp(t, `zone-a \(4\).*CUT`, out)
	assert.Contains(t, out, "zone-a -> zone-c: Unreachable (ZonePairUnreachable), 12 of 12 node pairs fail since ")

	out, err = run(t, cp.Kubeconfig, "why", "zone/zone-c")
	require.NoError(t, err)
	t.Log("\n" + out)
	assert.Contains(t, out, "zone zone-c: 4 nodes")
	assert.Contains(t, out, "zone-a → zone-c: Unreachable since ")
	assert.Contains(t, out, "12 of 12 node pairs fail, from 4 observer nodes (node-1, node-4) towards 4 target nodes (node-3, node-6)")
	_, err = run(t, cp.Kubeconfig, "why", "zone/zone-x")
	assert.ErrorContains(t, err, `zone "zone-x": no node is in it, and no ZoneNetworkHealth names it`)
}
