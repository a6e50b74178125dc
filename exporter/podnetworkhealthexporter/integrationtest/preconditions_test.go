// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
)

// apiProxy forwards a writer's requests to the control plane as admin, and can run a
// function just before it forwards a request: another writer's write landing between what
// the writer read and what it sends.
type apiProxy struct {
	srv    *httptest.Server
	mu     sync.Mutex
	before func(r *http.Request) // run once, on the first request it returns true for
	match  func(r *http.Request) bool
	count  func(r *http.Request) // every request
}

func newAPIProxy(t *testing.T) *apiProxy {
	t.Helper()
	target, err := url.Parse(cp.URL)
	require.NoError(t, err)
	tr, err := rest.TransportFor(cp.Config)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = tr
	rp.FlushInterval = -1 // watches stream
	p := &apiProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		var run func(*http.Request)
		if p.match != nil && p.match(r) {
			run, p.match, p.before = p.before, nil, nil
		}
		count := p.count
		p.mu.Unlock()
		if count != nil {
			count(r)
		}
		if run != nil {
			run(r)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// onNext runs fn before forwarding the next request matching match.
func (p *apiProxy) onNext(match func(*http.Request) bool, fn func(*http.Request)) {
	p.mu.Lock()
	p.match, p.before = match, fn
	p.mu.Unlock()
}

// onEvery runs fn before forwarding every request.
func (p *apiProxy) onEvery(fn func(*http.Request)) {
	p.mu.Lock()
	p.count = fn
	p.mu.Unlock()
}

func (p *apiProxy) client(t *testing.T) versioned.Interface {
	c, err := versioned.NewForConfig(&rest.Config{Host: p.srv.URL, QPS: 50, Burst: 100})
	require.NoError(t, err)
	return c
}

// shardWriter is one gateway shard's apply.Writer (index-of-2) through proxy.
type shardWriter struct {
	*apply.Writer
	mu      sync.Mutex
	results []apply.WriteResult
}

func startShardWriter(t *testing.T, client versioned.Interface, ns, label string) *shardWriter {
	t.Helper()
	sw := &shardWriter{}
	sw.Writer = apply.NewWriter(client, ns, 50, 50, zap.NewNop(), func(r apply.WriteResult) {
		sw.mu.Lock()
		sw.results = append(sw.results, r)
		sw.mu.Unlock()
	}, apply.WithObjectLabels(map[string]string{v1alpha1.LabelShard: label}))
	sw.StartInformer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.True(t, sw.Synced(ctx))
	run, stop := context.WithCancel(context.Background())
	sw.Run(run, 1)
	t.Cleanup(func() { stop(); sw.Stop() })
	return sw
}

// result waits for the writer's next result of key after n earlier ones.
func (sw *shardWriter) resultAfter(t *testing.T, key string, n int) apply.WriteResult {
	t.Helper()
	var got apply.WriteResult
	require.Eventually(t, func() bool {
		sw.mu.Lock()
		defer sw.mu.Unlock()
		seen := 0
		for _, r := range sw.results {
			if r.Key != key || !final(r) {
				continue
			}
			if seen++; seen > n {
				got = r
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "no final result for %s", key)
	return got
}

// final: the write is done (written, or left for good); not a failure to be retried.
func final(r apply.WriteResult) bool { return r.Err == nil || r.NotOurs || r.Rejected }

func (sw *shardWriter) count(key string) int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	n := 0
	for _, r := range sw.results {
		if r.Key == key && final(r) {
			n++
		}
	}
	return n
}

// pairObject is the object of a pair from src (a real pod: the garbage collector removes
// objects whose owner does not exist) to the target pod "db-0" of uid targetUID: the name
// omits the target's UID, so two pods called db-0 share it.
func pairObject(src *corev1Pod, targetUID string, reach v1alpha1.Reachability) *v1alpha1.PodNetworkHealth {
	return &v1alpha1.PodNetworkHealth{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: src.Namespace, Name: src.Name + "-to-db-0",
			Labels:          map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: src.Name, UID: src.UID}},
		},
		Spec: v1alpha1.PodNetworkHealthSpec{
			SourcePodRef: v1alpha1.PodReference{Namespace: src.Namespace, Name: src.Name, UID: src.UID},
			TargetKind:   v1alpha1.TargetKindPod,
			TargetPodRef: &v1alpha1.PodReference{Namespace: src.Namespace, Name: "db-0", UID: types.UID(targetUID)},
		},
		Status: v1alpha1.PodNetworkHealthStatus{Reachability: reach},
	}
}

type corev1Pod struct {
	Namespace, Name string
	UID             types.UID
}

func isDeleteOf(name string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/podnetworkhealths/"+name)
	}
}

// Issue 40, item 5: object names omit the target's UID and node, so when db-0 is recreated
// on a node of shard 1 while shard 0 still holds the old db-0's pair, both shards want the
// object of one name. Shard 0 decided to delete its pair's object (the old db-0 is gone);
// before its delete reaches the API, its object is gone and shard 1 has created its own
// under the name. The delete carries the UID and resourceVersion shard 0 read, so the API
// refuses it (409) instead of deleting shard 1's object, and shard 0's retry reads the name
// again, finds shard 1's object and leaves it (outcome not_ours). Without the
// preconditions shard 1's object is deleted.
func TestDeleteNeverRemovesAnotherShardsObject(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	p := makePod(t, "precond", "web-0", "node-a")
	src := &corev1Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
	proxy := newAPIProxy(t)
	w0 := startShardWriter(t, proxy.client(t), "precond", "0-of-2")

	old := pairObject(src, "uid-db-0-old", v1alpha1.Reachable)
	key := apply.ObjectKey(old.Namespace, old.Name)
	w0.Set(&apply.Desired{Obj: old, Reason: "verdict"})
	require.NoError(t, w0.resultAfter(t, key, 0).Err)
	require.Eventually(t, func() bool { return len(w0.Existing()) == 1 }, 10*time.Second, 20*time.Millisecond, "shard 0's informer sees its object")

	// Between shard 0's read (its informer) and its delete: its object goes and shard 1
	// creates its own pair's object under the name. (In the proxy's goroutine: assert, not
	// require.)
	theirs := make(chan types.UID, 1)
	proxy.onNext(isDeleteOf(old.Name), func(*http.Request) {
		api := pnhClient.NetpulseV1alpha1().PodNetworkHealths("precond")
		if !assert.NoError(t, api.Delete(ctx, old.Name, metav1.DeleteOptions{})) {
			return
		}
		o := pairObject(src, "uid-db-0-new", v1alpha1.Reachable)
		o.Labels[v1alpha1.LabelShard] = "1-of-2"
		c, err := api.Create(ctx, o, metav1.CreateOptions{})
		if assert.NoError(t, err) {
			theirs <- c.UID
		}
	})
	del := &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name}, Spec: old.Spec}
	w0.Set(&apply.Desired{Obj: del, Reason: "delete", Delete: true})
	res := w0.resultAfter(t, key, 1)
	assert.True(t, res.NotOurs, "shard 0's delete ends as not_ours: %+v", res)
	assert.True(t, errors.Is(res.Err, apply.ErrNotOurs), "%v", res.Err)

	got := getPNH(t, "precond", old.Name)
	require.NotNil(t, got, "shard 0 deleted shard 1's object")
	select {
	case uid := <-theirs:
		assert.Equal(t, uid, got.UID)
	default:
		t.Fatal("shard 0's delete never reached the API")
	}
	assert.Equal(t, "1-of-2", got.Labels[v1alpha1.LabelShard])
	assert.Equal(t, types.UID("uid-db-0-new"), got.Spec.TargetPodRef.UID)

	// Its own object, unchanged since it read it, shard 0 does delete.
	mine := pairObject(src, "uid-db-1", v1alpha1.Reachable)
	mine.Name = src.Name + "-to-db-1"
	mineKey := apply.ObjectKey(mine.Namespace, mine.Name)
	w0.Set(&apply.Desired{Obj: mine, Reason: "verdict"})
	require.NoError(t, w0.resultAfter(t, mineKey, 0).Err)
	require.Eventually(t, func() bool { return len(w0.Existing()) == 1 }, 10*time.Second, 20*time.Millisecond)
	w0.Set(&apply.Desired{Obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: mine.Namespace, Name: mine.Name}, Spec: mine.Spec}, Reason: "delete", Delete: true})
	require.NoError(t, w0.resultAfter(t, mineKey, 1).Err)
	assert.Nil(t, getPNH(t, "precond", mine.Name), "shard 0's own object deleted")
}

// A recreated object of the same name (deleted and created again by someone else, with
// netpulse's labels and the same pair) is not the one the writer read: the UID
// precondition refuses the delete, and the retry deletes it only after reading it again.
// Here the recreated object belongs to another pair (another source pod UID), so it stays.
func TestDeleteNeverRemovesARecreatedObject(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	p := makePod(t, "precond-re", "web-0", "node-a")
	src := &corev1Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
	proxy := newAPIProxy(t)
	w0 := startShardWriter(t, proxy.client(t), "precond-re", "0-of-2")

	o := pairObject(src, "uid-db-0", v1alpha1.Reachable)
	key := apply.ObjectKey(o.Namespace, o.Name)
	w0.Set(&apply.Desired{Obj: o, Reason: "verdict"})
	require.NoError(t, w0.resultAfter(t, key, 0).Err)
	require.Eventually(t, func() bool { return len(w0.Existing()) == 1 }, 10*time.Second, 20*time.Millisecond)
	recreated := make(chan types.UID, 1)
	proxy.onNext(isDeleteOf(o.Name), func(*http.Request) {
		api := pnhClient.NetpulseV1alpha1().PodNetworkHealths("precond-re")
		if !assert.NoError(t, api.Delete(ctx, o.Name, metav1.DeleteOptions{})) {
			return
		}
		again := o.DeepCopy()
		again.Labels[v1alpha1.LabelShard] = "0-of-2"
		again.Spec.TargetPodRef.UID = "uid-db-0-other-pair"
		c, err := api.Create(ctx, again, metav1.CreateOptions{})
		if assert.NoError(t, err) {
			recreated <- c.UID
		}
	})
	w0.Set(&apply.Desired{Obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}, Spec: o.Spec}, Reason: "delete", Delete: true})
	res := w0.resultAfter(t, key, 1)
	assert.True(t, res.NotOurs, "%+v", res)
	got := getPNH(t, "precond-re", o.Name)
	require.NotNil(t, got, "the recreated object was deleted")
	select {
	case uid := <-recreated:
		assert.Equal(t, uid, got.UID)
	default:
		t.Fatal("the delete never reached the API")
	}
}

// The relabel ping-pong: shard 1 has written the object of db-0's name for the new db-0;
// shard 0, still holding the old db-0's pair, writes its heartbeat: its create answers
// AlreadyExists, it reads the object and, before, sent an update relabelling it as its own
// with its pair's spec (refused only because the CRD makes spec immutable; with the same
// spec it would have relabelled it, and shard 1 back at its next write). A shard never
// relabels, updates or deletes an object labelled as another shard's of its own count:
// shard 0's writes end as not_ours, with no update sent and the object untouched. Once
// shard 1 deletes it (its pair gone), shard 0 creates its own.
func TestShardsNeverRelabelEachOthersObjects(t *testing.T) {
	requireCluster(t)
	p := makePod(t, "pingpong", "web-0", "node-a")
	src := &corev1Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
	proxy := newAPIProxy(t)
	var puts atomic.Int32
	proxy.onEvery(func(r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/podnetworkhealths/") {
			puts.Add(1)
		}
	})
	w0 := startShardWriter(t, proxy.client(t), "pingpong", "0-of-2")
	w1 := startShardWriter(t, pnhProxyless(t), "pingpong", "1-of-2")

	theirs := pairObject(src, "uid-db-0-new", v1alpha1.Reachable)
	key := apply.ObjectKey(theirs.Namespace, theirs.Name)
	w1.Set(&apply.Desired{Obj: theirs, Reason: "verdict"})
	require.NoError(t, w1.resultAfter(t, key, 0).Err)
	before := getPNH(t, "pingpong", theirs.Name)
	require.NotNil(t, before)

	for i := range 3 { // three of shard 0's heartbeats
		w0.Set(&apply.Desired{Obj: pairObject(src, "uid-db-0-old", v1alpha1.Unreachable), Reason: "heartbeat"})
		res := w0.resultAfter(t, key, i)
		assert.True(t, res.NotOurs, "write %d: %+v", i, res)
	}
	assert.Zero(t, puts.Load(), "shard 0 sent updates of shard 1's object")
	after := getPNH(t, "pingpong", theirs.Name)
	require.NotNil(t, after)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "shard 0 wrote shard 1's object")
	assert.Equal(t, "1-of-2", after.Labels[v1alpha1.LabelShard])

	// Shard 1's pair goes: it deletes its object; then shard 0's write creates its own.
	require.Eventually(t, func() bool { return len(w1.Existing()) == 1 }, 10*time.Second, 20*time.Millisecond)
	w1.Set(&apply.Desired{Obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: theirs.Namespace, Name: theirs.Name}, Spec: theirs.Spec}, Reason: "delete", Delete: true})
	require.NoError(t, w1.resultAfter(t, key, 1).Err)
	require.Eventually(t, func() bool { return getPNH(t, "pingpong", theirs.Name) == nil }, 10*time.Second, 20*time.Millisecond)
	w0.Set(&apply.Desired{Obj: pairObject(src, "uid-db-0-old", v1alpha1.Unreachable), Reason: "heartbeat"})
	require.NoError(t, w0.resultAfter(t, key, 3).Err)
	mine := getPNH(t, "pingpong", theirs.Name)
	require.NotNil(t, mine)
	assert.Equal(t, "0-of-2", mine.Labels[v1alpha1.LabelShard])
	assert.Equal(t, types.UID("uid-db-0-old"), mine.Spec.TargetPodRef.UID)
	assert.Equal(t, 4, w0.count(key))
}

// pnhProxyless is an admin client straight to the API server.
func pnhProxyless(t *testing.T) versioned.Interface {
	c, err := versioned.NewForConfig(cp.Config)
	require.NoError(t, err)
	return c
}
