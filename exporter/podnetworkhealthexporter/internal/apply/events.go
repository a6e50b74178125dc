// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// EventComponent is the Events' source component and reporting controller.
const EventComponent = "netpulse-pod-network-health"

// Event schedules one Event about obj under the write budget at priority p:
// writequeue.Event for the pairs' (behind verdict changes, ahead of everything else),
// writequeue.CheckEvent for declared checks' (behind the pairs', within the checks' share).
// Events are not coalesced. instance is the reporting instance (the host name).
//
// Built here, not through client-go's record.EventBroadcaster: that would need a sink that
// hands each Event to this queue (its own goroutine, spam filter and retries otherwise
// write outside the budget, the priorities and the shutdown flush); not done yet.
func (w *Writer) Event(client kubernetes.Interface, instance string, obj corev1.ObjectReference, typ, reason, msg string, t time.Time, p writequeue.Priority) {
	at := metav1.NewTime(t)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: obj.Namespace, Name: fmt.Sprintf("%.220s.%x", obj.Name, t.UnixNano())},
		InvolvedObject: obj,
		Reason:         reason, Message: v1alpha1.TruncateMessage(msg, 1024), Type: typ,
		Source:         corev1.EventSource{Component: EventComponent},
		FirstTimestamp: at, LastTimestamp: at, Count: 1,
		ReportingController: EventComponent, ReportingInstance: instance,
	}
	w.Enqueue(w.EventKey(), p, func(ctx context.Context) error {
		_, err := client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // a retry of a request that did reach the API
		}
		return err
	}, "event")
}
