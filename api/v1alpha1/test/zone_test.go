// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

var zoneCRDPath = filepath.Join("..", "..", "..", "deploy", "crds", "netpulse.io_zonenetworkhealths.yaml")

// ZoneNetworkHealth on the real API server: cluster-scoped, the spec validated (zones
// differ) and immutable, the status a subresource, and what `kubectl get znh` prints.
func TestZoneNetworkHealth(t *testing.T) {
	ctx := testContext(t)
	c := pnhClient.NetpulseV1alpha1().ZoneNetworkHealths()
	t.Cleanup(func() { _ = c.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}) })

	_, err := c.Create(ctx, &v1alpha1.ZoneNetworkHealth{ObjectMeta: metav1.ObjectMeta{Name: "same"},
		Spec: v1alpha1.ZoneNetworkHealthSpec{SourceZone: "zone-a", TargetZone: "zone-a"}}, metav1.CreateOptions{})
	requireInvalid(t, err, "spec", "sourceZone and targetZone must differ")

	o, err := c.Create(ctx, &v1alpha1.ZoneNetworkHealth{ObjectMeta: metav1.ObjectMeta{Name: "zone-a.zone-b"},
		Spec: v1alpha1.ZoneNetworkHealthSpec{SourceZone: "zone-a", TargetZone: "zone-b"},
		// Ignored on create: status is a subresource.
		Status: v1alpha1.ZoneNetworkHealthStatus{Reachability: v1alpha1.Unreachable}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Namespace != "" || o.Status.Reachability != "" {
		t.Fatalf("want a cluster-scoped object without status, got namespace %q status %+v", o.Namespace, o.Status)
	}
	o.Spec.TargetZone = "zone-c"
	_, err = c.Update(ctx, o, metav1.UpdateOptions{})
	requireInvalid(t, err, "spec", "spec is immutable")

	o.Spec.TargetZone = "zone-b"
	now := metav1.NewTime(time.Now().Add(-2 * time.Minute))
	o.Status = v1alpha1.ZoneNetworkHealthStatus{Reachability: v1alpha1.Unreachable, NodePairs: 16, FailingNodePairs: 16,
		FailingObserverNodes: []string{"node-1", "node-3"}, FailingObserverNodeCount: 2,
		FailingTargetNodes: []string{"node-2", "node-4"}, FailingTargetNodeCount: 2, LastFailureTime: &now, LastObservedTime: &now,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonZonePairUnreachable,
			Message: "zone zone-a cannot reach zone zone-b", LastTransitionTime: now}}}
	if _, err := c.UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tooMany := o.DeepCopy()
	for i := range 11 {
		tooMany.Status.FailingObserverNodes = append(tooMany.Status.FailingObserverNodes, "n"+string(rune('a'+i)))
	}
	got, err := c.Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tooMany.ResourceVersion = got.ResourceVersion
	_, err = c.UpdateStatus(ctx, tooMany, metav1.UpdateOptions{})
	requireInvalid(t, err, "status.failingObserverNodes", "must have at most 10 items")

	if cp.Binaries.Kubectl == "" {
		t.Skip("bin/kubectl not built (`make kube-bins`)")
	}
	out, err := exec.CommandContext(ctx, cp.Binaries.Kubectl, "--kubeconfig", cp.Kubeconfig, "get", "znh").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get znh: %v\n%s", err, out)
	}
	t.Logf("$ kubectl get znh\n%s", out)
	if !regexp.MustCompile(`(?m)^NAME +FROM +TO +REACHABLE +FAILING +PAIRS +SINCE +AGE\nzone-a\.zone-b +zone-a +zone-b +Unreachable +16 +16 +2m[0-9]*s? +[0-9]+s$`).MatchString(strings.TrimSpace(string(out))) {
		t.Errorf("kubectl get znh: unexpected table")
	}
}
