// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"slices"
	"testing"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/contract"
)

// Every probe type of the contract has its place, in the contract's order.
func TestProbeIndexFollowsTheContract(t *testing.T) {
	for i, p := range contract.ProbeTypes {
		if got := ProbeIndex(p); got != i {
			t.Errorf("ProbeIndex(%s) = %d, want %d", p, got, i)
		}
	}
	if got := ProbeIndex("quic"); got != -1 {
		t.Errorf("ProbeIndex of an unknown type = %d, want -1", got)
	}
}

// Every error type of the contract maps to an API failure reason of its own, but those
// deliberately read as the generic Error: a new error type cannot fall through unnoticed.
func TestEveryErrorTypeHasAFailureReason(t *testing.T) {
	generic := map[string]bool{contract.ErrorTypeOther: true, contract.ErrorTypePermission: true}
	for _, e := range contract.ErrorTypes {
		if got := FailureReason(e); (got == "Error") != generic[e] {
			t.Errorf("FailureReason(%s) = %s; map it to an API reason (or list it here as generic)", e, got)
		}
	}
}

// The leaf types keep the API's words without importing the API: they must stay its words.
func TestAPIWordsAreTheAPIs(t *testing.T) {
	for got, want := range map[TargetKind]v1alpha1.TargetKind{
		TargetPod: v1alpha1.TargetKindPod, TargetNode: v1alpha1.TargetKindNode, TargetExternal: v1alpha1.TargetKindExternal,
	} {
		if string(got) != string(want) {
			t.Errorf("target kind %s; the API says %s", got, want)
		}
	}
	api := []string{v1alpha1.FailureReasonTimeout, v1alpha1.FailureReasonConnectionRefused, v1alpha1.FailureReasonHostUnreachable,
		v1alpha1.FailureReasonDNSError, v1alpha1.FailureReasonTLSError, v1alpha1.FailureReasonHTTPStatus, v1alpha1.FailureReasonError}
	for _, e := range append(contract.ErrorTypes[:], "", "unknown") {
		if r := FailureReason(e); !slices.Contains(api, r) {
			t.Errorf("FailureReason(%q) = %s, not one of the API's FailureReason* (%v)", e, r, api)
		}
	}
}
