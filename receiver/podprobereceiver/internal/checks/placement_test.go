// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
)

func placedCheck(labelNode string, vantage *v1alpha1.CheckVantage) *unstructured.Unstructured {
	nc := accepted(&v1alpha1.NetworkCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-to-db", UID: "uid-1",
			Labels: map[string]string{v1alpha1.LabelVantageNode: labelNode, v1alpha1.LabelVantageMode: string(v1alpha1.VantageAgent)}},
		Spec: v1alpha1.NetworkCheckSpec{Target: v1alpha1.CheckTarget{Address: "192.0.2.10:80"}},
	}, "192.0.2.10:80")
	nc.Status.Vantage = vantage
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nc)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// An agent runs a check only when the gateway placed it there, as the status (written by
// the gateway through the status subresource) records; the vantage label, which whoever
// edits the check can set, is only the watch's filter.
func TestAgentRunsOnlyChecksTheGatewayPlacedHere(t *testing.T) {
	r := New(Config{Vantage: VantageAgent, Node: "node-a"}, nil, zap.NewNop(), func(Result) {})
	defer r.Stop()

	// A namespace editor labels a check for node-a; the gateway placed it on node-b (or
	// nowhere, or on a sidecar).
	for name, v := range map[string]*v1alpha1.CheckVantage{
		"other node":  {Mode: v1alpha1.VantageAgent, SourcePod: "web-0", Node: "node-b"},
		"no vantage":  nil,
		"a sidecar":   {Mode: v1alpha1.VantageSidecar, SourcePod: "web-0", Node: "node-a"},
		"mode absent": {SourcePod: "web-0", Node: "node-a"},
	} {
		r.upsert(placedCheck("node-a", v), &v1alpha1.NetworkCheck{})
		assert.Empty(t, r.Running(), name)
	}
	// Placed here by the gateway: it runs.
	r.upsert(placedCheck("node-a", &v1alpha1.CheckVantage{Mode: v1alpha1.VantageAgent, SourcePod: "web-0", Node: "node-a"}), &v1alpha1.NetworkCheck{})
	assert.Equal(t, []string{"NetworkCheck/shop/web-to-db"}, r.Running())
	// Moved by the gateway: it stops.
	r.upsert(placedCheck("node-a", &v1alpha1.CheckVantage{Mode: v1alpha1.VantageAgent, SourcePod: "web-1", Node: "node-b"}), &v1alpha1.NetworkCheck{})
	assert.Empty(t, r.Running())
}

func TestSidecarPlacedHere(t *testing.T) {
	cfg := Config{Vantage: VantageSidecar, Namespace: "shop", Pod: "web-0"}
	nc := &v1alpha1.NetworkCheck{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"}}
	require.Error(t, cfg.PlacedHere(nc))
	nc.Status.Vantage = &v1alpha1.CheckVantage{Mode: v1alpha1.VantageSidecar, SourcePod: "web-0"}
	require.NoError(t, cfg.PlacedHere(nc))
	nc.Status.Vantage.SourcePod = "web-1"
	require.Error(t, cfg.PlacedHere(nc))
	nc.Status.Vantage = &v1alpha1.CheckVantage{Mode: v1alpha1.VantageAgent, SourcePod: "web-0"}
	require.Error(t, cfg.PlacedHere(nc))
	other := &v1alpha1.NetworkCheck{ObjectMeta: metav1.ObjectMeta{Namespace: "other"},
		Status: v1alpha1.NetworkCheckStatus{Vantage: &v1alpha1.CheckVantage{Mode: v1alpha1.VantageSidecar, SourcePod: "web-0"}}}
	require.Error(t, cfg.PlacedHere(other))
}

// A PodNetworkConnectivityCheck records no placement in its status: a sidecar runs only
// its own pod's.
func TestSidecarRunsPNCCOnlyForItsOwnPod(t *testing.T) {
	r := New(Config{Vantage: VantageSidecar, Namespace: "diag", Pod: "here", OpenShift: true}, nil, zap.NewNop(), func(Result) {})
	defer r.Stop()
	for _, c := range []struct{ ns, src string }{{"diag", "there"}, {"other", "here"}} {
		pc := &ocv1alpha1.PodNetworkConnectivityCheck{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "from-" + c.src},
			Spec: ocv1alpha1.PodNetworkConnectivityCheckSpec{SourcePod: c.src, TargetEndpoint: "192.0.2.10:443"}}
		require.Error(t, r.pnccPlacedHere(pc), c)
	}
	pc := &ocv1alpha1.PodNetworkConnectivityCheck{ObjectMeta: metav1.ObjectMeta{Namespace: "diag", Name: "from-here"},
		Spec: ocv1alpha1.PodNetworkConnectivityCheckSpec{SourcePod: "here", TargetEndpoint: "192.0.2.10:443"}}
	require.NoError(t, r.pnccPlacedHere(pc))
}
