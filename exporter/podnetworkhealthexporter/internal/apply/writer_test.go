// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/netpulse/netpulse/api/client/clientset/versioned/fake"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

func testPNH(name, node string) *v1alpha1.PodNetworkHealth {
	return &v1alpha1.PodNetworkHealth{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name,
			Labels:          map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "src", UID: "uid-src"}},
		},
		Spec: v1alpha1.PodNetworkHealthSpec{
			SourcePodRef:  v1alpha1.PodReference{Namespace: "ns", Name: "src", UID: "uid-src"},
			TargetKind:    v1alpha1.TargetKindNode,
			TargetNodeRef: &v1alpha1.NodeReference{Name: name},
		},
		Status: v1alpha1.PodNetworkHealthStatus{Reachability: v1alpha1.Reachable, ObservedFromNode: node},
	}
}

// results collects what the writer reports, in order.
type results struct {
	mu  sync.Mutex
	all []WriteResult
}

func (r *results) done(res WriteResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, res)
}

func (r *results) get() []WriteResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

func (r *results) keys() []string {
	var out []string
	for _, res := range r.get() {
		out = append(out, res.Key)
	}
	return out
}

// objectWrites lists the names of the objects created (or status-updated) in order.
func objectWrites(client *fake.Clientset, verb, subresource string) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetVerb() != verb || a.GetResource().Resource != "podnetworkhealths" || a.GetSubresource() != subresource {
			continue
		}
		out = append(out, a.(interface{ GetObject() runtime.Object }).GetObject().(*v1alpha1.PodNetworkHealth).Name)
	}
	return out
}

func drained(w *Writer) func() bool {
	return func() bool { return w.PendingCount() == 0 }
}

func TestPriorityOfReason(t *testing.T) {
	for reason, want := range map[string]writequeue.Priority{
		"verdict": writequeue.Verdict, "observer": writequeue.Verdict,
		"initial": writequeue.Update, "latency": writequeue.Update, "loss": writequeue.Update,
		"heartbeat": writequeue.Heartbeat, "delete": writequeue.Cleanup, "something": writequeue.Update,
	} {
		assert.Equal(t, want, priorityOf(reason), reason)
	}
}

// 200 heartbeats are pending and being written; a verdict set meanwhile is written next
// (after at most the writes the workers already hold), not after the backlog.
func TestWriterVerdictOvertakesHeartbeatBacklog(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			testVerdictOvertakesBacklog(t, workers)
		})
	}
}

func testVerdictOvertakesBacklog(t *testing.T, workers int) {
	client := fake.NewSimpleClientset()
	reached, release := make(chan struct{}), make(chan struct{})
	var creates atomic.Int32
	client.PrependReactor("create", "podnetworkhealths", func(clienttesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) == 10 {
			close(reached)
			<-release // the fake client is locked meanwhile: no other request proceeds
		}
		return false, nil, nil
	})
	var res results
	// A budget that never makes a worker wait between taking an item and writing it, so the
	// order of the requests is the order the queue handed the items out.
	w := NewWriter(client, "", 1000, 1000, zap.NewNop(), res.done)
	defer w.Stop()
	var taken []string // guarded by w.mu
	w.popped = func(key string) { taken = append(taken, key) }
	for i := range 200 {
		w.Set(&Desired{Obj: testPNH(fmt.Sprintf("hb-%03d", i), "n"), Reason: "heartbeat"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Run(ctx, workers)
	<-reached
	w.Set(&Desired{Obj: testPNH("verdict", "n"), Reason: "verdict"})
	pending := w.PendingByPriority()
	assert.Equal(t, 1, pending[writequeue.Verdict])
	assert.GreaterOrEqual(t, pending[writequeue.Heartbeat], 200-10, "at most 10 heartbeats written")
	close(release)
	require.Eventually(t, drained(w), 30*time.Second, 10*time.Millisecond)

	created := objectWrites(client, "create", "")
	require.Len(t, created, 201)
	w.mu.Lock()
	handedOut := slices.Index(taken, ObjectKey("ns", "verdict"))
	w.mu.Unlock()
	at := slices.Index(created, "verdict")
	t.Logf("verdict taken as item %d, created as request %d of %d", handedOut+1, at+1, len(created))
	// The 10 heartbeats taken before the verdict existed, plus the one each other worker
	// holds; the other ~190 come after it.
	assert.LessOrEqual(t, handedOut, 10+(workers-1))
	if workers == 1 {
		// With one worker the requests follow exactly. (With more, the fake client's lock
		// decides which worker's request goes first, so only the hand-out order is exact.)
		assert.Equal(t, 10, at)
		assert.Equal(t, 10, slices.Index(objectWrites(client, "update", "status"), "verdict"))
	}
	for _, r := range res.get() {
		require.NoError(t, r.Err)
	}
}

// Objects (create + status = 2 requests), node patches and Events share one budget.
func TestWriterOneBudgetForEveryKind(t *testing.T) {
	client := fake.NewSimpleClientset()
	var res results
	const qps, burst = 20, 2
	w := NewWriter(client, "", qps, burst, zap.NewNop(), res.done)
	defer w.Stop()
	var patches atomic.Int32
	for i := range 4 {
		w.Set(&Desired{Obj: testPNH(fmt.Sprintf("o-%d", i), "n"), Reason: "initial"})
		w.Enqueue(NodeKey(fmt.Sprintf("node-%d", i)), writequeue.Verdict, func(context.Context) error {
			patches.Add(1)
			return nil
		}, "node_condition")
	}
	w.Enqueue(w.EventKey(), writequeue.Event, func(context.Context) error { patches.Add(1); return nil }, "event")
	w.Enqueue(w.EventKey(), writequeue.Event, func(context.Context) error { patches.Add(1); return nil }, "event")
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Run(ctx, 3)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	elapsed := time.Since(start)
	requests := len(objectWrites(client, "create", "")) + len(objectWrites(client, "update", "status")) + int(patches.Load())
	require.Equal(t, 4*2+4+2, requests)
	minimum := time.Duration(float64(requests-burst) / qps * float64(time.Second))
	t.Logf("%d requests in %v (budget %d/s, burst %d: at least %v)", requests, elapsed, qps, burst, minimum)
	assert.GreaterOrEqual(t, elapsed, minimum-5*time.Millisecond)
	assert.Len(t, res.get(), 4+4+2)
}

// With one worker the order is exactly: verdict, event, update, heartbeat, cleanup; FIFO
// within a priority, whatever the kind of write.
func TestWriterOrdersEveryKindByPriority(t *testing.T) {
	client := fake.NewSimpleClientset()
	var res results
	w := NewWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.Stop()
	noop := func(context.Context) error { return nil }
	w.Set(&Desired{Obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}, Reason: "delete", Delete: true})
	w.Set(&Desired{Obj: testPNH("hb", "n"), Reason: "heartbeat"})
	w.Set(&Desired{Obj: testPNH("lat", "n"), Reason: "latency"})
	w.Enqueue(PodKey("ns", "p"), writequeue.Update, noop, "readiness_gate")
	ev := w.EventKey()
	w.Enqueue(ev, writequeue.Event, noop, "event")
	w.Enqueue(NodeKey("n1"), writequeue.Verdict, noop, "node_condition")
	w.Set(&Desired{Obj: testPNH("flip", "n"), Reason: "heartbeat"}, writequeue.Verdict)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{NodeKey("n1"), ObjectKey("ns", "flip"), ev, ObjectKey("ns", "lat"), PodKey("ns", "p"), ObjectKey("ns", "hb"), ObjectKey("ns", "gone")}, res.keys())
	got := res.get()
	assert.Equal(t, writequeue.Verdict, got[1].Priority)
	assert.Equal(t, "heartbeat", got[1].Reason)
	assert.Nil(t, got[6].Status, "deleted")
	assert.Equal(t, "n", got[5].Status.ObservedFromNode)
}

// Only the latest state of a key is written, and an identical status is never rewritten.
func TestWriterCoalescesAndSkipsIdenticalStatus(t *testing.T) {
	existing := testPNH("same", "n")
	client := fake.NewSimpleClientset(existing)
	var res results
	w := NewWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.Stop()
	w.StartInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.Synced(ctx))

	w.Set(&Desired{Obj: testPNH("same", "n"), Reason: "heartbeat"})
	w.Set(&Desired{Obj: testPNH("new", "n1"), Reason: "initial"})
	w.Set(&Desired{Obj: testPNH("new", "n2"), Reason: "heartbeat"})
	assert.Equal(t, 2, w.PendingCount())
	w.Run(ctx, 2)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"new"}, objectWrites(client, "create", ""))
	assert.Equal(t, []string{"new"}, objectWrites(client, "update", "status"))
	got, err := client.NetpulseV1alpha1().PodNetworkHealths("ns").Get(ctx, "new", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "n2", got.Status.ObservedFromNode)
	for _, r := range res.get() {
		if r.Key == ObjectKey("ns", "new") {
			assert.Equal(t, "heartbeat", r.Reason, "the newest state is written")
			assert.Equal(t, writequeue.Update, r.Priority, "with the more urgent priority of the two")
		}
	}
}

// A conflict is retried after back-off, re-reading the object from the informer; every
// request takes a token, the retried ones too.
func TestWriterRetriesConflict(t *testing.T) {
	client := fake.NewSimpleClientset()
	var conflicts atomic.Int32
	client.PrependReactor("update", "podnetworkhealths", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts.Add(1) == 1 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "netpulse.io", Resource: "podnetworkhealths"}, "c", errors.New("stale"))
		}
		return false, nil, nil
	})
	var res results
	w := NewWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.Stop()
	w.StartInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.Synced(ctx))
	w.Set(&Desired{Obj: testPNH("c", "n"), Reason: "verdict"})
	start := time.Now()
	w.Run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	got := res.get()
	require.Len(t, got, 2)
	assert.True(t, apierrors.IsConflict(got[0].Err), "%v", got[0].Err)
	assert.NoError(t, got[1].Err)
	assert.Equal(t, "n", got[1].Status.ObservedFromNode)
	assert.GreaterOrEqual(t, time.Since(start), retryBase)
	assert.Len(t, objectWrites(client, "create", ""), 1, "the retry found the object in the informer (or via AlreadyExists)")
}

// After a conflict the retry reads the object from the API: an informer that cannot catch
// up (its watch refused after an API server restart) would otherwise conflict forever.
func TestWriterConflictRetryReadsTheAPI(t *testing.T) {
	existing := testPNH("s", "old")
	existing.ResourceVersion = "1"
	client := fake.NewSimpleClientset(existing)
	var res results
	w := NewWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.Stop()
	w.StartInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.Synced(ctx))
	// The informer keeps a copy the API no longer has: updates from it conflict.
	client.PrependReactor("update", "podnetworkhealths", func(a clienttesting.Action) (bool, runtime.Object, error) {
		o := a.(clienttesting.UpdateAction).GetObject().(*v1alpha1.PodNetworkHealth)
		if o.ResourceVersion == "1" {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "netpulse.io", Resource: "podnetworkhealths"}, o.Name, errors.New("stale"))
		}
		return false, nil, nil
	})
	client.PrependReactor("get", "podnetworkhealths", func(clienttesting.Action) (bool, runtime.Object, error) {
		fresh := testPNH("s", "old")
		fresh.ResourceVersion = "2"
		return true, fresh, nil
	})
	w.Set(&Desired{Obj: testPNH("s", "new"), Reason: "verdict"})
	w.Run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	got := res.get()
	require.Len(t, got, 2, "one conflict, then the write from the API's copy")
	assert.True(t, apierrors.IsConflict(got[0].Err))
	require.NoError(t, got[1].Err)
	assert.Equal(t, "new", got[1].Status.ObservedFromNode)
}

// Failed writes back off per key: 200ms, 400ms, ...
func TestWriterBacksOffPerKey(t *testing.T) {
	client := fake.NewSimpleClientset()
	var res results
	w := NewWriter(client, "", 1000, 10, zap.NewNop(), res.done)
	defer w.Stop()
	var mu sync.Mutex
	var at []time.Time
	w.Enqueue(NodeKey("n"), writequeue.Verdict, func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if len(at) < 3 {
			return errors.New("boom")
		}
		return nil
	}, "node_condition")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Run(ctx, 2)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, at, 3)
	assert.GreaterOrEqual(t, at[1].Sub(at[0]), retryBase)
	assert.GreaterOrEqual(t, at[2].Sub(at[1]), 2*retryBase)
	got := res.get()
	require.Len(t, got, 3)
	assert.Error(t, got[0].Err)
	assert.Error(t, got[1].Err)
	assert.NoError(t, got[2].Err)
	assert.Zero(t, w.retries.NumRequeues(NodeKey("n")), "the back-off is forgotten once the write succeeds")
}

// A write that fails after a newer state was set never brings the older state back.
func TestWriterStaleRetryKeepsNewerState(t *testing.T) {
	client := fake.NewSimpleClientset()
	var res results
	w := NewWriter(client, "", 1000, 10, zap.NewNop(), res.done)
	defer w.Stop()
	started, fail := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var applied []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, s)
	}
	w.Enqueue(NodeKey("n"), writequeue.Verdict, func(context.Context) error {
		record("v1")
		close(started)
		<-fail
		return errors.New("boom")
	}, "node_condition")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Run(ctx, 2)
	<-started
	w.Enqueue(NodeKey("n"), writequeue.Heartbeat, func(context.Context) error { record("v2"); return nil }, "node_condition")
	close(fail)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"v1", "v2"}, applied)
	got := res.get()
	require.Len(t, got, 2)
	assert.Equal(t, writequeue.Verdict, got[1].Priority, "the newer state inherits the failed verdict's urgency")
}

// The end of a leadership term gives an interrupted write back without back-off and
// without reporting a failure; the next term writes it.
func TestWriterPendingSurvivesTerms(t *testing.T) {
	client := fake.NewSimpleClientset()
	var res results
	w := NewWriter(client, "", 1000, 10, zap.NewNop(), res.done)
	defer w.Stop()
	var calls atomic.Int32
	started := make(chan struct{})
	w.Enqueue(NodeKey("n"), writequeue.Verdict, func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, "node_condition")
	term1, end1 := context.WithCancel(context.Background())
	w.Run(term1, 2)
	<-started
	end1()
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.queue.InFlight() == 0 && w.queue.Len() == 1
	}, 10*time.Second, 5*time.Millisecond)
	assert.Empty(t, res.get())

	term2, end2 := context.WithCancel(context.Background())
	defer end2()
	w.Run(term2, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	got := res.get()
	require.Len(t, got, 1)
	assert.NoError(t, got[0].Err)
}

// Stop ends workers whose context never ends (goleak in TestMain checks), twice is fine.
func TestWriterStopEndsWorkers(t *testing.T) {
	w := NewWriter(fake.NewSimpleClientset(), "", 5, 10, zap.NewNop(), func(WriteResult) {})
	w.StartInformer()
	w.Run(context.Background(), 4)
	w.Set(&Desired{Obj: testPNH("x", "n"), Reason: "heartbeat"})
	w.Stop()
	w.Stop()
	w.Run(context.Background(), 1) // after stop: starts nothing
}

// The bound drops the least urgent writes first and counts them; verdicts stay.
func TestWriterBoundCountsDrops(t *testing.T) {
	w := NewWriter(fake.NewSimpleClientset(), "", 5, 10, zap.NewNop(), func(WriteResult) {})
	defer w.Stop()
	w.queue = writequeue.New[*writeItem](writequeue.MaxItems(2))
	noop := func(context.Context) error { return nil }
	w.Set(&Desired{Obj: testPNH("a", "n"), Reason: "heartbeat"})
	w.Enqueue(NodeKey("n"), writequeue.Verdict, noop, "node_condition")
	w.Set(&Desired{Obj: testPNH("b", "n"), Reason: "verdict"}) // evicts the heartbeat
	w.Enqueue(w.EventKey(), writequeue.Event, noop, "event")   // refused: only verdicts left
	var dropped [writequeue.NumPriorities]uint64
	dropped[writequeue.Event], dropped[writequeue.Heartbeat] = 1, 1
	assert.Equal(t, dropped, w.DroppedByPriority())
	var pending [writequeue.NumPriorities]int
	pending[writequeue.Verdict] = 2
	assert.Equal(t, pending, w.PendingByPriority())
}

func TestWriterHeartbeatInterval(t *testing.T) {
	w := NewWriter(fake.NewSimpleClientset(), "", 5, 10, zap.NewNop(), func(WriteResult) {})
	defer w.Stop()
	assert.Equal(t, 10*time.Minute, w.HeartbeatInterval(10*time.Minute, 200))
	assert.Equal(t, 4000*time.Second, w.HeartbeatInterval(10*time.Minute, 10_000))
}

// A restate changes the existing object's status in place (keeping its figures) and writes
// nothing for an object that does not exist.
func TestWriterRestatesExistingObjectOnly(t *testing.T) {
	existing := testPNH("kept", "n")
	existing.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonProbesSucceeded}}
	existing.Status.LossRatio = "0.25"
	client := fake.NewSimpleClientset(existing)
	var res results
	w := NewWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.Stop()
	w.StartInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.Synced(ctx))

	now := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	// What the exporter's markObserverSilent does to the Reachable condition (status.go).
	mark := func(st *v1alpha1.PodNetworkHealthStatus) {
		st.Reachability = v1alpha1.ReachabilityUnknown
		for i := range st.Conditions {
			c := &st.Conditions[i]
			c.Status, c.Reason, c.LastTransitionTime = metav1.ConditionUnknown, v1alpha1.ReasonObserverSilent, metav1.NewTime(now)
		}
	}
	w.Set(&Desired{Obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kept"}}, Reason: "observer", Restate: mark})
	w.Set(&Desired{Obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "absent"}}, Reason: "observer", Restate: mark})
	w.Run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	assert.Empty(t, objectWrites(client, "create", ""), "a restate never creates")
	assert.Equal(t, []string{"kept"}, objectWrites(client, "update", "status"))
	got, err := client.NetpulseV1alpha1().PodNetworkHealths("ns").Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.ReachabilityUnknown, got.Status.Reachability)
	assert.Equal(t, "0.25", got.Status.LossRatio.String(), "the last figures are kept")
	require.Len(t, got.Status.Conditions, 1)
	assert.Equal(t, v1alpha1.ReasonObserverSilent, got.Status.Conditions[0].Reason)
	assert.Equal(t, metav1.ConditionUnknown, got.Status.Conditions[0].Status)
	assert.Equal(t, now, got.Status.Conditions[0].LastTransitionTime.Time.UTC())
}

// On shutdown a leader waits for its verdicts and Events, not for heartbeats; without
// running workers (not leading) nothing is waited for.
func TestWriterFlushWaitsForVerdictsOnly(t *testing.T) {
	client := fake.NewSimpleClientset()
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	client.PrependReactor("create", "podnetworkhealths", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if o := a.(clienttesting.CreateAction).GetObject().(*v1alpha1.PodNetworkHealth); strings.HasPrefix(o.Name, "hb-") {
			<-release // a heartbeat that does not get through (the fake client stays locked)
		}
		return false, nil, nil
	})
	var res results
	w := NewWriter(client, "", 1000, 1000, zap.NewNop(), res.done)
	defer w.Stop()
	defer unblock() // before stop: the blocked worker must return
	for i := range 3 {
		w.Set(&Desired{Obj: testPNH(fmt.Sprintf("hb-%d", i), "n"), Reason: "heartbeat"})
		w.Set(&Desired{Obj: testPNH(fmt.Sprintf("v-%d", i), "n"), Reason: "verdict"})
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	require.False(t, w.Flush(short, writequeue.Event), "no workers: nothing gets written")

	ctx, cancel := context.WithCancel(context.Background())
	w.Run(ctx, 1)
	fctx, cancelF := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelF()
	require.True(t, w.Flush(fctx, writequeue.Event))
	pending := w.PendingByPriority()
	assert.Zero(t, pending[writequeue.Verdict])
	assert.Equal(t, 3, pending[writequeue.Heartbeat], "heartbeats are not waited for")
	var done []string
	for _, r := range res.get() {
		done = append(done, r.Key)
	}
	assert.Equal(t, []string{ObjectKey("ns", "v-0"), ObjectKey("ns", "v-1"), ObjectKey("ns", "v-2")}, done)
	unblock()
	cancel()
}

// A shard's writer sees only its own objects (what it resumes from and prunes), labels what
// it writes, and adopts an object of the same name left unlabelled by an unsharded writer.
func TestWriterShardLabels(t *testing.T) {
	unlabelled := testPNH("old", "n")
	otherShard := testPNH("theirs", "n")
	otherShard.Labels[v1alpha1.LabelShard] = "0-of-2"
	client := fake.NewSimpleClientset(unlabelled, otherShard)
	var res results
	w := NewWriter(client, "", 1000, 10, zap.NewNop(), res.done, WithObjectLabels(map[string]string{v1alpha1.LabelShard: "1-of-2"}))
	defer w.Stop()
	w.StartInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.Synced(ctx))
	_, err := w.lister.PodNetworkHealths("ns").Get("theirs")
	require.True(t, apierrors.IsNotFound(err), "another shard's object is not this writer's")
	_, err = w.lister.PodNetworkHealths("ns").Get("old")
	require.True(t, apierrors.IsNotFound(err), "nor, until adopted, an unlabelled one")

	adopt := testPNH("old", "n2")
	w.Set(&Desired{Obj: adopt, Reason: "verdict"})
	w.Set(&Desired{Obj: testPNH("new", "n"), Reason: "initial"})
	w.Run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	for _, name := range []string{"old", "new"} {
		got, err := client.NetpulseV1alpha1().PodNetworkHealths("ns").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "1-of-2", got.Labels[v1alpha1.LabelShard], name)
		assert.Equal(t, v1alpha1.LabelManagedByValue, got.Labels[v1alpha1.LabelManagedBy], name)
		assert.Equal(t, map[string]string{"old": "n2", "new": "n"}[name], got.Status.ObservedFromNode, name)
	}
	got, err := client.NetpulseV1alpha1().PodNetworkHealths("ns").Get(ctx, "theirs", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "0-of-2", got.Labels[v1alpha1.LabelShard], "untouched")
	for _, r := range res.get() {
		assert.NoError(t, r.Err, r.Key)
	}
}
