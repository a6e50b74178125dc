// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package matrix

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// Writer is what a reader knows of the writer of a set of objects (a gateway, or one shard
// of it): whether its Lease says it is current. Every object a writer keeps is current
// while its Lease is renewed (NetworkHealthSummary.status.leaseName), whatever the object's
// age: at scale a healthy pair's object is rewritten rarely (its heartbeat stretches to the
// write budget, hours at 65,000 nodes), so its freshUntil alone would read it stale.
type Writer struct {
	// Lease is "namespace/name" of the writer's Lease.
	Lease string
	// Current: the Lease is held and renewed within its duration.
	Current bool
	// Why says so, for messages ("Lease renewed 3s ago by gateway-0").
	Why string
	// Unread: its Lease could not be read (no right to, or the API server not answering):
	// its currency is unknown, so its objects' freshUntil decides rather than a guess.
	Unread bool
}

// ShardKey is the key of Input.Writers for the objects of shard index of count: the value
// of their v1alpha1.LabelShard label, "" for an unsharded gateway's (no label).
func ShardKey(index, count int32) string {
	if count <= 1 {
		return ""
	}
	return fmt.Sprintf("%d-of-%d", index, count)
}

// WriterOf is the writer a summary names, by its Lease (err: it could not be read). The
// holder need not be the summary's writer: a new leader resumes its predecessor's objects,
// so they are current while anyone renews the Lease.
func WriterOf(s *v1alpha1.NetworkHealthSummary, l *coordinationv1.Lease, err error, now time.Time) Writer {
	w := Writer{Lease: s.Namespace + "/" + LeaseName(s)}
	w.Current, w.Why = LeaseCurrent(l, err, now)
	return w
}

// LeaseName is the name of the Lease a summary names, in the summary's namespace.
func LeaseName(s *v1alpha1.NetworkHealthSummary) string {
	if s.Status.LeaseName != "" {
		return s.Status.LeaseName
	}
	return s.Name // the summary is named after its Lease
}

// WritersFrom is what the summaries and the Leases they name say of the objects' writers,
// by ShardKey (Input.Writers); getLease reads one Lease. A Lease not found is a writer that
// stopped; one that cannot be read (no right to, or the API server not answering) is Unread:
// its objects' freshUntil decides rather than a guess.
func WritersFrom(summaries []*v1alpha1.NetworkHealthSummary, getLease func(namespace, name string) (*coordinationv1.Lease, error), now time.Time) map[string]Writer {
	out := map[string]Writer{}
	for _, s := range summaries {
		name := LeaseName(s)
		l, err := getLease(s.Namespace, name)
		var w Writer
		switch {
		case apierrors.IsNotFound(err):
			w = Writer{Lease: s.Namespace + "/" + name, Why: "Lease is gone: its writer stopped"}
		case err != nil:
			w = Writer{Lease: s.Namespace + "/" + name, Why: "Lease unreadable: " + err.Error(), Unread: true}
		default:
			w = WriterOf(s, l, nil, now)
		}
		k := ShardKey(s.Status.Shard, s.Status.Shards)
		if prev, dup := out[k]; !dup || w.Current && !prev.Current || prev.Unread && !w.Unread && !w.Current {
			// A summary left by an earlier writer of the same shard: the current one wins, and
			// a stopped one is surer than one whose Lease could not be read.
			out[k] = w
		}
	}
	return out
}

// LeaseCurrent says whether a Lease is held and renewed within its duration (err: it could
// not be read).
func LeaseCurrent(l *coordinationv1.Lease, err error, now time.Time) (bool, string) {
	switch {
	case err != nil:
		return false, "Lease unreadable: " + err.Error()
	case l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "":
		return false, "Lease held by nobody: no writer"
	case l.Spec.RenewTime == nil:
		return false, "Lease never renewed"
	}
	age := now.Sub(l.Spec.RenewTime.Time)
	held := 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		held = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if age > held {
		return false, fmt.Sprintf("Lease last renewed %s ago (duration %s): its writer stopped", duration.HumanDuration(age), held)
	}
	return true, fmt.Sprintf("Lease renewed %s ago by %s", duration.HumanDuration(max(age, 0)), *l.Spec.HolderIdentity)
}
