// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
)

// ZoneKey is the queue key of a ZoneNetworkHealth.
func ZoneKey(name string) string { return "znh/" + name }

// zoneCache is the ZoneNetworkHealth informer (registered by WatchZones).
type zoneCache struct {
	informer cache.SharedIndexInformer
}

// WatchZones registers the ZoneNetworkHealth informer (cluster-scoped, netpulse's own
// objects); call before StartInformer. Its sync is separate from the pairs' (Synced): a
// gateway without the rights to these objects still writes everything else.
func (w *Writer) WatchZones() {
	w.zones = &zoneCache{informer: w.factory.Netpulse().V1alpha1().ZoneNetworkHealths().Informer()}
}

// Zones returns the cached ZoneNetworkHealth objects; false until the cache has synced
// (and without WatchZones).
func (w *Writer) Zones() ([]*v1alpha1.ZoneNetworkHealth, bool) {
	if w.zones == nil || !w.zones.informer.HasSynced() {
		return nil, false
	}
	objs := w.zones.informer.GetStore().List()
	out := make([]*v1alpha1.ZoneNetworkHealth, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*v1alpha1.ZoneNetworkHealth))
	}
	return out, true
}

// ZoneObjects schedules the plan's ZoneNetworkHealth writes: create (then the status),
// status update, or delete; each read fresh from the API (they are few and rare).
func (w *Writer) ZoneObjects(writes []plan.ZoneWrite) {
	for _, zw := range writes {
		want, del := zw.Object, zw.Delete
		want.Labels = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}
		reason := "zone"
		if del {
			reason = "delete"
		}
		w.Enqueue(ZoneKey(want.Name), zw.Priority, func(ctx context.Context) error {
			return w.applyZone(ctx, want, del)
		}, reason)
	}
}

// applyZone makes one zone write. process took the token of its first request; each
// further request takes its own. The object is read from the cache (no token), and from
// the API only when the cache missed it.
func (w *Writer) applyZone(ctx context.Context, want *v1alpha1.ZoneNetworkHealth, del bool) error {
	c := w.client.NetpulseV1alpha1().ZoneNetworkHealths()
	if del {
		// Read it from the API (a read, outside the budget) and delete that object only, if
		// it is the zone pair's: a user's object of the same name, or one changed or
		// recreated since, is left (409 on the preconditions), not retried.
		cur, err := c.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.Spec != want.Spec || cur.Labels[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue {
			return fmt.Errorf("delete zone %s: %w", want.Name, ErrNotOurs)
		}
		uid, rv := cur.UID, cur.ResourceVersion
		err = c.Delete(ctx, want.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			return fmt.Errorf("delete zone %s: changed since read: %w: %w", want.Name, ErrNotOurs, err)
		}
		return err
	}
	var cur *v1alpha1.ZoneNetworkHealth
	if w.zones != nil {
		if o, ok, _ := w.zones.informer.GetStore().GetByKey(want.Name); ok {
			cur = o.(*v1alpha1.ZoneNetworkHealth)
		}
	}
	first := true // process's token is unspent
	spend := func() error {
		if first {
			first = false
			return nil
		}
		return w.take(ctx)
	}
	if cur == nil {
		obj := want.DeepCopy()
		obj.Status = v1alpha1.ZoneNetworkHealthStatus{}
		_ = spend()
		created, err := c.Create(ctx, obj, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			if err := spend(); err != nil {
				return err
			}
			if created, err = c.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		cur = created
	}
	if cur.Spec != want.Spec {
		// Not ours (a name digest collision, or an object a user made): leave it.
		return nil
	}
	upd := cur.DeepCopy()
	upd.Status = want.Status
	if err := spend(); err != nil {
		return err
	}
	_, err := c.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	return err
}
