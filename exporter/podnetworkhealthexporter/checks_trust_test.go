// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/netpulse/netpulse/api/client/clientset/versioned/fake"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/metadata"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

func skippedByReason(t *testing.T, tt *componenttest.Telemetry) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := tt.GetMetric("otelcol_pod_network_health_datapoints_skipped")
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("reason"))
		out[v.AsString()] += dp.Value
	}
	return out
}

// A status write the API refuses (422) is not retried: counted as rejected, the check is
// marked and its status is queued again only once it changes.
func TestRejectedCheckStatusIsNotRetried(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Checks.Enabled = true
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	e, err := newExporter(cfg, set)
	require.NoError(t, err)
	var patches atomic.Int32
	pnh := fake.NewSimpleClientset()
	pnh.PrependReactor("patch", "networkchecks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return true, &v1alpha1.NetworkCheck{}, nil
		}
		patches.Add(1)
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: v1alpha1.GroupName, Kind: v1alpha1.NetworkCheckKind}, "web-to-db",
			field.ErrorList{field.Invalid(field.NewPath("status", "conditions").Index(1).Child("reason"), "x", "pattern")})
	})
	e.kube = kubefake.NewSimpleClientset(runningPod("shop", "web-0", "node-a", "10.0.0.1"))
	e.initWriter(pnh)
	defer e.writer.Stop()
	c := e.checks
	startChecks(t, e, e.kube.(*kubefake.Clientset), placedCheck("shop", "web-to-db"))
	now := time.Now()
	require.NoError(t, e.consumeLogs(context.Background(), checkResult(v1alpha1.NetworkCheckKind, "shop", "web-to-db", "netpulse", "agent-a", "uid-a", "node-a", now, false)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.writer.Run(ctx, 1)
	c.Reconcile(ctx, now)
	require.Eventually(t, func() bool { return e.writer.PendingCount() == 0 && patches.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	// Reconciles go on: the refused state is not queued again, nor retried by the writer.
	for i := range 5 {
		c.Reconcile(ctx, now.Add(time.Duration(i+1)*time.Second))
	}
	time.Sleep(300 * time.Millisecond) // longer than the writer's first back-off
	assert.Equal(t, int32(1), patches.Load(), "a 4xx is never retried")
	assert.Zero(t, e.writer.PendingCount())
	writes := map[string]int64{}
	m, err := tt.GetMetric("otelcol_pod_network_health_api_writes")
	require.NoError(t, err)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("outcome"))
		writes[v.AsString()] += dp.Value
	}
	assert.Equal(t, int64(1), writes["rejected"])
	assert.Zero(t, writes["error"])

	// A new result changes the state: written again.
	require.NoError(t, e.consumeLogs(context.Background(), checkResult(v1alpha1.NetworkCheckKind, "shop", "web-to-db", "netpulse", "agent-a", "uid-a", "node-a", now.Add(time.Second), true)))
	c.Reconcile(ctx, now.Add(10*time.Second))
	require.Eventually(t, func() bool { return patches.Load() == 2 }, 5*time.Second, 5*time.Millisecond)
}

// The writer never retries a 4xx answer (other than 401, 408, 409, 429, and 403 for a
// bounded while: apply.TestWriterRetriesForbiddenForAWhile), for any kind of write.
func TestWriterDoesNotRetryRejectedWrites(t *testing.T) {
	var res results
	w := apply.NewWriter(fake.NewSimpleClientset(), "", 1000, 10, zap.NewNop(), res.done)
	defer w.Stop()
	calls := map[string]*atomic.Int32{}
	for name, err := range map[string]error{
		"invalid":   apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "x", nil),
		"forbidden": apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "x", fmt.Errorf("no")),
		"too-large": apierrors.NewRequestEntityTooLargeError("x"),
		"bad":       apierrors.NewBadRequest("x"),
		"throttled": apierrors.NewTooManyRequests("x", 0),
		"conflict":  apierrors.NewConflict(schema.GroupResource{Resource: "events"}, "x", fmt.Errorf("no")),
	} {
		n := &atomic.Int32{}
		calls[name] = n
		w.Enqueue("event/"+name, writequeue.Event, func(context.Context) error {
			if n.Add(1) > 1 {
				return nil
			}
			return err
		}, "event")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Run(ctx, 2)
	require.Eventually(t, drained(w), 5*time.Second, 5*time.Millisecond)
	for _, name := range []string{"invalid", "too-large", "bad"} {
		assert.Equal(t, int32(1), calls[name].Load(), name)
	}
	// Forbidden too: a restarted API server denies everything until its RBAC caches sync.
	for _, name := range []string{"throttled", "conflict", "forbidden"} {
		assert.Equal(t, int32(2), calls[name].Load(), name+" is retried")
	}
	rejected := 0
	for _, r := range res.get() {
		if r.Rejected {
			rejected++
		}
	}
	assert.Equal(t, 3, rejected)
}

func runningPod(ns, name, node, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}}
}

// The declared checks' bounds: their defaults and their ranges.
func TestChecksBoundsConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Checks.Enabled = true
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 100, cfg.Checks.MaxChecksPerNamespace)
	assert.False(t, cfg.Checks.AllowCrossNamespaceTargets, "other namespaces' targets are opt-in")
	assert.Equal(t, 0.2, cfg.Checks.WriteShare)
	assert.Equal(t, 30, cfg.Checks.EventsPerMinute)
	assert.True(t, cfg.Checks.ExplainNetworkPolicy, "failing checks are explained by NetworkPolicies by default")
	for name, mutate := range map[string]func(*ChecksConfig){
		"checks::max_checks_per_namespace": func(c *ChecksConfig) { c.MaxChecksPerNamespace = c.MaxChecks + 1 },
		"checks::write_share":              func(c *ChecksConfig) { c.WriteShare = 0.9 },
		"checks::events_per_minute":        func(c *ChecksConfig) { c.EventsPerMinute = 0 },
	} {
		bad := *cfg
		mutate(&bad.Checks)
		err := bad.Validate()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), name)
	}
}
