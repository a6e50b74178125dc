/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/api/client/informers/externalversions"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1/v1alpha1test"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

type event struct {
	typ string
	obj *v1alpha1.PodNetworkHealth
}

// TestTypedClientInformerLister exercises what the exporter uses: the generated clientset
// (create, get, list, update, updateStatus, patch of the status, delete) and a
// namespace-scoped shared informer with its lister.
func TestTypedClientInformerLister(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	c := pnhClient.NetpulseV1alpha1().PodNetworkHealths(ns)

	factory := externalversions.NewSharedInformerFactoryWithOptions(pnhClient, 0, externalversions.WithNamespace(ns))
	informer := factory.Netpulse().V1alpha1().PodNetworkHealths()
	lister := informer.Lister().PodNetworkHealths(ns)
	events := make(chan event, 16)
	send := func(typ string, o any) {
		if pnh, ok := o.(*v1alpha1.PodNetworkHealth); ok {
			events <- event{typ, pnh}
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { send("add", o) },
		UpdateFunc: func(_, o any) { send("update", o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			send("delete", o)
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	for typ, synced := range factory.WaitForCacheSync(stop) {
		if !synced {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
	next := func(want string) *v1alpha1.PodNetworkHealth {
		t.Helper()
		select {
		case ev := <-events:
			if ev.typ != want {
				t.Fatalf("informer event %s %s, want %s", ev.typ, ev.obj.Name, want)
			}
			return ev.obj
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s event from the informer", want)
			return nil
		}
	}

	// Create: the informer sees it, the lister serves it.
	want := v1alpha1test.Valid(ns, "informed")
	created, err := c.Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := next("add"); got.UID != created.UID {
		t.Fatalf("add event for %s", got.UID)
	}
	fromLister, err := lister.Get(want.Name)
	if err != nil {
		t.Fatalf("lister: %v", err)
	}
	if !apiequality.Semantic.DeepEqual(fromLister.Spec, want.Spec) {
		t.Errorf("lister spec %+v", fromLister.Spec)
	}

	// UpdateStatus: the informer delivers the new status.
	created.Status = want.Status
	updated, err := c.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := next("update"); !apiequality.Semantic.DeepEqual(got.Status, want.Status) {
		t.Errorf("update event status %+v", got.Status)
	}

	// Merge-patch the status (a heartbeat: only lastObservedTime changes).
	patch := []byte(`{"status":{"lastObservedTime":"2026-03-14T15:10:26Z"}}`)
	patched, err := c.Patch(ctx, want.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if got := next("update"); !got.Status.LastObservedTime.Equal(patched.Status.LastObservedTime) || got.Status.Reachability != v1alpha1.Reachable {
		t.Errorf("patched status %+v", got.Status)
	}

	// Update of the main resource (labels), Get and List.
	patched.Labels["netpulse.io/pair"] = "a-b"
	if _, err := c.Update(ctx, patched, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	next("update")
	got, err := c.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil || got.Labels["netpulse.io/pair"] != "a-b" || got.ResourceVersion == updated.ResourceVersion {
		t.Fatalf("get after update: %v %+v", err, got.ObjectMeta)
	}
	list, err := c.List(ctx, metav1.ListOptions{LabelSelector: "netpulse.io/pair=a-b"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v %d items", err, len(list.Items))
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		sel, err := labels.Parse("netpulse.io/pair=a-b")
		if err != nil {
			return false, err
		}
		l, err := lister.List(sel)
		return err == nil && len(l) == 1, nil
	}); err != nil {
		t.Errorf("lister with a label selector: %v", err)
	}

	// Delete: the informer sees it go and the lister answers NotFound.
	if err := c.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next("delete"); got.Name != want.Name {
		t.Fatalf("delete event for %s", got.Name)
	}
	if _, err := lister.Get(want.Name); !apierrors.IsNotFound(err) {
		t.Errorf("lister after delete: %v", err)
	}
	if _, err := c.Get(ctx, want.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v", err)
	}
}

// TestDocsExample creates the full example object of docs/api.md, so the reference
// documentation cannot drift from the API.
func TestDocsExample(t *testing.T) {
	ctx := testContext(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	const begin, end = "<!-- example:begin -->\n```yaml\n", "```\n<!-- example:end -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/api.md has no example between %q and %q", begin, end)
	}
	obj := &v1alpha1.PodNetworkHealth{}
	if err := yaml.UnmarshalStrict([]byte(doc[i+len(begin):j]), obj); err != nil {
		t.Fatalf("docs/api.md example: %v", err)
	}
	if obj.APIVersion != v1alpha1.SchemeGroupVersion.String() || obj.Kind != v1alpha1.Kind {
		t.Fatalf("docs/api.md example is a %s %s", obj.APIVersion, obj.Kind)
	}
	// The example is owned by a pod that does not exist here; the garbage collector would
	// delete it (as it should), so drop the owner reference for this test.
	if len(obj.OwnerReferences) != 1 || obj.OwnerReferences[0].Kind != "Pod" || obj.OwnerReferences[0].Name != obj.Spec.SourcePodRef.Name {
		t.Errorf("the example should be owned by its source pod: %+v", obj.OwnerReferences)
	}
	obj.OwnerReferences = nil
	if err := kubetest.EnsureNamespace(ctx, kube, obj.Namespace); err != nil {
		t.Fatal(err)
	}
	got := create(t, ctx, obj)
	if !apiequality.Semantic.DeepEqual(got.Status, obj.Status) || !apiequality.Semantic.DeepEqual(got.Spec, obj.Spec) {
		t.Errorf("docs/api.md example did not round-trip")
	}
}
