// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

func forbiddenErr(resource string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "x", errors.New("RBAC: access denied"))
}

// bubbleWriter starts a writer (budget qps/burst, 2 workers) inside a synctest bubble; the
// returned stop ends it before the bubble does.
func bubbleWriter(t *testing.T, client *fake.Clientset, qps float64, burst int, done func(WriteResult)) (*Writer, func()) {
	t.Helper()
	w := NewWriter(client, "", qps, burst, zap.NewNop(), done)
	w.StartInformer()
	ctx, cancel := context.WithCancel(context.Background())
	require.True(t, w.Synced(ctx))
	w.Run(ctx, 2)
	return w, func() { cancel(); w.Stop() }
}

// Item 7 of issue 40: after an API outage the writer's back-off counted the connection
// errors, so the first 403 of the restarted API server (its RBAC caches not yet synced) was
// taken as a final refusal and the verdict dropped; the engine had recorded it as written
// and nothing rewrote it until the next heartbeat. A 403 is held now: the verdict lands.
func TestVerdictSurvivesAForbiddenAfterAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewSimpleClientset()
		var calls atomic.Int32
		client.PrependReactor("create", "podnetworkhealths", func(clienttesting.Action) (bool, runtime.Object, error) {
			switch n := calls.Add(1); {
			case n <= 20: // the API server is away for a minute or two
				return true, nil, errors.New("dial tcp 10.96.0.1:443: connect: connection refused")
			case n <= 23: // back, its RBAC caches syncing
				return true, nil, forbiddenErr("podnetworkhealths")
			}
			return false, nil, nil
		})
		var res results
		w, stop := bubbleWriter(t, client, 5, 10, res.done)
		defer stop()
		obj := testPNH("cut", "n")
		obj.Status.Reachability = v1alpha1.Unreachable
		w.Set(&Desired{Obj: obj, Reason: "verdict"})
		time.Sleep(5 * time.Minute)
		synctest.Wait()

		got, err := client.NetpulseV1alpha1().PodNetworkHealths("ns").Get(context.Background(), "cut", metav1.GetOptions{})
		require.NoError(t, err, "the verdict was lost to a transient 403 (%d requests)", calls.Load())
		assert.Equal(t, v1alpha1.Unreachable, got.Status.Reachability)
		for _, r := range res.get() {
			assert.False(t, r.Rejected, "a 403 is never a final refusal: %v", r.Err)
		}
		assert.Zero(t, w.PendingCount())
	})
}

// Item 3 of issue 40: a 403 that never clears (the node-status rule dropped from the
// gateway's RBAC) for 50 nodes re-decided every 30 s. Each decision of a node cost 13
// requests and the verdict lane took the whole budget, so less urgent writes starved. Now
// a node's first decision costs one request, its later ones none, the refusal one probe
// per interval; the other lanes flow, the refusal is surfaced, and once the rule is granted
// every node's latest condition is written after the next probe.
func TestPermanentForbiddenCostsOneRequestPerProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodes, rounds = 50, 20
		var allowed atomic.Bool
		var requests atomic.Int32
		var mu sync.Mutex
		landed := map[string]string{}
		write := func(node, val string) func(context.Context) error {
			return func(context.Context) error {
				requests.Add(1)
				if !allowed.Load() {
					return forbiddenErr("nodes")
				}
				mu.Lock()
				landed[node] = val
				mu.Unlock()
				return nil
			}
		}
		w := NewWriter(fake.NewSimpleClientset(), "", 5, 10, zap.NewNop(), func(WriteResult) {})
		var reported []string
		w.OnForbidden(func(kind string, held int, _ error) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, fmt.Sprint(kind, " ", held))
		})
		w.StartInformer()
		ctx, cancel := context.WithCancel(context.Background())
		require.True(t, w.Synced(ctx))
		w.Run(ctx, 2)
		defer func() { cancel(); w.Stop() }()

		var updateDelay time.Duration
		for round := range rounds {
			for i := range nodes {
				node := fmt.Sprintf("node-%02d", i)
				w.Enqueue(NodeKey(node), writequeue.Verdict, write(node, fmt.Sprint(round)), "node_condition")
			}
			if round == rounds/2 {
				// A less urgent write of another kind, while the refusal lasts.
				start := time.Now()
				landedAt := make(chan time.Time, 1)
				w.Enqueue("pnh/ns/other", writequeue.Update, func(context.Context) error {
					landedAt <- time.Now()
					return nil
				}, "initial")
				synctest.Wait()
				time.Sleep(5 * time.Second)
				select {
				case at := <-landedAt:
					updateDelay = at.Sub(start)
				default:
					updateDelay = -1
				}
				time.Sleep(25 * time.Second)
				continue
			}
			time.Sleep(30 * time.Second)
		}
		synctest.Wait()
		reqs := requests.Load()
		t.Logf("%d nodes refused for %v: %d requests (%.2f/s); an update write landed after %v",
			nodes, rounds*30*time.Second, reqs, float64(reqs)/(rounds*30), updateDelay)
		// One per node, the probes of the first 40 s (1, 2, 4, 5, 5... s) and one a minute after.
		assert.LessOrEqual(t, int(reqs), nodes+12+rounds/2+1, "a refused write costs one request, a refusal one per probe")
		assert.True(t, updateDelay >= 0 && updateDelay <= time.Second, "the update lane flows: %v", updateDelay)
		held, permanent := w.Forbidden()
		assert.Equal(t, nodes, held, "every node's write is held, none dropped")
		assert.Equal(t, nodes, permanent, "and surfaced as refused for good")
		mu.Lock()
		assert.Equal(t, []string{"node 50"}, reported, "reported once in 10 minutes (the exporter's Event)")
		mu.Unlock()

		allowed.Store(true) // the rule is granted
		// The next probe (at most a minute away), then 50 writes at 5/s.
		time.Sleep(forbiddenProbeSlow + 10*time.Second + time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, landed, nodes)
		for node, v := range landed {
			assert.Equal(t, fmt.Sprint(rounds-1), v, "%s: its latest condition", node)
		}
		held, _ = w.Forbidden()
		assert.Zero(t, held)
	})
}

// A webhook that denies one object holds that object's writes only; the others of its kind
// are written as usual, and the denied one is probed once per interval.
func TestForbiddenHoldsOnlyTheRefusedKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var denied atomic.Int32
		var ok atomic.Int32
		w, stop := bubbleWriter(t, fake.NewSimpleClientset(), 5, 10, func(WriteResult) {})
		defer stop()
		w.Enqueue(NodeKey("denied"), writequeue.Verdict, func(context.Context) error {
			denied.Add(1)
			return forbiddenErr("nodes")
		}, "node_condition")
		synctest.Wait()
		for i := range 10 {
			w.Enqueue(NodeKey(fmt.Sprint("allowed-", i)), writequeue.Verdict, func(context.Context) error {
				ok.Add(1)
				return nil
			}, "node_condition")
			time.Sleep(time.Second)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		assert.Equal(t, int32(10), ok.Load(), "the allowed nodes' writes are not held")
		assert.LessOrEqual(t, denied.Load(), int32(1+12+10), "the denied one: one request, then one per probe")
		held, _ := w.Forbidden()
		assert.Equal(t, 1, held)
	})
}
