// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/checkstatus"
)

// EventFlapping is the Event of a pair that failed again within the flap window of
// recovering: its outage reopens and is held open until the pair answers for the window
// (one such Event per flapping period; the outage's flaps field counts the cycles).
const EventFlapping = "ConnectivityFlapping"

// Event is one Event to emit about a pair's object.
type Event struct {
	Key                   observation.PairKey
	Type, Reason, Message string
	At                    time.Time
}

// PairEvents returns the Events of real verdict changes, in order: an outage detected
// (anything -> Unreachable, Warning) or ended (Unreachable -> Reachable, Normal); other
// transitions (flaps back, Unknown) have none.
func PairEvents(ts []observation.Transition) []Event {
	var out []Event
	for _, t := range ts {
		var typ, reason string
		switch {
		case t.New == observation.VerdictUnreachable && t.Old != observation.VerdictUnreachable && t.Flapping:
			typ, reason = corev1.EventTypeWarning, EventFlapping
		case t.New == observation.VerdictUnreachable && t.Old != observation.VerdictUnreachable:
			typ, reason = corev1.EventTypeWarning, checkstatus.EventOutageDetected
		case t.New == observation.VerdictReachable && t.Old == observation.VerdictUnreachable:
			typ, reason = corev1.EventTypeNormal, checkstatus.EventRestored
		default:
			continue
		}
		msg := t.Message
		if msg == "" {
			msg = fmt.Sprintf("%s: %s -> %s", t.Key.String(), t.Old, t.New)
		}
		out = append(out, Event{Key: t.Key, Type: typ, Reason: reason, Message: msg, At: t.At})
	}
	return out
}
