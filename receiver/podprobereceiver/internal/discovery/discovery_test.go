// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"context"
	"net/netip"
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
}
