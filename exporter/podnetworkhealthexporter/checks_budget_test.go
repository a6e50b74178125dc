// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/netpulse/netpulse/api/client/clientset/versioned/fake"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// requestLog records when each kind of API request reached the (fake) API.
type requestLog struct {
	mu    sync.Mutex
	start time.Time
	at    map[string][]time.Duration
}

func (l *requestLog) add(kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at[kind] = append(l.at[kind], time.Since(l.start))
}

func (l *requestLog) get(kind string) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.at[kind]...)
}

// checkTestExporter is an exporter with checks enabled, wired as start() wires it, over
// fake clients that record every request: pair objects, Events, check status patches.
func checkTestExporter(t *testing.T, cfg *Config) (*pnhExporter, *requestLog) {
	t.Helper()
	e, _, log := checkTestExporterWithTelemetry(t, cfg)
	return e, log
}

func checkTestExporterWithTelemetry(t *testing.T, cfg *Config) (*pnhExporter, *componenttest.Telemetry, *requestLog) {
	t.Helper()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	e, err := newExporter(cfg, set)
	require.NoError(t, err)
	log := &requestLog{start: time.Now(), at: map[string][]time.Duration{}}
	pnh := fake.NewSimpleClientset()
	pnh.PrependReactor("update", "podnetworkhealths", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			log.add("pair_status")
		}
		return false, nil, nil
	})
	kube := kubefake.NewSimpleClientset(runningPod("flap", "web-0", "node-a", "10.0.0.1"))
	kube.PrependReactor("create", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ev := a.(clienttesting.CreateAction).GetObject().(*corev1.Event)
		log.add("event_" + ev.InvolvedObject.Kind)
		return true, ev, nil
	})
	pnh.PrependReactor("patch", "networkchecks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		log.add("check_" + a.GetSubresource())
		return true, &v1alpha1.NetworkCheck{}, nil
	})
	e.kube = kube
	e.initWriter(pnh)
	t.Cleanup(func() { e.writer.Stop() })
	return e, tt, log
}

// placedCheck is a NetworkCheck whose status records its placement on node-a's agent
// (source web-0, target 10.0.0.9:80), as a previous writer wrote it, with its labels.
func placedCheck(ns, name string) *v1alpha1.NetworkCheck {
	return &v1alpha1.NetworkCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name),
			Labels: map[string]string{v1alpha1.LabelVantageMode: string(v1alpha1.VantageAgent), v1alpha1.LabelVantageNode: "node-a"}},
		Spec: v1alpha1.NetworkCheckSpec{Source: v1alpha1.CheckSource{PodName: "web-0"}, Target: v1alpha1.CheckTarget{Address: "10.0.0.9:80"}},
		Status: v1alpha1.NetworkCheckStatus{
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCheckAccepted,
				Message: "probed from the netpulse agent on node node-a (the source pod has no netpulse sidecar)"}},
			Vantage: &v1alpha1.CheckVantage{Mode: v1alpha1.VantageAgent, SourcePod: "web-0", Node: "node-a"},
			Target:  &v1alpha1.CheckResolvedTarget{Endpoint: "10.0.0.9:80", Kind: "Address"},
		},
	}
}

// startChecks starts e's checks controller as start() and lead() do, over the writer's
// fake clientset holding checks (kube serves the placements' reads): leading, and resumed
// from what the fake API holds.
func startChecks(t *testing.T, e *pnhExporter, kube *kubefake.Clientset, checks ...*v1alpha1.NetworkCheck) {
	t.Helper()
	pnh := e.writer.Client().(*fake.Clientset)
	for _, nc := range checks {
		require.NoError(t, pnh.Tracker().Add(nc))
	}
	e.checks.Start(kube, pnh)
	t.Cleanup(e.checks.Shutdown)
	e.checks.Lead(context.Background())
	require.NoError(t, e.checks.Resume(context.Background()))
}

// addFlappingChecks places n checks on node-a and feeds each a failure after a success:
// n outages starting (n condition changes to write, n Events to emit).
func addFlappingChecks(t *testing.T, e *pnhExporter, n int, now time.Time) {
	var ncs []*v1alpha1.NetworkCheck
	for i := range n {
		ncs = append(ncs, placedCheck("flap", fmt.Sprintf("check-%03d", i)))
	}
	startChecks(t, e, e.kube.(*kubefake.Clientset), ncs...)
	for _, nc := range ncs {
		for j, ok := range []bool{true, false} {
			require.NoError(t, e.consumeLogs(context.Background(), checkResult(v1alpha1.NetworkCheckKind, nc.Namespace, nc.Name, "netpulse", "agent-a", "uid-a", "node-a", now.Add(time.Duration(j-2)*time.Second), ok)))
		}
	}
}

// Many flapping declared checks neither delay a pair's verdict nor use up the pairs' Events:
// the pair's verdict and its Event reach the API as fast as with no check at all, while the
// checks' writes take at most their share of the budget.
func TestFlappingChecksLeavePairVerdictsAndEventsAlone(t *testing.T) {
	const qps, burst = 10, 2
	pairLatency := func(t *testing.T, flapping int) (verdict, event time.Duration, log *requestLog) {
		cfg := createDefaultConfig().(*Config)
		cfg.Checks.Enabled = true
		cfg.QPS, cfg.Burst = qps, burst
		e, log := checkTestExporter(t, cfg)
		now := time.Now()
		addFlappingChecks(t, e, flapping, now)
		e.checks.Reconcile(context.Background(), now) // queues every check's status write
		// A pair turns unreachable: its verdict write and its Event.
		obj := testPNH("pair-verdict", "node-b")
		obj.Status.Reachability = v1alpha1.Unreachable
		e.writer.Set(&apply.Desired{Obj: obj, Reason: "verdict"})
		e.emitPlanned(plan.PairEvents([]observation.Transition{{Key: observation.PairKey{SourceNamespace: "ns", SourcePod: "src"},
			Old: observation.VerdictReachable, New: observation.VerdictUnreachable, At: now, Message: "pair down"}}))
		log.start = time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		e.writer.Run(ctx, 2)
		require.Eventually(t, func() bool {
			return len(log.get("pair_status")) > 0 && len(log.get("event_PodNetworkHealth")) > 0
		}, 10*time.Second, 5*time.Millisecond, "the pair's verdict and Event must reach the API (flapping checks: %d)", flapping)
		return log.get("pair_status")[0], log.get("event_PodNetworkHealth")[0], log
	}
	quietVerdict, quietEvent, _ := pairLatency(t, 0)
	verdict, event, log := pairLatency(t, 200)
	t.Logf("pair verdict written after %v (no checks: %v), pair Event after %v (no checks: %v)", verdict, quietVerdict, event, quietEvent)
	// A pair write costs 2 requests (create, status) and the Event one: at 10/s with a burst
	// of 2, at most a couple of request intervals whatever the checks do.
	slack := 3 * time.Second / qps
	assert.LessOrEqual(t, verdict, quietVerdict+slack, "flapping checks delayed a pair verdict")
	assert.LessOrEqual(t, event, quietEvent+slack, "flapping checks delayed a pair Event")

	// The checks still progress, within their share (20% of 10/s), behind the pairs.
	time.Sleep(2 * time.Second)
	patches := len(log.get("check_status")) + len(log.get("check_")) // status and label patches
	events := len(log.get("event_NetworkCheck"))
	t.Logf("in ~2 s: %d check status and label writes, %d check Events", patches, events)
	assert.Positive(t, patches+events, "the checks get their share")
	assert.LessOrEqual(t, patches+events, int(2.5*qps*apply.DefaultCheckShare)+burst, "the checks take no more than their share")
}

// The pairs' Event limiter is the pairs' own: a burst of check Events (their own limiter)
// leaves the pairs' Events untouched, and the checks' limiter bounds the checks' Events.
func TestCheckEventsHaveTheirOwnLimiter(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Checks.Enabled = true
	e, tt, _ := checkTestExporterWithTelemetry(t, cfg)
	addFlappingChecks(t, e, 100, time.Now())
	pending := e.writer.PendingByPriority()
	assert.Equal(t, cfg.Checks.EventsPerMinute, pending[writequeue.CheckEvent], "the checks' Events, bounded by checks.events_per_minute")
	assert.Zero(t, pending[writequeue.Event], "no check Event at the pairs' priority")
	assert.InDelta(t, float64(cfg.Events.PerMinute), e.eventsRL.Tokens(), 0.5, "the pairs' limiter is untouched")
	// The Events beyond the checks' limiter are counted.
	m, err := tt.GetMetric("otelcol_pod_network_health_writes_dropped")
	require.NoError(t, err)
	dropped := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("priority"))
		dropped[v.AsString()] += dp.Value
	}
	assert.Equal(t, map[string]int64{"check_event": int64(100 - cfg.Checks.EventsPerMinute)}, dropped)
}
