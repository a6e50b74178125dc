// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

func createNode(t *testing.T, cs kubernetes.Interface, name, zone, ip string) {
	t.Helper()
	ctx := context.Background()
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{ZoneLabel: zone, RegionLabel: "r1", "kubernetes.io/hostname": name},
		Annotations: map[string]string{"example.com/large": string(make([]byte, 4096))},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"example.com/image:1"}, SizeBytes: 1}}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// Zones come from a metadata-only node watch whose cache keeps a node's name and topology
// labels only; the whole Node (for its addresses) is watched only when they are probed.
func TestNodeWatch(t *testing.T) {
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	cs, err := cp.Clientset()
	require.NoError(t, err)
	meta, err := metadata.NewForConfig(cp.Config)
	require.NoError(t, err)
	createNode(t, cs, "node-a", "zone-a", "10.0.0.1")
	createNode(t, cs, "node-b", "zone-b", "10.0.0.2")

	run := func(opts Options) *Watcher {
		w := New(cs, meta, opts)
		w.Start()
		t.Cleanup(w.Stop)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.True(t, w.WaitForSync(ctx))
		return w
	}

	zones := run(Options{Nodes: true})
	require.Equal(t, map[string]Node{
		"node-a": {Name: "node-a", Zone: "zone-a"},
		"node-b": {Name: "node-b", Zone: "zone-b"},
	}, zones.Nodes())
	for _, obj := range zones.nodes.GetStore().List() {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		require.True(t, ok, "a metadata-only watch caches PartialObjectMetadata, not %T", obj)
		require.Equal(t, map[string]string{ZoneLabel: m.Labels[ZoneLabel], RegionLabel: "r1"}, m.Labels)
		require.Empty(t, m.Annotations)
		require.Empty(t, m.ManagedFields)
	}

	addrs := run(Options{Nodes: true, NodeAddresses: true})
	require.Equal(t, Node{Name: "node-a", Zone: "zone-a", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}, addrs.Nodes()["node-a"])
	for _, obj := range addrs.nodes.GetStore().List() {
		n, ok := obj.(*corev1.Node)
		require.True(t, ok, "%T", obj)
		require.Empty(t, n.Status.Images)
		require.Empty(t, n.Annotations)
	}

	none := run(Options{})
	require.Empty(t, none.Nodes())

	// A status report that changes nothing a plan is made of (a kubelet's images) moves
	// neither watch's version; a new address moves the address watch's, a zone both. A
	// watch delivers one object's events in order, so when the later change has moved a
	// version by one, the earlier report moved it by none.
	ctx := context.Background()
	zv, av := zones.Version(), addrs.Version()
	n, err := cs.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{"example.com/image:2"}, SizeBytes: 2})
	n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	n.Status.Addresses[0].Address = "10.0.0.9"
	n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return addrs.Version() > av }, 10*time.Second, 50*time.Millisecond, "a new address")
	require.Equal(t, av+1, addrs.Version(), "the images report moved nothing")
	n.Labels[ZoneLabel] = "zone-c"
	_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return zones.Version() > zv }, 10*time.Second, 50*time.Millisecond, "a new zone")
	require.Equal(t, zv+1, zones.Version(), "neither the images nor the address moved the zones' watch")
}

// The peer watch caches a compact record per pod (cachedPod, not a corev1.Pod) and serves
// the probe-able ones: Running, not terminating, Ready (or its containers ready while it
// waits on a readiness gate), with an IP, Ready for the grace period - and when the first
// pod within it leaves it, so that the plan takes it in without another watch event.
func TestPeerWatch(t *testing.T) {
	cp := kubetest.StartForTest(t, kubetest.Options{NoControllerManager: true})
	cs, err := cp.Clientset()
	require.NoError(t, err)
	ctx := context.Background()
	const ns = "peers"
	require.NoError(t, kubetest.EnsureNamespace(ctx, cs, ns))
	now := time.Now().Truncate(time.Second)
	old, recent := metav1.NewTime(now.Add(-time.Hour)), metav1.NewTime(now.Add(-4*time.Second))
	type podCase struct {
		name     string
		gate     bool
		ready    corev1.PodConditionType
		since    metav1.Time
		ip       string
		phase    corev1.PodPhase
		deleting bool
	}
	for _, c := range []podCase{
		{name: "ready", ready: corev1.PodReady, since: old, ip: "10.1.0.1", phase: corev1.PodRunning},
		{name: "recent", ready: corev1.PodReady, since: recent, ip: "10.1.0.2", phase: corev1.PodRunning},
		{name: "gated", gate: true, ready: corev1.ContainersReady, since: old, ip: "10.1.0.3", phase: corev1.PodRunning},
		{name: "ungated", ready: corev1.ContainersReady, since: old, ip: "10.1.0.4", phase: corev1.PodRunning},
		{name: "no-ip", ready: corev1.PodReady, since: old, phase: corev1.PodRunning},
		{name: "pending", ready: corev1.PodReady, since: old, ip: "10.1.0.6", phase: corev1.PodPending},
		{name: "deleting", ready: corev1.PodReady, since: old, ip: "10.1.0.7", phase: corev1.PodRunning, deleting: true},
	} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: ns, Labels: map[string]string{"app": "agent"}},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "agent", Image: "agent",
				Ports: []corev1.ContainerPort{{Name: "echo", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}}},
		}
		if c.deleting {
			pod.Finalizers = []string{"example.com/hold"}
		}
		if c.gate {
			pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "netpulse.io/network-ready"}}
		}
		p, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		p.Status.Phase = c.phase
		p.Status.Conditions = []corev1.PodCondition{{Type: c.ready, Status: corev1.ConditionTrue, LastTransitionTime: c.since}}
		if c.ip != "" {
			p.Status.PodIPs = []corev1.PodIP{{IP: c.ip}, {IP: "fd00::" + c.ip[len("10.1.0."):]}}
		}
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
		if c.deleting {
			require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, c.name, metav1.DeleteOptions{}))
			t.Cleanup(func() {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, c.name, metav1.GetOptions{})
				if err == nil {
					p.Finalizers = nil
					_, _ = cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
				}
			})
		}
	}
	w := New(cs, nil, Options{Peers: &Selector{Namespace: ns, LabelSelector: "app=agent"}})
	w.Start()
	t.Cleanup(w.Stop)
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.True(t, w.WaitForSync(syncCtx))
	require.Eventually(t, func() bool { return len(w.peers.GetStore().List()) == 7 }, 10*time.Second, 50*time.Millisecond)
	for _, obj := range w.peers.GetStore().List() {
		_, ok := obj.(*cachedPod)
		require.True(t, ok, "the cache keeps cachedPods, not %T", obj)
	}

	names := func(pods []Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	pods, next := w.PeersUntil(now, 10*time.Second)
	require.Equal(t, []string{"gated", "ready"}, names(pods))
	require.Equal(t, recent.Add(10*time.Second), next, "the recent pod leaves its grace then")
	for _, p := range pods {
		require.Equal(t, "node-a", p.Node)
		require.Len(t, p.IPs, 2)
		require.Equal(t, []NamedPort{{Name: "echo", Port: 8080}}, p.Ports, "named TCP ports only")
		port, err := ResolvePort(p, "echo")
		require.NoError(t, err)
		require.Equal(t, uint16(8080), port)
		_, err = ResolvePort(p, "dns")
		require.ErrorContains(t, err, `no container port named "dns"`)
	}
	pods, next = w.PeersUntil(next, 10*time.Second)
	require.Equal(t, []string{"gated", "ready", "recent"}, names(pods))
	require.True(t, next.IsZero())
	require.Equal(t, []string{"gated", "ready", "recent"}, names(w.Peers(now, 0)))

	// An annotation moves no plan; an address does.
	v := w.Version()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "ready", metav1.GetOptions{})
	require.NoError(t, err)
	p.Annotations = map[string]string{"example.com/touched": "yes"}
	p, err = cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.1.0.99"}}
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.Version() > v }, 10*time.Second, 50*time.Millisecond, "a new address")
	require.Equal(t, v+1, w.Version(), "the annotation moved nothing (one object's events arrive in order)")
}
