/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1/v1alpha1test"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// sizeLimit is the bound on a stored worst-case object (DESIGN: well under 20 KB).
const sizeLimit = 20 * 1024

func TestCRDEstablished(t *testing.T) {
	ctx := testContext(t)
	crd, err := crdClient.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, v1alpha1.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.Established, apiextensionsv1.NamesAccepted} {
		if got := crdCondition(crd, c); got != apiextensionsv1.ConditionTrue {
			t.Errorf("condition %s = %q, want True (conditions %+v)", c, got, crd.Status.Conditions)
		}
	}
	for _, c := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.NonStructuralSchema, apiextensionsv1.Terminating} {
		if got := crdCondition(crd, c); got == apiextensionsv1.ConditionTrue {
			t.Errorf("condition %s is True: %+v", c, crd.Status.Conditions)
		}
	}
	names := crd.Status.AcceptedNames
	if names.Kind != v1alpha1.Kind || names.Plural != v1alpha1.Plural || !slices.Equal(names.ShortNames, []string{v1alpha1.ShortName}) || !slices.Equal(names.Categories, []string{v1alpha1.Category}) {
		t.Errorf("accepted names = %+v", names)
	}
	// The server kept what the generator wrote (a server without selectable fields or CEL
	// would drop or reject them).
	local, err := readCRD()
	if err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("versions = %d", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version %s: served %v storage %v subresources %+v", v.Name, v.Served, v.Storage, v.Subresources)
	}
	if !apiequality.Semantic.DeepEqual(v.SelectableFields, local.Spec.Versions[0].SelectableFields) || len(v.SelectableFields) == 0 {
		t.Errorf("selectable fields on the server %v, generated %v", v.SelectableFields, local.Spec.Versions[0].SelectableFields)
	}
	if !apiequality.Semantic.DeepEqual(v.AdditionalPrinterColumns, local.Spec.Versions[0].AdditionalPrinterColumns) {
		t.Errorf("printer columns on the server differ from the generated ones")
	}

	// Discovery serves the resource with its short name, category and status subresource.
	rl, err := kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if err != nil {
		t.Fatal(err)
	}
	var found, status bool
	for _, r := range rl.APIResources {
		switch r.Name {
		case v1alpha1.Plural:
			found = r.Namespaced && r.Kind == v1alpha1.Kind && slices.Contains(r.ShortNames, "pnh") && slices.Contains(r.Categories, "netpulse") &&
				slices.Contains(r.Verbs, "watch") && slices.Contains(r.Verbs, "list")
		case v1alpha1.Plural + "/status":
			status = slices.Contains(r.Verbs, "update") && slices.Contains(r.Verbs, "patch")
		}
	}
	if !found || !status {
		t.Errorf("discovery: resource ok %v, status subresource ok %v: %+v", found, status, rl.APIResources)
	}
}

// TestRoundTripEveryField creates objects with every field set (for each target kind) the
// way the exporter does (create, then update status) and reads them back unchanged.
func TestRoundTripEveryField(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	c := pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns)

	pod := v1alpha1test.Valid(ns, "agent-a-to-agent-b")
	node := v1alpha1test.Valid(ns, "agent-a-to-node-b")
	node.Spec = v1alpha1test.NodeSpec(ns, "agent-a", "node-b")
	ext := v1alpha1test.Valid(ns, "agent-a-to-external")
	ext.Spec = v1alpha1test.ExternalSpec(ns, "agent-a", "2001:db8::10")
	dns := v1alpha1test.Valid(ns, "agent-a-to-dns-name")
	dns.Spec = v1alpha1test.ExternalSpec(ns, "agent-a", "api.example.com")

	for _, want := range []*v1alpha1.PodNetworkHealth{pod, node, ext, dns} {
		created, err := c.Create(ctx, want, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", want.Name, err)
		}
		if !apiequality.Semantic.DeepEqual(created.Status, v1alpha1.PodNetworkHealthStatus{}) {
			t.Errorf("%s: create stored a status (the status subresource should own it): %+v", want.Name, created.Status)
		}
		created.Status = want.Status
		if _, err := c.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update status %s: %v", want.Name, err)
		}
		got, err := c.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("%s: spec round trip:\n got %+v\nwant %+v", want.Name, got.Spec, want.Spec)
		}
		if !apiequality.Semantic.DeepEqual(got.Status, want.Status) {
			gotJSON, _ := json.Marshal(got.Status)
			wantJSON, _ := json.Marshal(want.Status)
			t.Errorf("%s: status round trip:\n got %s\nwant %s", want.Name, gotJSON, wantJSON)
		}
		if !apiequality.Semantic.DeepEqual(got.Labels, want.Labels) || got.Generation != 1 {
			t.Errorf("%s: labels %v generation %d", want.Name, got.Labels, got.Generation)
		}
	}
}

// TestWorstCaseThroughAPIServer creates the largest object the schema admits (owned by a
// real source pod, in a namespace with a 63-character name) to show the limits the size
// test assumes are the limits the server enforces, and measures the stored object.
func TestWorstCaseThroughAPIServer(t *testing.T) {
	ctx := testContext(t)
	ns := v1alpha1test.LongNamespace("pnh-worst-case-")
	if err := kubetest.EnsureNamespace(ctx, kube, ns); err != nil {
		t.Fatal(err)
	}
	// The owner: a pod named like the source. Pods need the namespace's default service
	// account, which the controller manager creates.
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("default service account: %v", err)
	}
	owner, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1test.SourcePodName},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("owner pod: %v", err)
	}

	want := v1alpha1test.WorstCase(ns, owner.UID)
	got := create(t, ctx, want)
	if !apiequality.Semantic.DeepEqual(got.Spec, want.Spec) || !apiequality.Semantic.DeepEqual(got.Status, want.Status) {
		t.Fatalf("worst-case object changed on the way through the API server")
	}
	local, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	// What a client reads back: the stored object, with server-set metadata and
	// managedFields (create + status update).
	stored, err := pnhClient.NetpulseV1alpha1().RESTClient().Get().Namespace(ns).Resource(v1alpha1.Plural).Name(want.Name).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(stored, &generic); err != nil {
		t.Fatal(err)
	}
	managed, _ := json.Marshal(generic["metadata"].(map[string]any)["managedFields"])
	compact, _ := json.Marshal(generic)
	t.Logf("worst case: %d bytes as built, %d bytes as stored and read back (compact JSON; managedFields %d)", len(local), len(compact), len(managed))
	if len(local) >= sizeLimit || len(compact) >= sizeLimit {
		t.Fatalf("worst-case object too large: %d bytes built, %d stored; limit %d", len(local), len(compact), sizeLimit)
	}

	// One more of anything is rejected: the limits are the server's, not just the fixture's.
	over := got.DeepCopy()
	over.Status.Outages = append(over.Status.Outages, over.Status.Outages[len(over.Status.Outages)-1])
	over.Status.Outages[v1alpha1.MaxOutages].Start = v1alpha1test.At(-100 * time.Hour)
	over.Status.Outages[v1alpha1.MaxOutages].End = v1alpha1test.AtPtr(-99 * time.Hour)
	_, err = pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns).UpdateStatus(ctx, over, metav1.UpdateOptions{})
	requireInvalid(t, err, "status.outages", "Too many")
	over = got.DeepCopy()
	over.Status.Probes[0].LastFailure.Message += "!"
	_, err = pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns).UpdateStatus(ctx, over, metav1.UpdateOptions{})
	requireInvalid(t, err, "status.probes[0].lastFailure.message", "Too long")
	over = got.DeepCopy()
	over.Status.Conditions[0].Message += "!"
	_, err = pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns).UpdateStatus(ctx, over, metav1.UpdateOptions{})
	requireInvalid(t, err, "status.conditions", "at most 256")
}

// TestValidation: invalid objects are rejected, each with a cause on the offending field.
func TestValidation(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	c := pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns)
	base := create(t, ctx, v1alpha1test.Valid(ns, "base"))
	long := func(n int) string { return strings.Repeat("x", n) }

	specCases := []struct {
		name   string
		mutate func(*v1alpha1.PodNetworkHealth)
		field  string
		msgs   []string
	}{
		{"bad target kind", func(o *v1alpha1.PodNetworkHealth) { o.Spec.TargetKind = "Service" }, "spec.targetKind", []string{"Unsupported value", `"Pod", "Node", "External"`}},
		{"missing target pod", func(o *v1alpha1.PodNetworkHealth) { o.Spec.TargetPodRef = nil }, "spec.targetPodRef", []string{"Required value", "targetPodRef is required when targetKind is Pod"}},
		{"node ref on a pod target", func(o *v1alpha1.PodNetworkHealth) {
			o.Spec.TargetNodeRef = &v1alpha1.NodeReference{Name: "node-b"}
		}, "spec.targetNodeRef", []string{"Forbidden", "only be set when targetKind is Node"}},
		{"node target without node ref", func(o *v1alpha1.PodNetworkHealth) {
			o.Spec = v1alpha1test.NodeSpec(ns, "agent-a", "node-b")
			o.Spec.TargetNodeRef = nil
		}, "spec.targetNodeRef", []string{"Required value"}},
		{"external target without endpoint", func(o *v1alpha1.PodNetworkHealth) {
			o.Spec.TargetKind = v1alpha1.TargetKindExternal
			o.Spec.TargetPodRef = nil
		}, "spec.targetEndpoint", []string{"Required value"}},
		{"bad endpoint address", func(o *v1alpha1.PodNetworkHealth) {
			o.Spec = v1alpha1test.ExternalSpec(ns, "agent-a", "not an address!")
		}, "spec.targetEndpoint.address", []string{"IP address or a lower-case DNS name"}},
		{"missing source pod name", func(o *v1alpha1.PodNetworkHealth) { o.Spec.SourcePodRef.Name = "" }, "spec.sourcePodRef.name", nil},
		{"source pod name too long", func(o *v1alpha1.PodNetworkHealth) { o.Spec.SourcePodRef.Name = long(254) }, "spec.sourcePodRef.name", []string{"Too long"}},
		{"bad target namespace", func(o *v1alpha1.PodNetworkHealth) { o.Spec.TargetPodRef.Namespace = "Not_A_Namespace" }, "spec.targetPodRef.namespace", []string{"should match"}},
		{"uid too long", func(o *v1alpha1.PodNetworkHealth) { o.Spec.TargetPodRef.UID = "0a1b2c3d-0a1b-4c3d-8e4f-0a1b2c3d4e5f0" }, "spec.targetPodRef.uid", []string{"Too long"}},
	}
	for i, tc := range specCases {
		t.Run("create/"+tc.name, func(t *testing.T) {
			obj := v1alpha1test.Valid(ns, fmt.Sprintf("spec-case-%d", i))
			tc.mutate(obj)
			_, err := c.Create(ctx, obj, metav1.CreateOptions{})
			requireInvalid(t, err, tc.field, tc.msgs...)
		})
	}

	// A missing sourcePodRef cannot be expressed with the Go type (it is a required,
	// non-pointer struct); send the JSON without it.
	t.Run("create/missing sourcePodRef", func(t *testing.T) {
		obj := v1alpha1test.Valid(ns, "no-source")
		raw, _ := json.Marshal(obj)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		delete(m["spec"].(map[string]any), "sourcePodRef")
		body, _ := json.Marshal(m)
		err := pnhClient.NetpulseV1alpha1().RESTClient().Post().Namespace(ns).Resource(v1alpha1.Plural).Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		requireInvalid(t, err, "spec.sourcePodRef", "Required value")
	})

	t.Run("update/spec is immutable", func(t *testing.T) {
		obj := base.DeepCopy()
		obj.Spec.TargetPodRef.Name = "agent-c"
		_, err := c.Update(ctx, obj, metav1.UpdateOptions{})
		requireInvalid(t, err, "spec", "spec is immutable")
	})

	statusCases := []struct {
		name   string
		mutate func(*v1alpha1.PodNetworkHealthStatus)
		field  string
		msgs   []string
	}{
		{"bad reachability", func(s *v1alpha1.PodNetworkHealthStatus) { s.Reachability = "Maybe" }, "status.reachability", []string{"Unsupported value"}},
		{"bad probe type", func(s *v1alpha1.PodNetworkHealthStatus) { s.Probes[0].Type = "udp" }, "status.probes[0].type", []string{"Unsupported value"}},
		{"duplicate probe type", func(s *v1alpha1.PodNetworkHealthStatus) { s.Probes[1].Type = v1alpha1.ProbeTypeICMP }, "status.probes[1]", []string{"Duplicate value"}},
		{"negative latency", func(s *v1alpha1.PodNetworkHealthStatus) { s.Latency.P50 = "-1ms" }, "status.latency.p50", []string{"should match"}},
		{"negative probe latency", func(s *v1alpha1.PodNetworkHealthStatus) { s.Probes[1].Latency.Max = "-3ms" }, "status.probes[1].latency.max", []string{"should match"}},
		{"latency with a unit Go does not read", func(s *v1alpha1.PodNetworkHealthStatus) { s.Latency.P99 = "4 ms" }, "status.latency.p99", []string{"should match"}},
		{"window not a duration", func(s *v1alpha1.PodNetworkHealthStatus) { s.Window = "5 minutes" }, "status.window", []string{"should match"}},
		{"quantiles out of order", func(s *v1alpha1.PodNetworkHealthStatus) { s.Latency.P50 = "5ms" }, "status.latency", []string{"p50 <= p90 <= p99 <= max"}},
		{"loss ratio above 1", func(s *v1alpha1.PodNetworkHealthStatus) { s.LossRatio = "1.5" }, "status.lossRatio", []string{"should match"}},
		{"negative loss ratio", func(s *v1alpha1.PodNetworkHealthStatus) { s.LossRatio = "-0.1" }, "status.lossRatio", []string{"should match"}},
		{"lost more than sent", func(s *v1alpha1.PodNetworkHealthStatus) { s.Probes[0].Lost = s.Probes[0].Sent + 1 }, "status.probes[0].lost", []string{"lost must not exceed sent"}},
		{"negative sent", func(s *v1alpha1.PodNetworkHealthStatus) { s.Probes[0].Sent = -1 }, "status.probes[0].sent", []string{"greater than or equal to 0"}},
		{"observer count below 1", func(s *v1alpha1.PodNetworkHealthStatus) { s.ObserverCount = -1 }, "status.observerCount", []string{"greater than or equal to 1"}},
		{"failure reason not machine-readable", func(s *v1alpha1.PodNetworkHealthStatus) { s.Probes[1].LastFailure.Reason = "timed out!" }, "status.probes[1].lastFailure.reason", []string{"should match"}},
		{"too many outages", func(s *v1alpha1.PodNetworkHealthStatus) {
			s.Outages = nil
			for i := 0; i < v1alpha1.MaxOutages+1; i++ {
				s.Outages = append(s.Outages, v1alpha1.Outage{Start: v1alpha1test.At(-time.Duration(i+1) * time.Hour), End: v1alpha1test.AtPtr(-time.Duration(i+1)*time.Hour + time.Minute)})
			}
		}, "status.outages", []string{"Too many: 21", "at most 20"}},
		{"outages oldest first", func(s *v1alpha1.PodNetworkHealthStatus) {
			s.Outages[0], s.Outages[1] = s.Outages[1], s.Outages[0]
		}, "status.outages", []string{"newest first"}},
		{"older outage ongoing", func(s *v1alpha1.PodNetworkHealthStatus) { s.Outages[1].End = nil }, "status.outages", []string{"only the newest"}},
		{"outage ends before it starts", func(s *v1alpha1.PodNetworkHealthStatus) {
			s.Outages[0].End = v1alpha1test.AtPtr(-51 * time.Minute)
		}, "status.outages[0].end", []string{"end must not be before start"}},
		{"outage message too long", func(s *v1alpha1.PodNetworkHealthStatus) { s.Outages[0].Message = long(257) }, "status.outages[0].message", []string{"Too long"}},
		{"too many conditions", func(s *v1alpha1.PodNetworkHealthStatus) {
			for _, typ := range []string{"A", "B", "C"} {
				s.Conditions = append(s.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, LastTransitionTime: v1alpha1test.At(0), Reason: "R"})
			}
		}, "status.conditions", []string{"Too many: 5"}},
		{"condition message too long", func(s *v1alpha1.PodNetworkHealthStatus) { s.Conditions[0].Message = long(257) }, "status.conditions", []string{"condition messages must be at most 256 characters"}},
		{"condition without reason", func(s *v1alpha1.PodNetworkHealthStatus) { s.Conditions[0].Reason = "" }, "status.conditions[0].reason", nil},
	}
	for _, tc := range statusCases {
		t.Run("status/"+tc.name, func(t *testing.T) {
			obj := base.DeepCopy()
			tc.mutate(&obj.Status)
			_, err := c.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
			requireInvalid(t, err, tc.field, tc.msgs...)
		})
	}

	// Nothing above changed the stored object.
	got, err := c.Get(ctx, base.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != base.ResourceVersion {
		t.Errorf("a rejected write changed the object: resourceVersion %s -> %s", base.ResourceVersion, got.ResourceVersion)
	}
}

// TestStatusSubresource: writes to the main resource cannot change the status, and writes to
// the status subresource cannot change the spec or metadata.
func TestStatusSubresource(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	c := pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns)
	orig := create(t, ctx, v1alpha1test.Valid(ns, "isolated"))

	// Main resource: a label change is applied, a status change is ignored.
	obj := orig.DeepCopy()
	obj.Labels["tier"] = "main"
	obj.Status.Reachability = v1alpha1.Unreachable
	obj.Status.Outages = nil
	obj.Status.Conditions = nil
	updated, err := c.Update(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Labels["tier"] != "main" {
		t.Errorf("main update did not apply the label: %v", updated.Labels)
	}
	if !apiequality.Semantic.DeepEqual(updated.Status, orig.Status) {
		t.Errorf("main update changed the status:\n got %+v\nwant %+v", updated.Status, orig.Status)
	}

	// Status subresource: the status change is applied; spec and label changes are ignored.
	obj = updated.DeepCopy()
	obj.Spec.SourcePodRef.UID = "00000000-0000-4000-8000-000000000000"
	obj.Spec.TargetPodRef.Name = "someone-else"
	obj.Labels["tier"] = "status"
	obj.Status.Reachability = v1alpha1.Unreachable
	obj.Status.LossRatio = "1"
	statusUpdated, err := c.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if statusUpdated.Status.Reachability != v1alpha1.Unreachable || statusUpdated.Status.LossRatio != "1" {
		t.Errorf("status update not applied: %+v", statusUpdated.Status)
	}
	if !apiequality.Semantic.DeepEqual(statusUpdated.Spec, orig.Spec) {
		t.Errorf("status update changed the spec:\n got %+v\nwant %+v", statusUpdated.Spec, orig.Spec)
	}
	if statusUpdated.Labels["tier"] != "main" {
		t.Errorf("status update changed the labels: %v", statusUpdated.Labels)
	}

	// Neither kind of write is a spec change: the generation stays 1.
	got, err := c.Get(ctx, orig.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 {
		t.Errorf("generation = %d, want 1", got.Generation)
	}
	if !apiequality.Semantic.DeepEqual(got.Spec, orig.Spec) || got.Status.Reachability != v1alpha1.Unreachable {
		t.Errorf("final object: spec %+v status %+v", got.Spec, got.Status)
	}
}
