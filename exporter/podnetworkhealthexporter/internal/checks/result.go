// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/identity"
)

// Skip reasons of check results (otelcol_pod_network_health_datapoints_skipped).
const (
	SkipCheckUnknown      = "check_unknown"         // no such check (or not accepted)
	SkipCheckWrongVantage = "check_wrong_vantage"   // not the vantage point the check was placed on
	SkipCheckMalformed    = "check_malformed"       // a record without the contract's attributes
	SkipCheckUnauthentic  = "check_unauthenticated" // require_authenticated_observers: no or another identity
	SkipCheckInvalid      = "check_invalid"         // a reason, source address or reporter name the API schema would refuse
	// maxSourceAddressLength is the schema's bound of status.vantage.sourceAddress.
	maxSourceAddressLength = 64
)

// result is one check result as pod_probe reported it (decoded by the edge, logs.go).
type result struct {
	key checkKey
	uid types.UID // the check's UID the reporter ran ("" if it did not say)
	// complete: the record had the contract's attributes (kind, namespace, name, success,
	// a timestamp).
	complete bool
	at       time.Time
	success  bool
	reason   string
	message  string
	latency  float64 // seconds, as reported (NaN, negative or huge are read as none)
	source   string  // the address the probe left from
	// The reporter: its resource's namespace, pod and node.
	reporterNS, reporterPod, reporterNode string
}

// checkEvent is an Event the fold of a result gives: on the check key (of uid).
type checkEvent struct {
	key checkKey
	uid types.UID
	ev  checkstatus.Event
}

// fold folds one result into its check and returns the Events to emit, or a skip reason.
// bd is the reporter's binding (nil without require_authenticated_observers).
func (b *book) fold(r result, bd *identity.Binding, now time.Time) ([]checkEvent, string) {
	if !r.complete || r.key.kind == "" || r.key.namespace == "" || r.key.name == "" {
		return nil, SkipCheckMalformed
	}
	cs, ok := b.checks[r.key]
	if !ok || !cs.place.accepted || (r.uid != "" && r.uid != cs.uid) {
		return nil, SkipCheckUnknown
	}
	// Only the vantage point the check was placed on may report for it: its sidecar (the
	// source pod itself) or the agent of the source pod's node.
	switch cs.place.mode {
	case v1alpha1.VantageSidecar:
		if r.reporterNS != r.key.namespace || r.reporterPod != cs.place.sourcePod {
			return nil, SkipCheckWrongVantage
		}
	default:
		if r.reporterNode != cs.place.node {
			return nil, SkipCheckWrongVantage
		}
	}
	// A check placed on a node's agent takes results from an agent only: a sidecar vouches
	// for its own pod's checks, never for agent-mode checks placed on its node.
	if bd != nil && cs.place.mode != v1alpha1.VantageSidecar {
		if refusal, ok := bd.Agent(); !ok {
			return nil, string(refusal)
		}
	}
	if r.at.After(now.Add(time.Minute)) {
		return nil, SkipCheckMalformed
	}
	if !validResult(r.reason, r.source, r.reporterNS, r.reporterPod) {
		return nil, SkipCheckInvalid
	}
	lat := r.latency
	if !(lat >= 0 && lat <= 3600) { // NaN too
		lat = 0
	}
	entry := checkstatus.Entry{Time: r.at, Success: r.success, Reason: r.reason, Message: r.message,
		Latency: time.Duration(lat * float64(time.Second))}
	flavour := checkstatus.FlavourNetpulse
	if r.key.kind == ocv1alpha1.Kind {
		flavour = checkstatus.FlavourOpenShift
	}
	var evs []checkstatus.Event
	prev := cs.st.Reachable
	cs.st, evs = checkstatus.Apply(cs.st, flavour, entry)
	explainReachable(cs, prev)
	cs.seenAt = now
	cs.observerPod = r.reporterNS + "/" + r.reporterPod
	if r.source != "" {
		cs.sourceAddress = r.source
	}
	out := make([]checkEvent, 0, len(evs))
	for _, ev := range evs {
		out = append(out, checkEvent{key: cs.key, uid: cs.uid, ev: ev})
	}
	return out, ""
}

// validResult checks what a sender reports against the API schema of the status it ends
// up in, before anything is queued: the reason (the Reachable condition's reason pattern,
// at most 64 characters), the source address (an IP address, at most 64 characters) and
// the reporter's namespace and pod name (status.vantage.observerPod, at most 317). One
// record that the API would refuse would otherwise make every status write of its check
// fail with 422. Messages need no check: they are cut to the schema's length.
func validResult(reason, src, rNs, rPod string) bool {
	if !checkstatus.ValidReason(reason) || slices.Contains(contract.GatewayCheckReasons[:], reason) {
		return false // reasons only the gateway gives (NetworkPolicyDenied) are not a reporter's to claim
	}
	if src != "" {
		if len(src) > maxSourceAddressLength {
			return false
		}
		if _, err := netip.ParseAddr(src); err != nil {
			return false
		}
	}
	if rNs != "" && len(validation.IsDNS1123Label(rNs)) > 0 {
		return false
	}
	if rPod != "" && len(validation.IsDNS1123Subdomain(rPod)) > 0 {
		return false
	}
	return true
}
