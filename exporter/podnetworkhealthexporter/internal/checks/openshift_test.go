// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/netpulse/netpulse/api/client/clientset/versioned/fake"
	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
	"github.com/netpulse/netpulse/internal/checkstatus"
)

// OpenShift's kind goes through the generated typed client: the re-read at takeover lists
// it, its status is written with OpenShift's semantics to its status subresource, and a
// check whose source pod has been gone for prune_after is deleted.
func TestPodNetworkConnectivityCheckThroughTheTypedClient(t *testing.T) {
	cfg := defaultConfig()
	cfg.OpenShift, cfg.PruneAfter = true, time.Hour
	h := newHarness(t, cfg, false)
	c := h.c
	pncc := func(name, source string) *ocv1alpha1.PodNetworkConnectivityCheck {
		return &ocv1alpha1.PodNetworkConnectivityCheck{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: "uid-" + "name"},
			Spec: ocv1alpha1.PodNetworkConnectivityCheckSpec{SourcePod: source, TargetEndpoint: "10.0.0.9:443"}}
	}
	api := fake.NewSimpleClientset(pncc("web-to-api", "web-0"), pncc("gone-to-api", "gone-0"))
	c.Start(kubefake.NewSimpleClientset(runningPod("shop", "web-0", "node-a", "10.0.0.1")), api)
	c.Lead(context.Background())
	require.NoError(t, c.Resume(context.Background()))
	require.Len(t, c.book.checks, 2, "listed at takeover")

	now := time.Now()
	c.Reconcile(context.Background(), now.Add(-2*time.Hour))
	web := checkKey{ocv1alpha1.Kind, "shop", "web-to-api"}
	assert.True(t, c.book.checks[web].place.accepted, c.book.checks[web].place.message)
	assert.Equal(t, "Address", c.book.checks[web].place.targetKind)
	c.ConsumeLogs(context.Background(), checkResult(ocv1alpha1.Kind, "shop", "web-to-api", "netpulse", "agent-a", "uid-a", "node-a", now.Add(-time.Second), false))
	c.Reconcile(context.Background(), now)

	run := func() { // as the writer does: one write per key, the newest
		latest, order := map[string]queued{}, []string{}
		for _, w := range h.queued() {
			if _, ok := latest[w.key]; !ok {
				order = append(order, w.key)
			}
			latest[w.key] = w
		}
		for _, k := range order {
			require.NoError(t, latest[k].write(context.Background()), k)
		}
		h.mu.Lock()
		h.writes = nil
		h.mu.Unlock()
	}
	prio := map[string]writequeue.Priority{}
	for _, w := range h.queued() {
		prio[w.key] = w.prio
	}
	assert.Equal(t, writequeue.CheckVerdict, prio["checkstatus/PodNetworkConnectivityCheck/shop/web-to-api"])
	assert.Equal(t, writequeue.CheckUpdate, prio["checkstatus/PodNetworkConnectivityCheck/shop/gone-to-api"], "the prune")
	api.ClearActions()
	run()
	var patched, labelled, deleted []string
	for _, a := range api.Actions() {
		if a.GetVerb() != "patch" && a.GetVerb() != "delete" {
			continue // the informers' lists and watches
		}
		assert.Equal(t, "podnetworkconnectivitychecks", a.GetResource().Resource)
		switch a := a.(type) {
		case clienttesting.PatchAction:
			if a.GetSubresource() == "" {
				labelled = append(labelled, a.GetName()) // its vantage labels
				continue
			}
			require.Equal(t, "status", a.GetSubresource())
			patched = append(patched, a.GetName())
			var ops []struct {
				Value ocv1alpha1.PodNetworkConnectivityCheckStatus `json:"value"`
			}
			require.NoError(t, json.Unmarshal(a.GetPatch(), &ops))
			require.Len(t, ops[0].Value.Conditions, 1)
			assert.Equal(t, checkstatus.ReasonTCPConnectError, ops[0].Value.Conditions[0].Reason, "OpenShift's reasons")
			assert.Len(t, ops[0].Value.Outages, 1)
		case clienttesting.DeleteAction:
			deleted = append(deleted, a.GetName())
		}
	}
	assert.Equal(t, []string{"web-to-api"}, patched)
	assert.Equal(t, []string{"web-to-api"}, labelled)
	assert.Equal(t, []string{"gone-to-api"}, deleted)
	c.mu.Lock() // the informer's handlers write the book (a deleted check is forgotten) under it
	assert.True(t, c.book.checks[web].written.Equal(c.book.checks[web].st), "what was written is the written state")
	c.mu.Unlock()
}
