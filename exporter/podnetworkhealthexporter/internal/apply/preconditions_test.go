// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"testing"
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
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
)

// deletes lists the preconditions of every delete of resource.
func deletes(client *fake.Clientset, resource string) []*metav1.Preconditions {
	var out []*metav1.Preconditions
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == resource {
			out = append(out, a.(clienttesting.DeleteActionImpl).DeleteOptions.Preconditions)
		}
	}
	return out
}

// Every delete carries the UID and resourceVersion of the object the writer read; an
// object of the name that is not the pair's (another source or target UID, another
// shard's label) is not deleted at all (issue 40, item 5; on a real API server:
// integrationtest.TestDeleteNeverRemovesAnotherShardsObject).
func TestDeletesCarryPreconditions(t *testing.T) {
	mine := testPNH("mine", "n")
	mine.UID, mine.ResourceVersion = "uid-mine", "7"
	mine.Labels[v1alpha1.LabelShard] = "0-of-2"
	other := testPNH("other", "n")
	other.UID, other.ResourceVersion = "uid-other", "8"
	other.Labels[v1alpha1.LabelShard] = "1-of-2"
	client := fake.NewSimpleClientset(mine, other)
	var res results
	w := NewWriter(client, "", 1000, 10, zap.NewNop(), res.done, WithObjectLabels(map[string]string{v1alpha1.LabelShard: "0-of-2"}))
	defer w.Stop()
	w.StartInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.Synced(ctx))
	del := func(o *v1alpha1.PodNetworkHealth) *Desired {
		return &Desired{Obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}, Spec: o.Spec}, Reason: "delete", Delete: true}
	}
	w.Set(del(mine))
	w.Set(del(other))
	w.Run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)

	got := deletes(client, "podnetworkhealths")
	require.Len(t, got, 1, "only its own object is deleted")
	require.NotNil(t, got[0])
	assert.Equal(t, "uid-mine", string(*got[0].UID))
	assert.Equal(t, "7", *got[0].ResourceVersion)
	byKey := map[string]WriteResult{}
	for _, r := range res.get() {
		byKey[r.Key] = r
	}
	require.NoError(t, byKey[ObjectKey("ns", "mine")].Err)
	assert.True(t, byKey[ObjectKey("ns", "other")].NotOurs, "another shard's object is left: %+v", byKey[ObjectKey("ns", "other")])

	// Another pair's object under the pair's name (its target recreated): left alone.
	again := testPNH("again", "n")
	again.Labels[v1alpha1.LabelShard] = "0-of-2"
	require.NoError(t, client.Tracker().Add(again))
	require.Eventually(t, func() bool { return len(w.Existing()) == 1 }, 5*time.Second, 5*time.Millisecond)
	d := del(again)
	d.Obj.Spec.SourcePodRef.UID = "uid-src-before"
	w.Set(d)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	assert.Len(t, deletes(client, "podnetworkhealths"), 1)
	assert.True(t, res.get()[len(res.get())-1].NotOurs)
}

// A delete whose preconditions keep failing (the object changes between each read and
// the delete) is retried maxDeleteConflicts times, each after reading the API, then left.
func TestDeleteConflictIsNotRetriedForever(t *testing.T) {
	mine := testPNH("mine", "n")
	mine.UID, mine.ResourceVersion = "uid-mine", "7"
	client := fake.NewSimpleClientset(mine)
	client.PrependReactor("delete", "podnetworkhealths", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "netpulse.io", Resource: "podnetworkhealths"}, "mine", errors.New("Precondition failed"))
	})
	var res results
	w := NewWriter(client, "", 1000, 10, zap.NewNop(), res.done)
	defer w.Stop()
	w.StartInformer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.Synced(ctx))
	w.Set(&Desired{Obj: &v1alpha1.PodNetworkHealth{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"}, Spec: mine.Spec}, Reason: "delete", Delete: true})
	w.Run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	got := res.get()
	require.Len(t, got, maxDeleteConflicts)
	assert.True(t, got[len(got)-1].NotOurs)
	assert.Len(t, deletes(client, "podnetworkhealths"), maxDeleteConflicts)
	gets := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "podnetworkhealths" {
			gets++
		}
	}
	assert.Equal(t, maxDeleteConflicts-1, gets, "each retry reads the API")
}

// A zone object is deleted only if it is the zone pair's, with the UID and resourceVersion
// read just before.
func TestZoneDeleteCarriesPreconditions(t *testing.T) {
	spec := v1alpha1.ZoneNetworkHealthSpec{SourceZone: "a", TargetZone: "b"}
	ours := &v1alpha1.ZoneNetworkHealth{ObjectMeta: metav1.ObjectMeta{Name: "a-b", UID: "uid-z", ResourceVersion: "3",
		Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}, Spec: spec}
	users := &v1alpha1.ZoneNetworkHealth{ObjectMeta: metav1.ObjectMeta{Name: "c-d", UID: "uid-u", ResourceVersion: "4"},
		Spec: v1alpha1.ZoneNetworkHealthSpec{SourceZone: "x", TargetZone: "y"}}
	client := fake.NewSimpleClientset(ours, users)
	var res results
	w := NewWriter(client, "", 1000, 10, zap.NewNop(), res.done)
	defer w.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.ZoneObjects([]plan.ZoneWrite{
		{Object: &v1alpha1.ZoneNetworkHealth{ObjectMeta: metav1.ObjectMeta{Name: "a-b"}, Spec: spec}, Delete: true},
		{Object: &v1alpha1.ZoneNetworkHealth{ObjectMeta: metav1.ObjectMeta{Name: "c-d"}, Spec: v1alpha1.ZoneNetworkHealthSpec{SourceZone: "c", TargetZone: "d"}}, Delete: true},
	})
	w.Run(ctx, 1)
	require.Eventually(t, drained(w), 10*time.Second, 5*time.Millisecond)
	got := deletes(client, "zonenetworkhealths")
	require.Len(t, got, 1, "only the zone pair's own object")
	require.NotNil(t, got[0])
	assert.Equal(t, "uid-z", string(*got[0].UID))
	assert.Equal(t, "3", *got[0].ResourceVersion)
}
