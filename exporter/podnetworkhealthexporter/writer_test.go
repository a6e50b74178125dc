// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

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
			Labels:          map[string]string{LabelManagedBy: LabelManagedByValue},
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
	all []writeResult
}

func (r *results) done(res writeResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, res)
}

func (r *results) get() []writeResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

func (r *results) keys() []string {
	var out []string
	for _, res := range r.get() {
		out = append(out, res.key)
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

func drained(w *writer) func() bool {
	return func() bool { return w.pendingCount() == 0 }
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
	w := newWriter(client, "", 1000, 1000, zap.NewNop(), res.done)
	defer w.stop()
	var taken []string // guarded by w.mu
	w.popped = func(key string) { taken = append(taken, key) }
	for i := range 200 {
		w.set(&desired{obj: testPNH(fmt.Sprintf("hb-%03d", i), "n"), reason: "heartbeat"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.run(ctx, workers)
	<-reached
	w.set(&desired{obj: testPNH("verdict", "n"), reason: "verdict"})
	pending := w.pendingByPriority()
	assert.Equal(t, 1, pending[writequeue.Verdict])
	assert.GreaterOrEqual(t, pending[writequeue.Heartbeat], 200-10, "at most 10 heartbeats written")
	close(release)
	require.Eventually(t, drained(w), 30*time.Second, 10*time.Millisecond)

	created := objectWrites(client, "create", "")
	require.Len(t, created, 201)
	w.mu.Lock()
	handedOut := slices.Index(taken, objectKey("ns", "verdict"))
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
		require.NoError(t, r.err)
	}
}

// Objects (create + status = 2 requests), node patches and Events share one budget.
func TestWriterOneBudgetForEveryKind(t *testing.T) {
	client := fake.NewSimpleClientset()
	var res results
	const qps, burst = 20, 2
	w := newWriter(client, "", qps, burst, zap.NewNop(), res.done)
	defer w.stop()
	var patches atomic.Int32
	for i := range 4 {
		w.set(&desired{obj: testPNH(fmt.Sprintf("o-%d", i), "n"), reason: "initial"})
		w.enqueue(nodeKey(fmt.Sprintf("node-%d", i)), writequeue.Verdict, func(context.Context) error {
			patches.Add(1)
			return nil
		}, "node_condition")
	}
	w.enqueue(w.eventKey(), writequeue.Event, func(context.Context) error { patches.Add(1); return nil }, "event")
	w.enqueue(w.eventKey(), writequeue.Event, func(context.Context) error { patches.Add(1); return nil }, "event")
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.run(ctx, 3)
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
	w := newWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.stop()
	noop := func(context.Context) error { return nil }
	w.set(&desired{obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}, reason: "delete", delete: true})
	w.set(&desired{obj: testPNH("hb", "n"), reason: "heartbeat"})
	w.set(&desired{obj: testPNH("lat", "n"), reason: "latency"})
	w.enqueue(podKey("ns", "p"), writequeue.Update, noop, "readiness_gate")
	ev := w.eventKey()
	w.enqueue(ev, writequeue.Event, noop, "event")
	w.enqueue(nodeKey("n1"), writequeue.Verdict, noop, "node_condition")
	w.set(&desired{obj: testPNH("flip", "n"), reason: "heartbeat"}, writequeue.Verdict)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{nodeKey("n1"), objectKey("ns", "flip"), ev, objectKey("ns", "lat"), podKey("ns", "p"), objectKey("ns", "hb"), objectKey("ns", "gone")}, res.keys())
	got := res.get()
	assert.Equal(t, writequeue.Verdict, got[1].priority)
	assert.Equal(t, "heartbeat", got[1].reason)
	assert.Nil(t, got[6].status, "deleted")
	assert.Equal(t, "n", got[5].status.ObservedFromNode)
}

// Only the latest state of a key is written, and an identical status is never rewritten.
func TestWriterCoalescesAndSkipsIdenticalStatus(t *testing.T) {
	existing := testPNH("same", "n")
	client := fake.NewSimpleClientset(existing)
	var res results
	w := newWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.stop()
	w.startInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.synced(ctx))

	w.set(&desired{obj: testPNH("same", "n"), reason: "heartbeat"})
	w.set(&desired{obj: testPNH("new", "n1"), reason: "initial"})
	w.set(&desired{obj: testPNH("new", "n2"), reason: "heartbeat"})
	assert.Equal(t, 2, w.pendingCount())
	w.run(ctx, 2)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"new"}, objectWrites(client, "create", ""))
	assert.Equal(t, []string{"new"}, objectWrites(client, "update", "status"))
	got, err := client.NetpulseV1alpha1().PodNetworkHealths("ns").Get(ctx, "new", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "n2", got.Status.ObservedFromNode)
	for _, r := range res.get() {
		if r.key == objectKey("ns", "new") {
			assert.Equal(t, "heartbeat", r.reason, "the newest state is written")
			assert.Equal(t, writequeue.Update, r.priority, "with the more urgent priority of the two")
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
	w := newWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.stop()
	w.startInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.synced(ctx))
	w.set(&desired{obj: testPNH("c", "n"), reason: "verdict"})
	start := time.Now()
	w.run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	got := res.get()
	require.Len(t, got, 2)
	assert.True(t, apierrors.IsConflict(got[0].err), "%v", got[0].err)
	assert.NoError(t, got[1].err)
	assert.Equal(t, "n", got[1].status.ObservedFromNode)
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
	w := newWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.stop()
	w.startInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.synced(ctx))
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
	w.set(&desired{obj: testPNH("s", "new"), reason: "verdict"})
	w.run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	got := res.get()
	require.Len(t, got, 2, "one conflict, then the write from the API's copy")
	assert.True(t, apierrors.IsConflict(got[0].err))
	require.NoError(t, got[1].err)
	assert.Equal(t, "new", got[1].status.ObservedFromNode)
}

// Failed writes back off per key: 200ms, 400ms, ...
func TestWriterBacksOffPerKey(t *testing.T) {
	client := fake.NewSimpleClientset()
	var res results
	w := newWriter(client, "", 1000, 10, zap.NewNop(), res.done)
	defer w.stop()
	var mu sync.Mutex
	var at []time.Time
	w.enqueue(nodeKey("n"), writequeue.Verdict, func(context.Context) error {
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
	w.run(ctx, 2)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, at, 3)
	assert.GreaterOrEqual(t, at[1].Sub(at[0]), retryBase)
	assert.GreaterOrEqual(t, at[2].Sub(at[1]), 2*retryBase)
	got := res.get()
	require.Len(t, got, 3)
	assert.Error(t, got[0].err)
	assert.Error(t, got[1].err)
	assert.NoError(t, got[2].err)
	w.mu.Lock()
	assert.Empty(t, w.failures)
	w.mu.Unlock()
}

// A write that fails after a newer state was set never brings the older state back.
func TestWriterStaleRetryKeepsNewerState(t *testing.T) {
	client := fake.NewSimpleClientset()
	var res results
	w := newWriter(client, "", 1000, 10, zap.NewNop(), res.done)
	defer w.stop()
	started, fail := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var applied []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, s)
	}
	w.enqueue(nodeKey("n"), writequeue.Verdict, func(context.Context) error {
		record("v1")
		close(started)
		<-fail
		return errors.New("boom")
	}, "node_condition")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.run(ctx, 2)
	<-started
	w.enqueue(nodeKey("n"), writequeue.Heartbeat, func(context.Context) error { record("v2"); return nil }, "node_condition")
	close(fail)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"v1", "v2"}, applied)
	got := res.get()
	require.Len(t, got, 2)
	assert.Equal(t, writequeue.Verdict, got[1].priority, "the newer state inherits the failed verdict's urgency")
}

// The end of a leadership term gives an interrupted write back without back-off and
// without reporting a failure; the next term writes it.
func TestWriterPendingSurvivesTerms(t *testing.T) {
	client := fake.NewSimpleClientset()
	var res results
	w := newWriter(client, "", 1000, 10, zap.NewNop(), res.done)
	defer w.stop()
	var calls atomic.Int32
	started := make(chan struct{})
	w.enqueue(nodeKey("n"), writequeue.Verdict, func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, "node_condition")
	term1, end1 := context.WithCancel(context.Background())
	w.run(term1, 2)
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
	w.run(term2, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	got := res.get()
	require.Len(t, got, 1)
	assert.NoError(t, got[0].err)
}

// stop ends workers whose context never ends (goleak in TestMain checks), twice is fine.
func TestWriterStopEndsWorkers(t *testing.T) {
	w := newWriter(fake.NewSimpleClientset(), "", 5, 10, zap.NewNop(), func(writeResult) {})
	w.startInformer()
	w.run(context.Background(), 4)
	w.set(&desired{obj: testPNH("x", "n"), reason: "heartbeat"})
	w.stop()
	w.stop()
	w.run(context.Background(), 1) // after stop: starts nothing
}

// The bound drops the least urgent writes first and counts them; verdicts stay.
func TestWriterBoundCountsDrops(t *testing.T) {
	w := newWriter(fake.NewSimpleClientset(), "", 5, 10, zap.NewNop(), func(writeResult) {})
	defer w.stop()
	w.queue = writequeue.New[*writeItem](writequeue.MaxItems(2))
	noop := func(context.Context) error { return nil }
	w.set(&desired{obj: testPNH("a", "n"), reason: "heartbeat"})
	w.enqueue(nodeKey("n"), writequeue.Verdict, noop, "node_condition")
	w.set(&desired{obj: testPNH("b", "n"), reason: "verdict"}) // evicts the heartbeat
	w.enqueue(w.eventKey(), writequeue.Event, noop, "event")   // refused: only verdicts left
	var dropped [writequeue.NumPriorities]uint64
	dropped[writequeue.Event], dropped[writequeue.Heartbeat] = 1, 1
	assert.Equal(t, dropped, w.droppedByPriority())
	var pending [writequeue.NumPriorities]int
	pending[writequeue.Verdict] = 2
	assert.Equal(t, pending, w.pendingByPriority())
}

func TestWriterHeartbeatInterval(t *testing.T) {
	w := newWriter(fake.NewSimpleClientset(), "", 5, 10, zap.NewNop(), func(writeResult) {})
	defer w.stop()
	assert.Equal(t, 10*time.Minute, w.heartbeatInterval(10*time.Minute, 200))
	assert.Equal(t, 4000*time.Second, w.heartbeatInterval(10*time.Minute, 10_000))
}

// A restate changes the existing object's status in place (keeping its figures) and writes
// nothing for an object that does not exist.
func TestWriterRestatesExistingObjectOnly(t *testing.T) {
	existing := testPNH("kept", "n")
	existing.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonProbesSucceeded}}
	existing.Status.LossRatio = "0.25"
	client := fake.NewSimpleClientset(existing)
	var res results
	w := newWriter(client, "", 1000, 1, zap.NewNop(), res.done)
	defer w.stop()
	w.startInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.synced(ctx))

	now := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	mark := func(st *v1alpha1.PodNetworkHealthStatus) { markObserverSilent(st, "ns/src", now) }
	w.set(&desired{obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kept"}}, reason: "observer", restate: mark})
	w.set(&desired{obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "absent"}}, reason: "observer", restate: mark})
	w.run(ctx, 1)
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
	w := newWriter(client, "", 1000, 1000, zap.NewNop(), res.done)
	defer w.stop()
	defer unblock() // before stop: the blocked worker must return
	for i := range 3 {
		w.set(&desired{obj: testPNH(fmt.Sprintf("hb-%d", i), "n"), reason: "heartbeat"})
		w.set(&desired{obj: testPNH(fmt.Sprintf("v-%d", i), "n"), reason: "verdict"})
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	require.False(t, w.flush(short, writequeue.Event), "no workers: nothing gets written")

	ctx, cancel := context.WithCancel(context.Background())
	w.run(ctx, 1)
	fctx, cancelF := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelF()
	require.True(t, w.flush(fctx, writequeue.Event))
	pending := w.pendingByPriority()
	assert.Zero(t, pending[writequeue.Verdict])
	assert.Equal(t, 3, pending[writequeue.Heartbeat], "heartbeats are not waited for")
	var done []string
	for _, r := range res.get() {
		done = append(done, r.key)
	}
	assert.Equal(t, []string{objectKey("ns", "v-0"), objectKey("ns", "v-1"), objectKey("ns", "v-2")}, done)
	unblock()
	cancel()
}
