// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

func TestAddressPlan(t *testing.T) {
	require.Equal(t, "198.18.0.11", nodeIPv4(1).String())
	require.Equal(t, "fd00:6e70::11", nodeIPv6(1).String())
	require.Equal(t, nodeIPv4(3), podIPv4(3, 0))
	require.Equal(t, nodeIPv6(3), podIPv6(3, 0))
	require.Equal(t, "198.18.0.51", podIPv4(1, 1).String())
	require.Equal(t, "fd00:6e70::1:11", podIPv6(1, 1).String())
	require.Equal(t, "198.18.0.249", podIPv4(MaxNodes, 5).String())
	require.Equal(t, podIPv4(2, 1), podIPv4(2, 6), "generations cycle through five blocks")

	// Every (node, generation) address is distinct, inside the plan, and not the host's.
	seen := map[netip.Addr]bool{}
	for i := 1; i <= MaxNodes; i++ {
		for gen := 0; gen <= 5; gen++ {
			for _, a := range []netip.Addr{podIPv4(i, gen), podIPv6(i, gen)} {
				require.True(t, Prefix4.Contains(a) || Prefix6.Contains(a), "%v outside the plan", a)
				require.NotEqual(t, HostIPv4, a)
				require.NotEqual(t, HostIPv6, a)
				require.False(t, seen[a], "%v used twice", a)
				seen[a] = true
			}
		}
	}
	for _, name := range []string{bridgeName("np", "abcdef"), hostVethName("np", "abcdef", MaxNodes)} {
		require.LessOrEqual(t, len(name), 15, "interface name %q too long", name)
	}
	nsRE, linkRE := leftoverPatterns("np")
	require.True(t, nsRE.MatchString(netnsName("np", "abcdef", 12)))
	require.True(t, linkRE.MatchString(bridgeName("np", "abcdef")))
	require.True(t, linkRE.MatchString(hostVethName("np", "abcdef", 3)))
	require.False(t, linkRE.MatchString("npabcdefx"))
	require.False(t, nsRE.MatchString("np-other-1"))
}

func TestNftRuleset(t *testing.T) {
	healed := nftRuleset(faultState{})
	require.Equal(t, "table inet netpulse_sim\ndelete table inet netpulse_sim\n", healed)

	part := nftRuleset(faultState{partitioned: true})
	for _, want := range []string{
		"chain input", "chain output", "ip saddr { 198.18.0.1, 198.18.0.2, 198.18.0.3, 198.18.0.4 } accept", "ip6 saddr fd00:6e70::1 accept",
		"ip saddr 198.18.0.0/24 counter drop", "ip6 saddr fd00:6e70::/64 counter drop",
		"ip daddr 198.18.0.0/24 counter drop", "ip6 daddr fd00:6e70::/64 counter drop", "nd-neighbor-solicit",
	} {
		require.Contains(t, part, want)
	}
	// The host side is accepted before the prefix is dropped.
	require.Less(t, strings.Index(part, "ip saddr { 198.18.0.1, 198.18.0.2, 198.18.0.3, 198.18.0.4 } accept"), strings.Index(part, "ip saddr 198.18.0.0/24"))

	loss := nftRuleset(faultState{lossPercent: 20})
	require.Contains(t, loss, "ip saddr 198.18.0.0/24 numgen random mod 100 < 20 counter drop")
	require.Contains(t, loss, "ip6 saddr fd00:6e70::/64 numgen random mod 100 < 20 counter drop")
	require.NotContains(t, loss, "chain output")
	require.NotContains(t, nftRuleset(faultState{lossPercent: 100}), "numgen", "nft takes numgen values 0-99 only")
	background := nftRuleset(faultState{lossPerMille: 1})
	require.Contains(t, background, "ip saddr 198.18.0.0/24 numgen random mod 1000 < 1 counter drop")
	require.Contains(t, background, "ip6 saddr fd00:6e70::/64 numgen random mod 1000 < 1 counter drop")
	egress := nftRuleset(faultState{egressLossPercent: 10})
	require.Contains(t, egress, "chain output")
	require.Contains(t, egress, "ip daddr "+Prefix4.String()+" numgen random mod 100 < 10 counter drop")
	require.NotContains(t, egress[:strings.Index(egress, "chain output")], "numgen", "input is untouched")

	mute := nftRuleset(faultState{muted: true})
	require.Contains(t, mute, "ip daddr { 198.18.0.1, 198.18.0.2, 198.18.0.3, 198.18.0.4 } tcp dport 4317 counter drop")
	require.Contains(t, mute, "ip6 daddr fd00:6e70::1 tcp dport 4317 counter drop")
	require.NotContains(t, mute, "198.18.0.0/24", "the pod network is untouched")
	// Dropped before the host side is accepted.
	require.Less(t, strings.Index(mute, "tcp dport 4317"), strings.Index(mute, "ip daddr { 198.18.0.1, 198.18.0.2, 198.18.0.3, 198.18.0.4 } accept"))

	big := nftRuleset(faultState{dropAbove: 1400})
	require.Contains(t, big, "ip saddr 198.18.0.0/24 meta length > 1400 counter drop")
	require.Contains(t, big, "ip6 saddr fd00:6e70::/64 meta length > 1400 counter drop")
	require.NotContains(t, big, "chain output")
	if _, err := exec.LookPath("nft"); err == nil {
		cmd := exec.Command("nft", "-c", "-f", "-")
		cmd.Stdin = strings.NewReader(big)
		if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(out), "Operation not permitted") {
			t.Errorf("nft -c refuses the ruleset: %v\n%s\n%s", err, out, big)
		}
	}

	cut := nftRuleset(faultState{blocked: nodeAddrs(2)})
	require.Contains(t, cut, "ip saddr { 198.18.0.12, 198.18.0.52, 198.18.0.92, 198.18.0.132, 198.18.0.172, 198.18.0.212 } counter drop")
	require.Contains(t, cut, "ip6 daddr { fd00:6e70::12, fd00:6e70::1:12, fd00:6e70::2:12, fd00:6e70::3:12, fd00:6e70::4:12, fd00:6e70::5:12 } counter drop")
	require.NotContains(t, cut, "198.18.0.0/24", "the rest of the pod network is untouched")
	require.Less(t, strings.Index(cut, "ip daddr 198.18.0.1 accept"), strings.Index(cut, "ip daddr { 198.18.0.12"))
	// nft itself accepts the rendering (parsed, not applied: -c).
	if _, err := exec.LookPath("nft"); err == nil {
		cmd := exec.Command("nft", "-c", "-f", "-")
		cmd.Stdin = strings.NewReader(cut)
		if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(out), "Operation not permitted") {
			t.Errorf("nft -c refuses the ruleset: %v\n%s\n%s", err, out, cut)
		}
	}
}

func TestSinkMergesRounds(t *testing.T) {
	s := &OTLPSink{series: map[SeriesKey]*Series{}, maxRounds: 3}
	t0 := time.Unix(1000, 0)
	round := func(ts time.Time, status int64, sent, lost int64, rttCount uint64, rttSum float64, errType string) pmetric.Metrics {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		ra := rm.Resource().Attributes()
		ra.PutStr(contract.K8sPodUID, "uid-1")
		ra.PutStr(contract.K8sPodName, "agent-1")
		ra.PutStr(contract.K8sNodeName, "node-1")
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		attrs := func(m pcommon.Map) {
			m.PutStr(contract.DestinationAddress, "198.18.0.12")
			m.PutStr(contract.NetworkType, "ipv4")
			m.PutStr(contract.ProbeType, contract.ProbeTypeICMP)
			m.PutStr(contract.TargetKind, "pod")
		}
		pts := pcommon.NewTimestampFromTime(ts)
		g := ms.AppendEmpty()
		g.SetName(contract.MetricStatus)
		dp := g.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pts)
		dp.SetIntValue(status)
		attrs(dp.Attributes())
		for name, v := range map[string]int64{contract.MetricPacketsSent: sent, contract.MetricPacketsLost: lost} {
			m := ms.AppendEmpty()
			m.SetName(name)
			sdp := m.SetEmptySum().DataPoints().AppendEmpty()
			sdp.SetTimestamp(pts)
			sdp.SetIntValue(v)
			attrs(sdp.Attributes())
		}
		if errType != "" {
			m := ms.AppendEmpty()
			m.SetName(contract.MetricErrors)
			sdp := m.SetEmptySum().DataPoints().AppendEmpty()
			sdp.SetTimestamp(pts)
			sdp.SetIntValue(1)
			attrs(sdp.Attributes())
			sdp.Attributes().PutStr(contract.ErrorType, errType)
		}
		h := ms.AppendEmpty()
		h.SetName(contract.MetricDuration)
		hdp := h.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
		hdp.SetTimestamp(pts)
		hdp.SetCount(rttCount)
		hdp.SetSum(rttSum)
		attrs(hdp.Attributes())
		return md
	}
	s.record(round(t0, 1, 3, 0, 3, 0.003, ""))
	s.record(round(t0.Add(2*time.Second), 0, 9, 3, 6, 0.006, contract.ErrorTypeTimeout))
	s.record(round(t0.Add(time.Second), 1, 6, 0, 6, 0.006, "")) // late: sorted in

	x, ok := s.Get(SeriesKey{SourceUID: "uid-1", Destination: "198.18.0.12", Probe: contract.ProbeTypeICMP})
	require.True(t, ok)
	require.Equal(t, Source{PodName: "agent-1", PodUID: "uid-1", NodeName: "node-1"}, x.Source)
	require.Equal(t, "ipv4", x.NetworkType)
	require.Len(t, x.Rounds, 3)
	require.Equal(t, []int64{1, 1, 0}, []int64{x.Rounds[0].Status, x.Rounds[1].Status, x.Rounds[2].Status})
	require.Equal(t, int64(9), x.Rounds[2].Sent)
	require.Equal(t, int64(3), x.Rounds[2].Lost)
	require.Equal(t, int64(1), x.Rounds[2].Errors[contract.ErrorTypeTimeout])
	require.True(t, x.Rounds[2].HasRTT)
	require.Equal(t, -1.0, x.Rounds[2].LossRatio)
	require.Len(t, x.Since(t0), 2)
	b, ok := x.Before(t0.Add(1500 * time.Millisecond))
	require.True(t, ok)
	require.True(t, t0.Add(time.Second).Equal(b.Time))

	// Bounded: the oldest round goes.
	s.record(round(t0.Add(3*time.Second), 1, 12, 3, 9, 0.009, ""))
	x, _ = s.Get(x.Key)
	require.Len(t, x.Rounds, 3)
	require.True(t, t0.Add(time.Second).Equal(x.Rounds[0].Time))
}

func repoRoot(t *testing.T) string {
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	return root
}

func TestDeployManifests(t *testing.T) {
	root := repoRoot(t)
	rbac, err := kustomizeFiles(filepath.Join(root, "deploy", "rbac"))
	require.NoError(t, err)
	require.NotEmpty(t, rbac)
	for _, f := range rbac {
		objs, err := kubetest.DecodeFile(f)
		require.NoError(t, err)
		require.NotEmpty(t, objs, f)
	}
	crds, err := kustomizeFiles(filepath.Join(root, "deploy", "crds"))
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, f := range crds {
		objs, err := kubetest.DecodeFile(f)
		require.NoError(t, err)
		for _, o := range objs {
			kinds[o.GetKind()]++
		}
	}
	require.Positive(t, kinds["CustomResourceDefinition"])
	k, err := readKustomization(filepath.Join(root, "deploy", "agent-gateway"))
	require.NoError(t, err)
	require.NotEmpty(t, k.ConfigMapGenerator)
}

// TestPodFromDaemonSet builds the simulated pod from the real DaemonSet and checks the
// kubelet emulation: downward-API env and the readiness probe URL.
func TestPodFromDaemonSet(t *testing.T) {
	objs, err := kubetest.DecodeFile(filepath.Join(repoRoot(t), "deploy", "agent-gateway", "agent-daemonset.yaml"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	var ds appsv1.DaemonSet
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &ds))
	ds.UID = "ds-uid"

	pod := podFromTemplate(&ds, "node-2")
	require.Equal(t, "node-2", pod.Spec.NodeName)
	require.Equal(t, "netpulse-agent", pod.Labels["app.kubernetes.io/name"])
	require.Equal(t, "netpulse-agent", pod.Spec.ServiceAccountName)
	require.Equal(t, "DaemonSet", pod.OwnerReferences[0].Kind)
	require.True(t, *pod.OwnerReferences[0].Controller)

	pod.Name, pod.Namespace, pod.UID = "netpulse-agent-abcde", "netpulse", "pod-uid"
	pod.Status.PodIP = "198.18.0.12"
	pod.Status.PodIPs = []corev1.PodIP{{IP: "198.18.0.12"}, {IP: "fd00:6e70::12"}}
	env, err := downwardEnv(pod)
	require.NoError(t, err)
	for _, want := range []string{
		"POD_NAME=netpulse-agent-abcde", "POD_NAMESPACE=netpulse", "POD_UID=pod-uid", "NODE_NAME=node-2",
		"POD_IP=198.18.0.12", "POD_IPS=198.18.0.12,fd00:6e70::12",
	} {
		require.Contains(t, env, want)
	}
	url, threshold := readinessProbe(pod)
	require.Equal(t, "http://198.18.0.12:13133/", url)
	require.Positive(t, threshold)

	merged := mergeEnv([]string{"A=1", "B=2"}, map[string]string{"B": "3", "C": "4"})
	require.Equal(t, []string{"A=1", "B=3", "C=4"}, merged)
}

func TestZoneCutBlocks(t *testing.T) {
	var nodes []Node
	for i := 1; i <= 16; i++ {
		nodes = append(nodes, Node{Index: i, Name: fmt.Sprintf("node-%d", i), Zone: fmt.Sprintf("zone-%c", 'a'+(i-1)%3), IPv4: nodeIPv4(i)})
	}
	blocks, err := zoneCutBlocks(nodes, "zone-a", "zone-b")
	require.NoError(t, err)
	require.Len(t, blocks, 11, "zone-a and zone-b nodes only")
	for _, n := range nodes {
		for _, m := range nodes {
			cut := n.Zone != m.Zone && (n.Zone == "zone-a" && m.Zone == "zone-b" || n.Zone == "zone-b" && m.Zone == "zone-a")
			require.Equal(t, cut, slices.Contains(blocks[n.Name], m.IPv4), "%s (%s) blocks %s (%s)", n.Name, n.Zone, m.Name, m.Zone)
			require.Equal(t, cut, slices.Contains(blocks[n.Name], podIPv6(m.Index, 3)))
		}
	}
	_, err = zoneCutBlocks(nodes, "zone-a", "zone-x")
	require.Error(t, err)
}
