// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8sindex

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/internal/k8sindex/k8sindextest"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// One control plane (started on first use) serves the integration tests of this package.
var (
	cpOnce sync.Once
	cp     *kubetest.ControlPlane
	cpErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cp != nil {
		if err := cp.Stop(); err != nil {
			fmt.Println("stop local control plane:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("k8s.io/klog/v2.(*loggingT).flushDaemon")); err != nil {
			fmt.Println("goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func controlPlane(t *testing.T) *kubetest.ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the local control plane (run without -short)")
	}
	cpOnce.Do(func() {
		// No controller manager: nothing here needs it, and its garbage collector would
		// delete pods whose (synthetic) owners do not exist.
		cp, cpErr = kubetest.Start(context.Background(), kubetest.Options{NoControllerManager: true, Logf: t.Logf})
	})
	require.NoError(t, cpErr, "start local control plane")
	return cp
}

func adminClient(t *testing.T) kubernetes.Interface {
	cs, err := controlPlane(t).Clientset()
	require.NoError(t, err)
	return cs
}

// fixture creates namespaces (with a default service account) and nodes.
func fixture(t *testing.T, cs kubernetes.Interface, namespaces []string, nodes ...*corev1.Node) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range namespaces {
		require.NoError(t, kubetest.EnsureNamespace(ctx, cs, ns)) // with its default service account
	}
	for _, n := range nodes {
		status := n.Status
		got, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		require.NoError(t, err)
		got.Status = status
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

func testNode(name, zone, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone, corev1.LabelTopologyRegion: "r1"}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

func testPod(ns, name, node string, labels map[string]string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "c", Image: "example.invalid/none:1"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return p
}

func createPod(t *testing.T, cs kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := k8sindextest.CreatePod(context.Background(), cs, p)
	require.NoError(t, err)
	return got
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 20*time.Millisecond, what)
}

func resolvesTo(ix *Index, addr, podName string) func() bool {
	a := netip.MustParseAddr(addr)
	return func() bool {
		id, ok := ix.Lookup(a)
		return ok && id.PodName == podName
	}
}

func countedConfig(t *testing.T) (*rest.Config, *k8sindextest.RequestCounter) {
	cfg := rest.CopyConfig(controlPlane(t).Config)
	c := k8sindextest.NewRequestCounter()
	c.Wrap(cfg)
	return cfg, c
}

func TestWatchFollowsTheAPI(t *testing.T) {
	cs := adminClient(t)
	ctx := context.Background()
	fixture(t, cs, []string{"idx-follow"}, testNode("follow-node", "zone-f", "172.30.0.1"))
	// A pod that exists before the watch starts (initial list) ...
	p1 := createPod(t, cs, testPod("idx-follow", "before", "follow-node", nil, "10.200.0.1", "fd00:200::1"))
	hostPod := testPod("idx-follow", "host", "follow-node", nil, "172.30.0.1")
	hostPod.Spec.HostNetwork = true
	createPod(t, cs, hostPod)

	cfg, counter := countedConfig(t)
	ix := New(Config{DeletedPodGrace: 2 * time.Second})
	w, err := Watch(cfg, ix, Scope{Namespace: "idx-follow"}, nil)
	require.NoError(t, err)
	defer w.Stop()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, w.WaitForSync(wctx))
	require.True(t, w.HasSynced())

	id := requirePod(t, ix, "10.200.0.1", "before")
	assert.Equal(t, "idx-follow", id.Namespace)
	assert.Equal(t, "follow-node", id.NodeName)
	assert.Equal(t, "zone-f", id.Zone)
	assert.Equal(t, string(p1.UID), id.PodUID)
	requirePod(t, ix, "fd00:200::1", "before")
	id, ok := lookup(t, ix, "172.30.0.1")
	require.True(t, ok)
	assert.Equal(t, KindNode, id.Kind, "the host-network pod's IP is its node's")

	// ... one created after it (watch) ...
	p2 := createPod(t, cs, testPod("idx-follow", "after", "follow-node", nil, "10.200.0.2"))
	eventually(t, "new pod resolves", resolvesTo(ix, "10.200.0.2", "after"))

	// ... changes IP ...
	p2.Status.PodIP = "10.200.0.3"
	p2.Status.PodIPs = []corev1.PodIP{{IP: "10.200.0.3"}}
	_, err = cs.CoreV1().Pods("idx-follow").UpdateStatus(ctx, p2, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "new IP resolves", resolvesTo(ix, "10.200.0.3", "after"))
	id = requirePod(t, ix, "10.200.0.2", "after")
	assert.True(t, id.Deleted, "old IP within grace")

	// ... and one is deleted: its IP resolves within the grace period, then not at all.
	zero := int64(0)
	require.NoError(t, cs.CoreV1().Pods("idx-follow").Delete(ctx, "before", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	eventually(t, "deleted pod in grace", func() bool {
		id, ok := ix.Lookup(netip.MustParseAddr("10.200.0.1"))
		return ok && id.Deleted
	})
	eventually(t, "grace over", func() bool {
		_, ok1 := ix.Lookup(netip.MustParseAddr("10.200.0.1"))
		_, ok2 := ix.Lookup(netip.MustParseAddr("10.200.0.2"))
		return !ok1 && !ok2
	})
	// IP reuse: a new pod gets the deleted pod's IP.
	createPod(t, cs, testPod("idx-follow", "reuser", "follow-node", nil, "10.200.0.1"))
	eventually(t, "reused IP resolves to the new pod", resolvesTo(ix, "10.200.0.1", "reuser"))

	// Watches only: one initial sync per resource, no relist.
	t.Logf("API requests: %s", counter)
	require.NoError(t, counter.CheckOneInitialSync("pods"))
	require.NoError(t, counter.CheckOneInitialSync("nodes"))
	assert.LessOrEqual(t, counter.Count("pods", k8sindextest.KindWatch), 1, "one watch, no re-watch within minutes")
	pe, _ := w.Events()
	assert.Positive(t, pe)
}

func TestWatchScope(t *testing.T) {
	cs := adminClient(t)
	fixture(t, cs, []string{"idx-scope-a", "idx-scope-b"},
		testNode("scope-node-1", "z1", "172.30.1.1"), testNode("scope-node-2", "z2", "172.30.1.2"))
	agent := map[string]string{"app": "scope-agent"}
	createPod(t, cs, testPod("idx-scope-a", "a1", "scope-node-1", agent, "10.201.0.1"))
	createPod(t, cs, testPod("idx-scope-a", "a2", "scope-node-2", map[string]string{"app": "web"}, "10.201.0.2"))
	createPod(t, cs, testPod("idx-scope-b", "b1", "scope-node-1", agent, "10.201.0.3"))

	sync := func(t *testing.T, cfg *rest.Config, s Scope) (*Index, *Watcher) {
		ix := New(Config{})
		w, err := Watch(cfg, ix, s, nil)
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.WaitForSync(ctx))
		return ix, w
	}
	resolved := func(ix *Index, addrs ...string) []string {
		var names []string
		for _, a := range addrs {
			if id, ok := ix.Lookup(netip.MustParseAddr(a)); ok {
				names = append(names, id.PodName+id.NodeName)
			}
		}
		return names
	}
	all := []string{"10.201.0.1", "10.201.0.2", "10.201.0.3"}

	t.Run("namespace", func(t *testing.T) {
		cfg, _ := countedConfig(t)
		ix, _ := sync(t, cfg, Scope{Namespace: "idx-scope-a"})
		assert.Equal(t, []string{"a1scope-node-1", "a2scope-node-2"}, resolved(ix, all...))
	})
	t.Run("label selector", func(t *testing.T) {
		cfg, _ := countedConfig(t)
		ix, _ := sync(t, cfg, Scope{LabelSelector: "app=scope-agent"})
		assert.Equal(t, []string{"a1scope-node-1", "b1scope-node-1"}, resolved(ix, all...))
	})
	t.Run("this node only", func(t *testing.T) {
		cfg, counter := countedConfig(t)
		ix, _ := sync(t, cfg, Scope{NodeName: "scope-node-1"})
		assert.Equal(t, []string{"a1scope-node-1", "b1scope-node-1"}, resolved(ix, all...))
		assert.Equal(t, []string{"scope-node-1"}, resolved(ix, "172.30.1.1", "172.30.1.2"), "only this node is watched")
		assert.Equal(t, 1, ix.Stats().Nodes)
		require.NoError(t, counter.CheckOneInitialSync("nodes"))
	})
	t.Run("no nodes", func(t *testing.T) {
		cfg, counter := countedConfig(t)
		ix, _ := sync(t, cfg, Scope{NoNodes: true, Namespace: "idx-scope-b"})
		assert.Equal(t, []string{"b1scope-node-1"}, resolved(ix, all...))
		assert.Empty(t, resolved(ix, "172.30.1.1"))
		assert.Equal(t, 0, counter.InitialSyncs("nodes")+counter.Count("nodes", k8sindextest.KindWatch))
	})
	t.Run("least privilege", func(t *testing.T) {
		// An agent identity allowed to list and watch pods of one namespace only, and
		// nothing on nodes: a namespace-scoped, node-less watch works with it...
		ctx := context.Background()
		saCfg, err := controlPlane(t).ServiceAccountConfig(ctx, "idx-scope-a", "agent")
		require.NoError(t, err)
		require.NoError(t, controlPlane(t).Grant(ctx, "idx-scope-a", "agent", false, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"},
		}))
		ix, _ := sync(t, saCfg, Scope{Namespace: "idx-scope-a", NoNodes: true})
		assert.Len(t, resolved(ix, all...), 2)

		// ... and a cluster-wide one never syncs (forbidden), without blocking anyone.
		w, err := Watch(saCfg, New(Config{}), Scope{}, nil)
		require.NoError(t, err)
		defer w.Stop()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		require.ErrorIs(t, w.WaitForSync(wctx), context.DeadlineExceeded)
		assert.False(t, w.HasSynced())
	})
}

func TestRegistrySharesOneWatcher(t *testing.T) {
	cs := adminClient(t)
	fixture(t, cs, []string{"idx-registry"})
	createPod(t, cs, testPod("idx-registry", "shared", "", nil, "10.202.0.1"))

	reg := &Registry{}
	var (
		mu       sync.Mutex
		counters []*k8sindextest.RequestCounter
	)
	restConfig := func() (*rest.Config, error) {
		cfg, c := countedConfig(t)
		mu.Lock()
		counters = append(counters, c)
		mu.Unlock()
		return cfg, nil
	}
	key := NewKey("admin", Scope{Namespace: "idx-registry"}, nil, time.Second)
	h1, err := reg.Acquire(key, restConfig, nil)
	require.NoError(t, err)
	h2, err := reg.Acquire(key, restConfig, nil)
	require.NoError(t, err)
	assert.Same(t, h1.Index(), h2.Index())
	assert.Same(t, h1.Watcher(), h2.Watcher())
	assert.Equal(t, 1, reg.Len())
	require.Len(t, counters, 1, "the client is built once")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, h2.WaitForSync(ctx))
	requirePod(t, h1.Index(), "10.202.0.1", "shared")
	require.NoError(t, counters[0].CheckOneInitialSync("pods"))

	other, err := reg.Acquire(NewKey("admin", Scope{Namespace: "idx-registry"}, []string{"app"}, time.Second), restConfig, nil)
	require.NoError(t, err)
	assert.NotSame(t, h1.Index(), other.Index(), "different labels: a different index")
	assert.Equal(t, 2, reg.Len())
	other.Release()

	h1.Release()
	h1.Release() // idempotent
	assert.Equal(t, 1, reg.Len(), "still held by h2")
	assert.False(t, isStopped(h2.Watcher()))
	h2.Release()
	assert.Equal(t, 0, reg.Len())
	assert.True(t, isStopped(h2.Watcher()))
}

func isStopped(w *Watcher) bool {
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(100 * time.Millisecond):
		return false
	}
}

func TestWaitForSyncUnreachable(t *testing.T) {
	ix := New(Config{})
	w, err := Watch(&rest.Config{Host: "https://127.0.0.1:1"}, ix, Scope{}, nil)
	require.NoError(t, err)
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	require.ErrorIs(t, w.WaitForSync(ctx), context.DeadlineExceeded)
	assert.Less(t, time.Since(began), 5*time.Second)
	w.Stop()
	w.Stop()
}

func TestScopeValidate(t *testing.T) {
	assert.NoError(t, Scope{LabelSelector: "app in (a,b),!canary"}.Validate())
	assert.ErrorContains(t, Scope{LabelSelector: "app in (a,"}.Validate(), "label_selector:")
	_, err := Watch(&rest.Config{Host: "https://127.0.0.1:1"}, New(Config{}), Scope{LabelSelector: "=="}, nil)
	assert.Error(t, err)
}
