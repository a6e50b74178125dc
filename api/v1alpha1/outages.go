/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OngoingOutage returns the ongoing outage (the newest entry, when it has no end), or nil.
func (s *PodNetworkHealthStatus) OngoingOutage() *Outage {
	if len(s.Outages) == 0 || s.Outages[0].End != nil {
		return nil
	}
	return &s.Outages[0]
}

// StartOutage records that an outage began at start, keeping the history newest first and
// at most MaxOutages long (the oldest entries are dropped). Reason and message are
// truncated to the API's limits. It returns false, and changes nothing, when an outage is
// already ongoing.
func (s *PodNetworkHealthStatus) StartOutage(start metav1.Time, reason, message string) bool {
	if s.OngoingOutage() != nil {
		return false
	}
	// A clock step backwards must not produce an entry that starts before the previous
	// outage ended (the API rejects overlapping entries).
	if len(s.Outages) > 0 && s.Outages[0].End != nil && start.Before(s.Outages[0].End) {
		start = *s.Outages[0].End
	}
	o := Outage{
		Start:   start,
		Reason:  TruncateMessage(reason, MaxReasonLength),
		Message: TruncateMessage(message, MaxMessageLength),
	}
	n := min(len(s.Outages)+1, MaxOutages)
	outages := make([]Outage, n)
	outages[0] = o
	copy(outages[1:], s.Outages)
	s.Outages = outages
	return true
}

// EndOutage closes the ongoing outage at end; a non-empty message replaces the outage's
// message (for example "restored after 2m5s"). It returns false, and changes nothing, when
// no outage is ongoing.
func (s *PodNetworkHealthStatus) EndOutage(end metav1.Time, message string) bool {
	o := s.OngoingOutage()
	if o == nil {
		return false
	}
	if end.Before(&o.Start) {
		end = o.Start
	}
	o.End = &end
	if message != "" {
		o.Message = TruncateMessage(message, MaxMessageLength)
	}
	return true
}
