// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/extension/netpulseviewextension"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/viewserver"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// testStatus: `kubectl netpulse status` on a real API server reads each writer's
// NetworkHealthSummary and the Lease beside it: a summary judged an hour ago whose writer
// renews its Lease is current; one whose Lease another replica took over is not, and says
// why.
func testStatus(t *testing.T, kubeconfig string, cp *kubetest.ControlPlane) {
	ctx := context.Background()
	kube, err := cp.Clientset()
	require.NoError(t, err)
	nc, err := versioned.NewForConfig(cp.Config)
	require.NoError(t, err)
	const ns = "netpulse-status"
	require.NoError(t, kubetest.EnsureNamespace(ctx, kube, ns))
	now := time.Now()
	for i, w := range []struct{ lease, writer, holder string }{{"netpulse-gateway-0", "gw-a", "gw-a"}, {"netpulse-gateway-1", "gw-b", "gw-c"}} {
		_, err := kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: w.lease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(w.holder), LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime: &metav1.MicroTime{Time: now}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		s, err := nc.NetpulseV1alpha1().NetworkHealthSummaries(ns).Create(ctx, &v1alpha1.NetworkHealthSummary{ObjectMeta: metav1.ObjectMeta{Name: w.lease}}, metav1.CreateOptions{})
		require.NoError(t, err)
		s.Status = v1alpha1.NetworkHealthSummaryStatus{LeaseName: w.lease, Writer: w.writer, Shard: int32(i), Shards: 2,
			LastJudgedTime: &metav1.Time{Time: now.Add(-time.Hour)}, Targets: 6, ReachableTargets: 5, UnreachableTargets: 1,
			UnreachableNodes: []string{"node-5"}, UnreachableNodeCount: 1, Observers: 12,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonVerdictsWritten,
				Message: "every verdict of 6 targets is written", LastTransitionTime: metav1.Now()}}}
		_, err = nc.NetpulseV1alpha1().NetworkHealthSummaries(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	out, err := run(t, kubeconfig, "status", "-n", ns)
	require.NoError(t, err)
	t.Log("\n" + out)
	assert.Regexp(t, `netpulse-status/netpulse-gateway-0\s+0/2\s+6\s+1\s+0\s+0\s+12 \(0 silent\)\s+True\s+yes`, out)
	assert.Regexp(t, `netpulse-status/netpulse-gateway-1\s+1/2\s+6\s+1\s+0\s+0\s+12 \(0 silent\)\s+True\s+NO`, out)
	assert.Regexp(t, `netpulse-status/netpulse-gateway-0: Lease renewed \d+s ago by gw-a`, out)
	assert.Contains(t, out, "netpulse-status/netpulse-gateway-1: Lease held by gw-c, not by gw-b that wrote this")
	assert.Contains(t, out, "netpulse-status/netpulse-gateway-0: Unreachable targets on node-5")

	out, err = run(t, kubeconfig, "status", "-n", "default")
	require.NoError(t, err)
	assert.Equal(t, "no NetworkHealthSummary in namespace default: no gateway writer, or one older than it\n", out)

	testLeaseKeepsObjectsCurrent(t, kubeconfig, cp, ns)
}

// testLeaseKeepsObjectsCurrent: kubectl netpulse and the view read an object of shard 0 of 2
// as current an hour past its freshUntil while that shard's Lease (in the summaries'
// namespace, not the objects') is renewed, and Unknown / StatusStale once it is not.
func testLeaseKeepsObjectsCurrent(t *testing.T, kubeconfig string, cp *kubetest.ControlPlane, leaseNS string) {
	ctx := context.Background()
	view := startGatewayView(t, cp, leaseNS)
	kube, err := cp.Clientset()
	require.NoError(t, err)
	nc, err := versioned.NewForConfig(cp.Config)
	require.NoError(t, err)
	const name = "netpulse-agent-1-to-netpulse-agent-2"
	obj, err := nc.NetpulseV1alpha1().PodNetworkHealths("netpulse").Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	before := obj.DeepCopy()
	obj.Labels[v1alpha1.LabelShard] = "0-of-2"
	obj, err = nc.NetpulseV1alpha1().PodNetworkHealths("netpulse").Update(ctx, obj, metav1.UpdateOptions{})
	require.NoError(t, err)
	obj.Status.FreshUntil = &metav1.Time{Time: time.Now().Add(-time.Hour).Truncate(time.Second)}
	_, err = nc.NetpulseV1alpha1().PodNetworkHealths("netpulse").UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		cur, err := nc.NetpulseV1alpha1().PodNetworkHealths("netpulse").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return
		}
		cur.Labels, cur.Status = before.Labels, before.Status
		if cur, err = nc.NetpulseV1alpha1().PodNetworkHealths("netpulse").Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
			cur.Status = before.Status
			_, _ = nc.NetpulseV1alpha1().PodNetworkHealths("netpulse").UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		}
	})
	renew := func(at time.Time) {
		l, err := kube.CoordinationV1().Leases(leaseNS).Get(ctx, "netpulse-gateway-0", metav1.GetOptions{})
		require.NoError(t, err)
		l.Spec.RenewTime = &metav1.MicroTime{Time: at}
		_, err = kube.CoordinationV1().Leases(leaseNS).Update(ctx, l, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	row := `node-1\s+netpulse/netpulse-agent-1\s+netpulse/netpulse-agent-2\s+`

	renew(time.Now())
	out, err := run(t, kubeconfig, "why", "pod/netpulse-agent-2", "-n", "netpulse")
	require.NoError(t, err)
	t.Log("\n" + out)
	assert.Regexp(t, row+`Reachable\s`, out, "an hour past freshUntil, its shard's Lease renewed: current")
	p := awaitViewPair(t, view, name, func(p matrix.PairDetail) bool { return p.Verdict == matrix.Reachable })
	assert.Equal(t, leaseNS+"/netpulse-gateway-0", p.Writer, "the view names the Lease that keeps it current")

	renew(time.Now().Add(-time.Hour))
	out, err = run(t, kubeconfig, "why", "pod/netpulse-agent-2", "-n", "netpulse")
	require.NoError(t, err)
	t.Log("\n" + out)
	assert.Regexp(t, row+`Unknown\s.*StatusStale`, out, "its shard's Lease not renewed for an hour: stale")
	p = awaitViewPair(t, view, name, func(p matrix.PairDetail) bool { return p.Reason == matrix.ReasonStatusStale })
	assert.Equal(t, matrix.Unknown, p.Verdict)
	assert.Contains(t, p.Message, "its writer's Lease last renewed 60m ago")
}

// startGatewayView runs the netpulse_view extension as a gateway in namespace ns runs it
// (POD_NAMESPACE=ns: it watches the summaries there, beside the Leases; no live cells) and
// returns its address.
func startGatewayView(t *testing.T, cp *kubetest.ControlPlane, ns string) string {
	t.Setenv("POD_NAMESPACE", ns)
	ctx := context.Background()
	cfg := netpulseviewextension.NewFactory().CreateDefaultConfig().(*netpulseviewextension.Config)
	cfg.NetAddr.Endpoint = freeAddr(t)
	cfg.AuthType, cfg.Kubeconfig = kubeclient.AuthKubeConfig, cp.Kubeconfig
	cfg.Live.Enabled = false
	ext, err := netpulseviewextension.NewFactory().Create(ctx, extensiontest.NewNopSettings(component.MustNewType("netpulse_view")), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return "http://" + cfg.NetAddr.Endpoint
}

// awaitViewPair polls the view's drill-down of node-1 -> node-2 until the named object
// reads as want says: within 15 s, the view reading the writers' Leases every 5 s.
func awaitViewPair(t *testing.T, base, name string, want func(matrix.PairDetail) bool) matrix.PairDetail {
	t.Helper()
	var last matrix.PairDetail
	deadline := time.Now().Add(15 * time.Second)
	for {
		var pr viewserver.PairResponse
		getJSON(t, base+"/api/v1/pair?observer=node-1&target=node-2", &pr)
		for _, p := range pr.Pairs {
			if p.Name == name {
				if last = p; want(p) {
					return p
				}
			}
		}
		require.True(t, time.Now().Before(deadline), "the view's %s after 15s: %s %s (%s) writer %q", name, last.Verdict, last.Reason, last.Message, last.Writer)
		time.Sleep(100 * time.Millisecond)
	}
}
