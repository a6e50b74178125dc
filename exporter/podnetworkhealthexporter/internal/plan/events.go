// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/internal/checkstatus"
)

// EventFlapping is the Event of a pair that failed again within the flap window of
// recovering: its outage reopens and is held open until the pair answers for the window
// (one such Event per flapping period; the outage's flaps field counts the cycles).
const EventFlapping = v1alpha1.EventFlapping

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

// EventDegraded: a pair's Degraded condition turned to PacketLoss or HighLatency.
const EventDegraded = "ConnectivityDegraded"

// degradedEvents returns one Warning Event per write that begins a gray episode on an
// object that had none (the record is what the write keeps).
func degradedEvents(ws []ObjectWrite) []Event {
	var out []Event
	for _, w := range ws {
		if w.Delete || !w.enteredGray {
			continue
		}
		out = append(out, Event{Key: w.Key, Type: corev1.EventTypeWarning, Reason: EventDegraded, Message: GrayMessage(w.Gray), At: w.Summary.LastObserved})
	}
	return out
}

// GrayMessage describes a pair's gray verdict with its figures and where it is blamed
// (the Degraded condition's message and the Event's).
func GrayMessage(g verdict.PairGray) string {
	st := g.Status
	var msg string
	switch g.Reason {
	case DegradedPacketLoss:
		switch g.Side {
		case verdict.SideTarget:
			msg = fmt.Sprintf("packet loss at the target's node %s: %s, lost from %d observer nodes", g.Node, st.LossText(), st.Contributors)
		case verdict.SideObserver:
			msg = fmt.Sprintf("packet loss at the observer's own node %s: %s, towards %d of its target nodes", g.Node, st.LossText(), st.Contributors)
		case verdict.SideZone:
			msg = fmt.Sprintf("packet loss between zones %s and %s: %s, from %d observer nodes in %s towards %d target nodes in %s",
				g.FromZone, g.ToZone, st.LossText(), st.Contributors, g.FromZone, g.TargetNodes, g.ToZone)
		default:
			msg = "packet loss on this path alone: " + st.LossText()
		}
	case DegradedHighLatency:
		switch g.Side {
		case verdict.SideZone:
			msg = fmt.Sprintf("high latency between zones %s and %s: %d %% of the recent rounds slow against their targets' baselines, from %d observer nodes in %s towards %d target nodes in %s",
				g.FromZone, g.ToZone, st.Exceeding, st.Contributors, g.FromZone, g.TargetNodes, g.ToZone)
		case verdict.SideObserver:
			msg = fmt.Sprintf("high latency at the observer's own node %s: %d %% of its recent rounds are slow against their targets' baselines", g.Node, st.Exceeding)
		default:
			msg = fmt.Sprintf("high latency at the target's node %s: RTT p50 %v against a learnt baseline of %v; %d of %d observer nodes see it slow",
				g.Node, st.Median.Round(10*time.Microsecond), st.Baseline.Round(10*time.Microsecond), st.Exceeding, st.Voters)
		}
	}
	return v1alpha1.TruncateMessage(msg, v1alpha1.MaxMessageLength)
}
