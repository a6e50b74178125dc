// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"testing"

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
