// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8sindex

import (
	"net/netip"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestIndex(grace time.Duration, labels ...string) (*Index, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	return New(Config{PodLabels: labels, DeletedPodGrace: grace, Clock: clk.Now}), clk
}

func ips(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func pod(uid, name string, created int64, addrs ...string) *PodRecord {
	return &PodRecord{
		UID: uid, Name: name, Namespace: "shop", NodeName: "node-a",
		IPs: ips(addrs...), Phase: PhaseRunning, Ready: true,
		Created:  time.Unix(created, 0),
		Workload: Workload{Kind: WorkloadDeployment, Name: "cart"},
	}
}

func (e *podEntry) ip4() string { return netip.AddrFrom16(e.ip).Unmap().String() }

func lookup(t *testing.T, ix *Index, addr string) (Identity, bool) {
	t.Helper()
	return ix.Lookup(netip.MustParseAddr(addr))
}

func requirePod(t *testing.T, ix *Index, addr, name string) Identity {
	t.Helper()
	id, ok := lookup(t, ix, addr)
	require.True(t, ok, "%s does not resolve", addr)
	require.Equal(t, KindPod, id.Kind, "%s: %+v", addr, id)
	require.Equal(t, name, id.PodName, "%s: %+v", addr, id)
	return id
}

func requireNone(t *testing.T, ix *Index, addr string) {
	t.Helper()
	id, ok := lookup(t, ix, addr)
	require.False(t, ok, "%s resolves to %+v", addr, id)
	require.Equal(t, KindNone, id.Kind)
}

func TestEntryIsCompact(t *testing.T) {
	// The memory budget (300 B per pod, including map slots and the name+UID string)
	// depends on this; see the package doc and docs/processor.md.
	require.LessOrEqual(t, unsafe.Sizeof(podEntry{}), uintptr(64))
}

func TestLookupPodAndNode(t *testing.T) {
	ix, _ := newTestIndex(0)
	ix.UpsertNode(&NodeRecord{Name: "node-a", Zone: "eu-west-1a", Region: "eu-west-1", IPs: ips("172.16.0.1", "203.0.113.7")})
	p := pod("uid-1", "cart-7d9f8b6c5d-x2x4z", 100, "10.64.0.2")
	ix.UpsertPod(p)

	id := requirePod(t, ix, "10.64.0.2", "cart-7d9f8b6c5d-x2x4z")
	assert.Equal(t, Identity{
		Kind: KindPod, PodName: "cart-7d9f8b6c5d-x2x4z", PodUID: "uid-1", Namespace: "shop",
		NodeName: "node-a", Workload: Workload{Kind: WorkloadDeployment, Name: "cart"},
		Zone: "eu-west-1a", Region: "eu-west-1", Phase: PhaseRunning, Ready: true,
	}, id)

	for _, a := range []string{"172.16.0.1", "203.0.113.7"} {
		id, ok := lookup(t, ix, a)
		require.True(t, ok)
		assert.Equal(t, Identity{Kind: KindNode, NodeName: "node-a", Zone: "eu-west-1a", Region: "eu-west-1"}, id)
	}
	requireNone(t, ix, "10.64.0.3")
	requireNone(t, ix, "8.8.8.8")

	st := ix.Stats()
	assert.Equal(t, Stats{Pods: 1, PodIPs: 1, Nodes: 1, NodeIPs: 2, Workloads: 1}, st)
}

func TestDualStackPod(t *testing.T) {
	ix, _ := newTestIndex(0)
	ix.UpsertPod(pod("uid-1", "dual", 1, "10.64.0.2", "fd00:10::2"))
	requirePod(t, ix, "10.64.0.2", "dual")
	requirePod(t, ix, "fd00:10::2", "dual")
	// Equivalent spellings of the same addresses.
	requirePod(t, ix, "::ffff:10.64.0.2", "dual")
	requirePod(t, ix, "fd00:10:0:0:0:0:0:2", "dual")
	requirePod(t, ix, "fd00:10::2%eth0", "dual")
	assert.Equal(t, 2, ix.Stats().PodIPs)

	// Losing the IPv6 address (not something Kubernetes does, but the index must not
	// keep a stale mapping) leaves only the IPv4 one.
	ix.UpsertPod(pod("uid-1", "dual", 1, "10.64.0.2"))
	requirePod(t, ix, "10.64.0.2", "dual")
	requireNone(t, ix, "fd00:10::2")
}

func TestHostNetworkPodsResolveToTheirNode(t *testing.T) {
	ix, _ := newTestIndex(time.Minute)
	ix.UpsertNode(&NodeRecord{Name: "node-a", Zone: "z1", IPs: ips("172.16.0.1")})
	hp := pod("uid-h", "node-exporter-abcde", 1, "172.16.0.1")
	hp.HostNetwork = true
	ix.UpsertPod(hp)
	id, ok := lookup(t, ix, "172.16.0.1")
	require.True(t, ok)
	assert.Equal(t, KindNode, id.Kind)
	assert.Equal(t, "node-a", id.NodeName)
	assert.Equal(t, "z1", id.Zone)
	assert.Equal(t, 0, ix.Stats().Pods, "host-network pods own no IP and are not kept")
}

func TestPodsWithoutIPOrTerminalAreNotKept(t *testing.T) {
	ix, _ := newTestIndex(0)
	pending := pod("uid-p", "pending", 1)
	pending.Phase = PhasePending
	ix.UpsertPod(pending)
	assert.Equal(t, 0, ix.Stats().Pods)

	done := pod("uid-d", "done", 1, "10.64.0.9")
	done.Phase = PhaseSucceeded
	ix.UpsertPod(done)
	assert.Equal(t, 0, ix.Stats().Pods)
	requireNone(t, ix, "10.64.0.9")
}

func TestIPReuseAfterDelete(t *testing.T) {
	ix, clk := newTestIndex(30 * time.Second)
	ix.UpsertPod(pod("uid-old", "old", 100, "10.64.0.2"))
	ix.DeletePod("uid-old")

	// Within the grace period, late telemetry of the deleted pod still resolves.
	id := requirePod(t, ix, "10.64.0.2", "old")
	assert.True(t, id.Deleted)
	assert.Equal(t, "shop", id.Namespace)
	assert.Equal(t, "cart", id.Workload.Name)

	// A new pod gets the IP: it wins at once, grace or not.
	ix.UpsertPod(pod("uid-new", "new", 200, "10.64.0.2"))
	id = requirePod(t, ix, "10.64.0.2", "new")
	assert.False(t, id.Deleted)

	clk.Advance(time.Minute)
	ix.Expire()
	requirePod(t, ix, "10.64.0.2", "new")
	st := ix.Stats()
	assert.Equal(t, 0, st.Graves)
	assert.Equal(t, 1, st.Pods)
}

func TestDeletedPodGraceExpires(t *testing.T) {
	ix, clk := newTestIndex(30 * time.Second)
	p := pod("uid-1", "gone", 100, "10.64.0.2", "fd00::2")
	p.Workload = Workload{Kind: WorkloadStatefulSet, Name: "db"}
	ix.UpsertPod(p)
	ix.DeletePod("uid-1")
	requirePod(t, ix, "fd00::2", "gone")
	clk.Advance(29 * time.Second)
	requirePod(t, ix, "10.64.0.2", "gone")
	clk.Advance(2 * time.Second)
	// Expired graves stop resolving even before they are swept...
	requireNone(t, ix, "10.64.0.2")
	// ...and sweeping releases everything the pod held.
	ix.Expire()
	assert.Equal(t, Stats{}, ix.Stats())
	assert.Empty(t, ix.owners)
	assert.Empty(t, ix.nodes)
}

func TestNoGraceMeansGoneAtOnce(t *testing.T) {
	ix, _ := newTestIndex(0)
	ix.UpsertPod(pod("uid-1", "gone", 100, "10.64.0.2"))
	ix.DeletePod("uid-1")
	requireNone(t, ix, "10.64.0.2")
	assert.Equal(t, Stats{}, ix.Stats())
}

func TestTerminalPodReleasesItsIP(t *testing.T) {
	ix, clk := newTestIndex(10 * time.Second)
	job := pod("uid-job", "report-29000000-abcde", 100, "10.64.0.5")
	ix.UpsertPod(job)
	done := *job
	done.Phase = PhaseSucceeded
	ix.UpsertPod(&done)
	id := requirePod(t, ix, "10.64.0.5", "report-29000000-abcde")
	assert.True(t, id.Deleted, "a terminal pod's IP is released; it resolves only within the grace period")
	clk.Advance(11 * time.Second)
	requireNone(t, ix, "10.64.0.5")
}

func TestIPReuseRace(t *testing.T) {
	// The new pod's Added event arrives before the old pod's Deleted event, or a
	// completed pod is still listed with the IP a new pod now has.
	ix, _ := newTestIndex(time.Minute)
	ix.UpsertPod(pod("uid-old", "old", 100, "10.64.0.2"))
	ix.UpsertPod(pod("uid-new", "new", 200, "10.64.0.2"))
	requirePod(t, ix, "10.64.0.2", "new")
	assert.Equal(t, 1, ix.Stats().ContestedIPs)

	// An update of the older pod does not steal the IP back.
	old := pod("uid-old", "old", 100, "10.64.0.2")
	old.Ready = false
	ix.UpsertPod(old)
	requirePod(t, ix, "10.64.0.2", "new")

	ix.DeletePod("uid-old")
	requirePod(t, ix, "10.64.0.2", "new")
	st := ix.Stats()
	assert.Equal(t, 0, st.ContestedIPs)
	assert.Equal(t, 0, st.Graves, "the IP never became free, so the old pod gets no grave")

	// The other order: the older pod is created last (events out of order after a relist).
	ix2, _ := newTestIndex(0)
	ix2.UpsertPod(pod("uid-new", "new", 200, "10.64.0.2"))
	ix2.UpsertPod(pod("uid-old", "old", 100, "10.64.0.2"))
	requirePod(t, ix2, "10.64.0.2", "new")
	// When the winner goes, the remaining claimant takes over.
	ix2.DeletePod("uid-new")
	requirePod(t, ix2, "10.64.0.2", "old")
}

func TestTerminatingPodLosesContestedIP(t *testing.T) {
	ix, _ := newTestIndex(0)
	a := pod("uid-a", "a", 300, "10.64.0.2")
	ix.UpsertPod(a)
	ix.UpsertPod(pod("uid-b", "b", 100, "10.64.0.2"))
	requirePod(t, ix, "10.64.0.2", "a")
	terminating := *a
	terminating.Terminating = true
	ix.UpsertPod(&terminating)
	requirePod(t, ix, "10.64.0.2", "b")
}

func TestPodIPChange(t *testing.T) {
	ix, clk := newTestIndex(5 * time.Second)
	ix.UpsertPod(pod("uid-1", "mover", 100, "10.64.0.2"))
	ix.UpsertPod(pod("uid-1", "mover", 100, "10.64.0.3"))
	requirePod(t, ix, "10.64.0.3", "mover")
	id := requirePod(t, ix, "10.64.0.2", "mover")
	assert.True(t, id.Deleted, "the old IP resolves only within the grace period")
	clk.Advance(6 * time.Second)
	requireNone(t, ix, "10.64.0.2")
	ix.Expire()
	assert.Equal(t, 1, ix.Stats().Workloads)
}

func TestUnchangedUpdateKeepsEntry(t *testing.T) {
	ix, _ := newTestIndex(0)
	ix.UpsertPod(pod("uid-1", "p", 100, "10.64.0.2"))
	before := ix.podByUID("uid-1")
	ix.UpsertPod(pod("uid-1", "p", 100, "10.64.0.2"))
	assert.Same(t, before, ix.podByUID("uid-1"))
	changed := pod("uid-1", "p", 100, "10.64.0.2")
	changed.Ready = false
	ix.UpsertPod(changed)
	assert.NotSame(t, before, ix.podByUID("uid-1"))
	id := requirePod(t, ix, "10.64.0.2", "p")
	assert.False(t, id.Ready)
	assert.Equal(t, int32(1), ix.podByUID("uid-1").owner.refs)
	assert.Equal(t, 1, ix.Stats().Workloads)
}

func TestReplacePods(t *testing.T) {
	ix, _ := newTestIndex(time.Minute)
	ix.UpsertPod(pod("uid-1", "stays", 1, "10.64.0.2"))
	ix.UpsertPod(pod("uid-2", "goes", 1, "10.64.0.3"))
	ix.ReplacePods([]*PodRecord{pod("uid-1", "stays", 1, "10.64.0.2"), pod("uid-3", "new", 1, "10.64.0.4")})
	requirePod(t, ix, "10.64.0.2", "stays")
	requirePod(t, ix, "10.64.0.4", "new")
	id := requirePod(t, ix, "10.64.0.3", "goes")
	assert.True(t, id.Deleted, "pods missing from a relist are deleted (with grace)")
	assert.Equal(t, 2, ix.Stats().Pods)
}

func TestNodeBeforeAndAfterPods(t *testing.T) {
	ix, _ := newTestIndex(0)
	ix.UpsertPod(pod("uid-1", "early", 1, "10.64.0.2"))
	id := requirePod(t, ix, "10.64.0.2", "early")
	assert.Equal(t, "node-a", id.NodeName)
	assert.Empty(t, id.Zone, "node not seen yet")
	assert.Equal(t, 0, ix.Stats().Nodes, "a node named by pods only is not counted")

	ix.UpsertNode(&NodeRecord{Name: "node-a", Zone: "z2", Region: "r1", IPs: ips("172.16.0.1")})
	id = requirePod(t, ix, "10.64.0.2", "early")
	assert.Equal(t, "z2", id.Zone)
	assert.Equal(t, "r1", id.Region)

	// Node address change.
	ix.UpsertNode(&NodeRecord{Name: "node-a", Zone: "z2", Region: "r1", IPs: ips("172.16.0.9")})
	requireNone(t, ix, "172.16.0.1")
	id, ok := lookup(t, ix, "172.16.0.9")
	require.True(t, ok)
	assert.Equal(t, KindNode, id.Kind)

	ix.DeleteNode("node-a")
	requireNone(t, ix, "172.16.0.9")
	requirePod(t, ix, "10.64.0.2", "early") // pods keep their node name
	ix.DeletePod("uid-1")
	assert.Empty(t, ix.nodes)

	ix.ReplaceNodes([]*NodeRecord{{Name: "n1", IPs: ips("172.16.0.2")}})
	ix.ReplaceNodes([]*NodeRecord{{Name: "n2", IPs: ips("172.16.0.3")}})
	requireNone(t, ix, "172.16.0.2")
	id, _ = lookup(t, ix, "172.16.0.3")
	assert.Equal(t, "n2", id.NodeName)
	assert.Equal(t, 1, ix.Stats().Nodes)
}

func TestConfiguredLabelsOnly(t *testing.T) {
	ix, _ := newTestIndex(0, "app.kubernetes.io/name", "team")
	p := pod("uid-1", "p", 1, "10.64.0.2")
	p.Labels = []string{"cart", ""}
	ix.UpsertPod(p)
	id := requirePod(t, ix, "10.64.0.2", "p")
	assert.Equal(t, []string{"cart", ""}, id.Labels)
	assert.Equal(t, []string{"app.kubernetes.io/name", "team"}, ix.LabelKeys())

	q := pod("uid-2", "q", 1, "10.64.0.3")
	q.Labels = []string{"cart", ""}
	ix.UpsertPod(q)
	assert.Equal(t, 1, ix.Stats().Workloads, "label values are interned with the workload")

	ix2, _ := newTestIndex(0)
	ix2.UpsertPod(p)
	id = requirePod(t, ix2, "10.64.0.2", "p")
	assert.Nil(t, id.Labels)
}

func TestInvalidRecordsAreIgnored(t *testing.T) {
	ix, _ := newTestIndex(0)
	ix.UpsertPod(pod("", "no-uid", 1, "10.64.0.2"))
	ix.UpsertNode(&NodeRecord{IPs: ips("172.16.0.1")})
	assert.Equal(t, Stats{}, ix.Stats())
	ix.DeletePod("unknown")
	ix.DeleteNode("unknown")
}

func TestReaderManyLookups(t *testing.T) {
	ix, _ := newTestIndex(0)
	ix.UpsertPod(pod("uid-1", "a", 1, "10.64.0.2"))
	ix.UpsertPod(pod("uid-2", "b", 1, "10.64.0.3"))
	var names []string
	ix.Read(func(r *Reader) {
		for _, a := range []string{"10.64.0.2", "10.64.0.3", "10.64.0.4"} {
			if id, ok := r.Lookup(netip.MustParseAddr(a)); ok {
				names = append(names, id.PodName)
			}
		}
	})
	assert.Equal(t, []string{"a", "b"}, names)
}

// Concurrent lookups and updates (run with -race).
func TestConcurrentLookupsAndUpdates(t *testing.T) {
	ix, clk := newTestIndex(time.Second)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := netip.MustParseAddr("10.64.0.2")
			for {
				select {
				case <-stop:
					return
				default:
				}
				if id, ok := ix.Lookup(a); ok && id.PodName == "" {
					t.Error("empty pod name")
					return
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		ix.UpsertPod(pod("uid-x", "x", int64(i), "10.64.0.2"))
		if i%3 == 0 {
			ix.DeletePod("uid-x")
			clk.Advance(400 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
}

func TestOwnerHashCollisions(t *testing.T) {
	ix, _ := newTestIndex(0)
	ix.testOwnerHash = func(string, Workload, []string) uint64 { return 7 } // one chain for all
	names := []string{"cart", "other", "third"}
	for i, n := range names {
		r := pod("uid-"+n, n, 1, "10.64.0."+string(rune('2'+i)))
		r.Workload.Name = n
		ix.UpsertPod(r)
	}
	require.Equal(t, 3, ix.Stats().Workloads)
	require.Len(t, ix.owners, 1)
	for _, n := range names {
		id := requirePod(t, ix, ix.podByUID("uid-"+n).ip4(), n)
		assert.Equal(t, n, id.Workload.Name)
	}
	// Unlink from the middle, the head and the tail of the chain.
	for _, n := range []string{"other", "third", "cart"} {
		ix.DeletePod("uid-" + n)
	}
	assert.Equal(t, 0, ix.Stats().Workloads)
	assert.Empty(t, ix.owners)
}

func TestUIDHashCollisions(t *testing.T) {
	ix, _ := newTestIndex(time.Minute)
	ix.hashUID = func(string) uint64 { return 42 } // every UID collides
	ix.UpsertPod(pod("uid-a", "a", 1, "10.64.0.2"))
	ix.UpsertPod(pod("uid-b", "b", 1, "10.64.0.3"))
	ix.UpsertPod(pod("uid-c", "c", 1, "10.64.0.4"))
	assert.Len(t, ix.pods, 1)
	assert.Len(t, ix.podsOverflow, 2)
	assert.Equal(t, 3, ix.Stats().Pods)
	for _, uid := range []string{"uid-a", "uid-b", "uid-c"} {
		require.NotNil(t, ix.podByUID(uid))
		assert.Equal(t, uid, ix.podByUID(uid).uid())
	}
	ix.UpsertPod(pod("uid-b", "b", 1, "10.64.0.5")) // update an overflowed pod
	requirePod(t, ix, "10.64.0.5", "b")
	ix.DeletePod("uid-a") // the slot holder
	ix.DeletePod("uid-c")
	assert.True(t, requirePod(t, ix, "10.64.0.2", "a").Deleted)
	requirePod(t, ix, "10.64.0.5", "b")
	assert.Equal(t, 1, ix.Stats().Pods)
	ix.ReplacePods(nil)
	assert.Equal(t, 0, ix.Stats().Pods)
}
