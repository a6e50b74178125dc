// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// SummaryKey is the queue key of a NetworkHealthSummary.
func SummaryKey(namespace, name string) string { return "nhsum/" + namespace + "/" + name }

// Summary schedules the writer's NetworkHealthSummary status at verdict priority (it is
// one object, rewritten only on news, and it says whether the verdicts are written): a
// newer status replaces a queued one. The object is read from the API at each write (a
// read, outside the budget; there is no informer for one object).
func (w *Writer) Summary(namespace, name string, st *v1alpha1.NetworkHealthSummaryStatus) {
	w.Enqueue(SummaryKey(namespace, name), writequeue.Verdict, func(ctx context.Context) error {
		return w.applySummary(ctx, namespace, name, st)
	}, "summary")
}

// PendingVerdicts is the number of verdict writes queued or in flight, and of all writes,
// leaving out the summary's own.
func (w *Writer) PendingVerdicts(namespace, name string) (verdicts, all int) {
	by := w.PendingByPriority()
	for _, n := range by {
		all += n
	}
	verdicts = by[writequeue.Verdict]
	w.mu.Lock()
	own := w.queue.Contains(SummaryKey(namespace, name))
	w.mu.Unlock()
	if own {
		verdicts, all = verdicts-1, all-1
	}
	return max(verdicts, 0), max(all, 0)
}

// applySummary creates the summary if it is missing and updates its status. process took
// the token of the first request; each further request takes its own. An object of that
// name without netpulse's label is a user's: it is left.
func (w *Writer) applySummary(ctx context.Context, namespace, name string, st *v1alpha1.NetworkHealthSummaryStatus) error {
	c := w.client.NetpulseV1alpha1().NetworkHealthSummaries(namespace)
	cur, err := c.Get(ctx, name, metav1.GetOptions{})
	spent := false
	if apierrors.IsNotFound(err) {
		obj := &v1alpha1.NetworkHealthSummary{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}}
		spent = true
		cur, err = c.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cur, err = c.Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return err
	}
	if cur.Labels[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue {
		return fmt.Errorf("summary %s/%s: %w", namespace, name, ErrNotOurs)
	}
	if spent {
		if err := w.take(ctx); err != nil {
			return err
		}
	}
	upd := cur.DeepCopy()
	upd.Status = *st
	_, err = c.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	return err
}
