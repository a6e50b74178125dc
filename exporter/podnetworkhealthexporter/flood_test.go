// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/netpulse/netpulse/api/client/clientset/versioned/fake"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/contract"
)

// floodFigures is what one floodRun measured, in simulated time.
type floodFigures struct {
	verdict, event time.Duration // from the honest pair's first failed round to the API
	writes         int           // API requests in all
	liarWrites     int           // status updates of the liar's objects
	liarEvents     int
}

// floodRun runs the exporter's engine and writer (shipped budget: 5/s, burst 10, 2
// workers; events.per_minute 30) over fake clients in a synctest bubble for 90 simulated
// seconds. With flood, a compromised agent calls 16 targets stable and sends a round every
// 10 ms, failing 3 of every 5 quarter-seconds (the pattern that flips its pairs fastest).
// An honest agent probes its stable peer every second; from 60 s the peer is really cut
// off. It measures when the honest pair's Unreachable status and its outage Event reach the
// API.
func floodRun(t *testing.T, flood bool) (f floodFigures) {
	synctest.Test(t, func(t *testing.T) {
		cfg := createDefaultConfig().(*Config)
		e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
		require.NoError(t, err)
		var mu sync.Mutex
		start := time.Now()
		outageAt := start.Add(60 * time.Second)
		pnh := fake.NewSimpleClientset()
		pnh.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			f.writes++
			u, ok := a.(clienttesting.UpdateAction)
			if !ok || a.GetSubresource() != "status" {
				return false, nil, nil
			}
			o := u.GetObject().(*v1alpha1.PodNetworkHealth)
			switch {
			case o.Spec.SourcePodRef.Name == "agent-liar":
				f.liarWrites++
			case o.Status.Reachability == v1alpha1.Unreachable && f.verdict == 0:
				f.verdict = time.Since(outageAt)
			}
			return false, nil, nil
		})
		kube := kubefake.NewSimpleClientset()
		kube.PrependReactor("create", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			f.writes++
			ev := a.(clienttesting.CreateAction).GetObject().(*corev1.Event)
			switch {
			case ev.InvolvedObject.Namespace == "liar":
				f.liarEvents++
			case ev.Type == corev1.EventTypeWarning && f.event == 0:
				f.event = time.Since(outageAt)
			}
			return true, ev, nil
		})
		e.kube = kube
		e.initWriter(pnh)
		e.writer.StartInformer()
		ctx, cancel := context.WithCancel(context.Background())
		require.True(t, e.writer.Synced(ctx))
		e.engine.Resume(nil, time.Now())
		e.writer.Run(ctx, cfg.Workers)

		liar := observation.Source{Namespace: "liar", Name: "agent-liar", UID: "uid-liar", Node: "node-liar", IP: "10.0.0.1"}
		honest := observation.Source{Namespace: "netpulse", Name: "agent-honest", UID: "uid-honest", Node: "node-honest", IP: "10.0.0.2"}
		peer := func(i int) observation.Target {
			return observation.Target{Kind: observation.TargetPod, Namespace: "netpulse", Name: fmt.Sprintf("agent-%02d", i),
				UID: fmt.Sprintf("uid-%02d", i), Node: fmt.Sprintf("node-%02d", i), Address: fmt.Sprintf("10.0.1.%d", i)}
		}
		obs := func(src observation.Source, tgt observation.Target, at time.Time, ok bool) observation.Observation {
			o := observation.Observation{Source: src, Target: tgt, ProbeType: contract.ProbeTypeICMP, Timestamp: at, Stable: true, Success: ok, Sent: 3}
			if !ok {
				o.Lost, o.ErrorType = 3, contract.ErrorTypeTimeout
			}
			return o
		}
		const step = 10 * time.Millisecond
		for i := 0; time.Duration(i)*step < 90*time.Second; i++ {
			now := time.Now()
			var batch []observation.Observation
			if flood {
				fails := (now.Sub(start)/(250*time.Millisecond))%5 < 3
				for j := range 16 {
					batch = append(batch, obs(liar, peer(j), now, !fails))
				}
			}
			if i%100 == 0 {
				batch = append(batch, obs(honest, peer(99), now, now.Before(outageAt)))
			}
			e.engine.Observe(batch, now)
			if i%100 == 0 {
				e.pairs.Reconcile(ctx, now)
			}
			time.Sleep(step)
		}
		cancel()
		e.writer.Stop()
	})
	return f
}

// Issue 40, item 1: one compromised agent flipping its 16 stable pairs as fast as it can
// neither delays another source's real outage - its verdict write and its outage Event -
// by more than a couple of write slots, nor takes more than its share of the budget.
// Before the fix (the same test on 6034c0e) the flood took the whole budget (442 liar status
// writes of 461 requests in 90 s) and the outage Event was never written.
func TestOneSourceFloodLeavesAnotherSourcesOutageAlone(t *testing.T) {
	quiet := floodRun(t, false)
	got := floodRun(t, true)
	t.Logf("honest outage: verdict written after %v (no flood: %v), Event after %v (no flood: %v); "+
		"flood: %d liar status writes, %d liar Events, %d requests in all in 90 s",
		got.verdict, quiet.verdict, got.event, quiet.event, got.liarWrites, got.liarEvents, got.writes)
	require.Positive(t, quiet.verdict)
	require.Positive(t, quiet.event)
	slot := time.Second / 5 // the shipped budget
	assert.Positive(t, got.verdict, "the honest verdict was written")
	assert.LessOrEqual(t, got.verdict, quiet.verdict+2*slot, "the flood delayed the honest verdict")
	assert.Positive(t, got.event, "the honest outage Event was written")
	assert.LessOrEqual(t, got.event, quiet.event+2*slot, "the flood delayed the honest outage Event")
	// The liar's share: 16 at once, then 1 verdict write a second (90 s).
	assert.LessOrEqual(t, got.liarWrites, 16+90+16, "the liar's status writes")
}

// A kind of write refused for good (issue 40, item 3) is reported as a Warning Event on the
// gateway's own pod (the Lease identity), besides the log line and the gauge.
func TestPermanentRefusalIsAnEventOnTheGatewayPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := createDefaultConfig().(*Config)
		cfg.LeaderElection.Identity, cfg.LeaderElection.LeaseNamespace = "gw-0", "netpulse"
		e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
		require.NoError(t, err)
		var mu sync.Mutex
		var events []*corev1.Event
		kube := kubefake.NewSimpleClientset()
		kube.PrependReactor("create", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			ev := a.(clienttesting.CreateAction).GetObject().(*corev1.Event)
			events = append(events, ev)
			return true, ev, nil
		})
		e.kube = kube
		e.initWriter(fake.NewSimpleClientset())
		e.writer.StartInformer()
		ctx, cancel := context.WithCancel(context.Background())
		require.True(t, e.writer.Synced(ctx))
		e.writer.Run(ctx, cfg.Workers)
		e.writer.Enqueue("node/node-a", writequeue.Verdict, func(context.Context) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "node-a", errors.New("RBAC: patch nodes/status denied"))
		}, "node_condition")
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		cancel()
		e.writer.Stop()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, events, 1)
		ev := events[0]
		assert.Equal(t, corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "netpulse", Name: "gw-0"}, ev.InvolvedObject)
		assert.Equal(t, "WritesForbidden", ev.Reason)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		assert.Contains(t, ev.Message, "every node write")
	})
}
