// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/internal/planner"
)

// An agent's state at a cluster's size (issue #39 item 7: agents' memory at 65,000 peers):
// the peer watch's cache (every agent pod, stripped as stripPod keeps it) and the node
// watch's (metadata, stripped), then what a plan rebuild costs - the receiver rebuilds on
// every change of either watch (rounds.go buildPlan: Peers, Nodes, planner.New), and at
// this size some agent pod changes nearly every round. The pods are what the DaemonSet
// makes (labels, owner, two containers with ports, dual-stack IPs, five conditions) before
// the strip, so the figure is the cache's, not a toy's. Reference: the same at 5,000 peers,
// in the same run. The BENCH lines compare each size with the first; the sizes are
// BENCH_AGENT_PEERS (default 5000,20000,65000).
//
//	go test -run '^$' -bench BenchmarkAgentStateAtScale -benchtime 1x ./receiver/podprobereceiver/internal/discovery/
func BenchmarkAgentStateAtScale(b *testing.B) {
	sizes := []int{5000, 20000, 65000}
	if env := os.Getenv("BENCH_AGENT_PEERS"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("BENCH_AGENT_PEERS: %q", env)
			}
			sizes = append(sizes, n)
		}
	}
	var ref agentScale
	for i, n := range sizes {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			var s agentScale
			for b.Loop() {
				s = measureAgentScale(b, n)
			}
			b.ReportMetric(s.cachePerPeer, "cache-B/peer")
			b.ReportMetric(s.planPerPeer, "plan-B/peer")
			b.ReportMetric(float64(s.rebuild.Microseconds())/1000, "rebuild-ms")
			b.ReportMetric(float64(s.rebuildAlloc)/float64(n), "rebuild-alloc-B/peer")
			if i == 0 {
				ref = s
				return
			}
			fmt.Printf("BENCH agent_cache_bytes_per_peer_N%d ours=%.0f reference=%.0f(N%d) ratio=%.2fx\n", n, s.cachePerPeer, ref.cachePerPeer, sizes[0], s.cachePerPeer/ref.cachePerPeer)
			fmt.Printf("BENCH agent_plan_rebuild_ms_N%d ours=%.1f reference=%.1f(N%d) ratio=%.2fx\n", n, ms(s.rebuild), ms(ref.rebuild), sizes[0], ms(s.rebuild)/ms(ref.rebuild))
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type agentScale struct {
	cachePerPeer, planPerPeer float64
	rebuild                   time.Duration
	rebuildAlloc              uint64
}

// measureAgentScale fills the two watch caches for n peers on n nodes in 3 zones, then
// times one plan rebuild (the median of three) and measures what the plan and members keep.
func measureAgentScale(b *testing.B, n int) agentScale {
	b.Helper()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	ready := metav1.NewTime(time.Now().Add(-time.Hour))
	for i := range n {
		node := fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", i>>16&255, i>>8&255, i&255)
		p, err := stripPod(agentPodAt(i, node, ready))
		if err != nil {
			b.Fatal(err)
		}
		if err := pods.Add(p); err != nil {
			b.Fatal(err)
		}
		nm, err := stripNodeMetadata(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: node, UID: types.UID(fmt.Sprintf("node-uid-%08d", i)), ResourceVersion: strconv.Itoa(1000 + i),
			Labels: map[string]string{
				ZoneLabel: fmt.Sprintf("eu-west-1%c", 'a'+i%3), RegionLabel: "eu-west-1", corev1.LabelHostname: node,
				corev1.LabelInstanceTypeStable: "m6i.xlarge", corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
				"node.kubernetes.io/lifecycle": "normal", "kubernetes.io/role": "worker",
			},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		}})
		if err != nil {
			b.Fatal(err)
		}
		if err := nodes.Add(nm); err != nil {
			b.Fatal(err)
		}
	}
	cached := heap()
	var s agentScale
	s.cachePerPeer = float64(cached-before) / float64(n)

	rebuild := func() (*planner.Plan, map[string]Pod) {
		byName := map[string]Node{}
		for _, obj := range nodes.List() {
			m := obj.(*metav1.PartialObjectMetadata)
			byName[m.Name] = Node{Name: m.Name, Zone: m.Labels[ZoneLabel]}
		}
		members := map[string]Pod{}
		var list []planner.Member
		ready, _ := readyPods(pods.List(), time.Now(), 10*time.Second)
		for _, p := range ready {
			members[p.UID] = p
			list = append(list, planner.Member{ID: p.UID, Node: p.Node, Zone: byName[p.Node].Zone})
		}
		plan, err := planner.New(list, planner.Config{K: 3, ProbeBudget: 1000, BaseInterval: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		return plan, members
	}
	var took []time.Duration
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	for range 3 {
		start := time.Now()
		_, _ = rebuild()
		took = append(took, time.Since(start))
	}
	runtime.ReadMemStats(&ms1)
	s.rebuildAlloc = (ms1.TotalAlloc - ms0.TotalAlloc) / 3
	s.rebuild = median3(took)
	plan, members := rebuild()
	s.planPerPeer = float64(heap()-cached) / float64(n)
	runtime.KeepAlive(plan)
	runtime.KeepAlive(members)
	runtime.KeepAlive(pods)
	runtime.KeepAlive(nodes)
	return s
}

func median3(d []time.Duration) time.Duration {
	a, b, c := d[0], d[1], d[2]
	return max(min(a, b), min(max(a, b), c))
}

// agentPodAt is agent pod i as the DaemonSet and the kubelet make it.
func agentPodAt(i int, node string, ready metav1.Time) *corev1.Pod {
	name := fmt.Sprintf("netpulse-agent-%05x", i)
	ctrl := true
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: ready}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "netpulse", UID: types.UID(fmt.Sprintf("5d1c%04x-0d3b-4f63-9a2e-%012x", i&0xffff, i)),
			ResourceVersion: strconv.Itoa(100000 + i), GenerateName: "netpulse-agent-",
			Labels: map[string]string{
				"app.kubernetes.io/name": "netpulse", "app.kubernetes.io/component": "agent", "app.kubernetes.io/instance": "netpulse",
				"controller-revision-hash": "6f9c7d8b5", "pod-template-generation": "3",
			},
			Annotations:     map[string]string{"kubectl.kubernetes.io/default-container": "agent", "checksum/config": strings.Repeat("a", 64)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "netpulse-agent", UID: "7a1e2d3c-0000-4000-8000-000000000001", Controller: &ctrl, BlockOwnerDeletion: &ctrl}},
		},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "netpulse-agent",
			Containers: []corev1.Container{
				{Name: "agent", Image: "ghcr.io/netpulse/otelcol-netpulse:0.1.0", Ports: []corev1.ContainerPort{{Name: "echo", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 8888, Protocol: corev1.ProtocolTCP}}},
				{Name: "sidecar", Image: "ghcr.io/netpulse/otelcol-netpulse:0.1.0"},
			},
		},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIP:  fmt.Sprintf("10.%d.%d.%d", 64+i>>16&63, i>>8&255, i&255),
			PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.%d.%d.%d", 64+i>>16&63, i>>8&255, i&255)}, {IP: fmt.Sprintf("fd00:10:%x::%x", i>>8, i&255)}},
			HostIP: fmt.Sprintf("192.168.%d.%d", i>>8&255, i&255),
			Conditions: []corev1.PodCondition{
				cond("PodReadyToStartContainers"), cond(corev1.PodInitialized), cond(corev1.PodReady), cond(corev1.ContainersReady), cond(corev1.PodScheduled),
			},
		},
	}
}
