// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewserver

import (
	"context"
	"maps"
	"regexp"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/matrix"
)

// writerRefresh is how often the writers' Leases are read: one GET per summary (per shard),
// so an object reads stale at most this long after its writer's Lease expired.
const writerRefresh = 5 * time.Second

// leaseReadTimeout bounds one refresh's GETs: a Lease not read in time leaves its writer
// unknown until the next refresh, rather than holding up the ones after it.
const leaseReadTimeout = 10 * time.Second

// runWriters refreshes the writers once the summaries are listed, then every writerEvery,
// until Shutdown. A reader not allowed to list the summaries never gets there: every
// object's freshUntil decides, as without writers.
func (s *Source) runWriters() {
	defer s.wg.Done()
	if !cache.WaitForCacheSync(s.stop, s.sumSynced) {
		return
	}
	ctx := wait.ContextForChannel(s.stop)
	t := time.NewTicker(s.writerEvery)
	defer t.Stop()
	for {
		s.refreshWriters(ctx)
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// refreshWriters reads the Lease each summary names and keeps what they say of the writers,
// bumping the version when one became current or stopped being current: not when only its
// Lease's age moved, or the model would be rebuilt at every refresh.
func (s *Source) refreshWriters(ctx context.Context) {
	sums, _ := s.summaries.List(labels.Everything())
	ctx, cancel := context.WithTimeout(ctx, leaseReadTimeout)
	defer cancel()
	ws := matrix.WritersFrom(sums, func(namespace, name string) (*coordinationv1.Lease, error) {
		return s.leases.Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	}, s.opts.Clock())
	if s.stopped() {
		return // the GETs were cut short: what they left out says nothing
	}
	if old := s.writers.Swap(&ws); !sameCurrency(*old, ws) {
		s.version.Add(1)
	}
}

// durations are the ages and Lease durations in a Writer's Why ("2m5s", "15s").
var durations = regexp.MustCompile(`\d+[smhdy]`)

// sameCurrency: the same writers by the same Leases, each as current as before, and each
// stopped one for the same reason (its Why without the durations, which move every refresh).
func sameCurrency(a, b map[string]matrix.Writer) bool {
	return maps.EqualFunc(a, b, func(x, y matrix.Writer) bool {
		return x.Lease == y.Lease && x.Current == y.Current && x.Unread == y.Unread &&
			(x.Current || durations.ReplaceAllString(x.Why, "") == durations.ReplaceAllString(y.Why, ""))
	})
}

// stripSummary keeps what names a summary's writer: its Lease and shard.
func stripSummary(obj any) (any, error) {
	s, ok := obj.(*v1alpha1.NetworkHealthSummary)
	if !ok {
		return obj, nil
	}
	return &v1alpha1.NetworkHealthSummary{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Status: v1alpha1.NetworkHealthSummaryStatus{LeaseName: s.Status.LeaseName, Writer: s.Status.Writer,
			Shard: s.Status.Shard, Shards: s.Status.Shards},
	}, nil
}
