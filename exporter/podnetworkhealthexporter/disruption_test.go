// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"testing"

	"github.com/netpulse/netpulse/internal/contract"
)

// Every disruption of the contract (the reasons markDisrupted writes) says why.
func TestEveryDisruptionHasAMessage(t *testing.T) {
	for _, d := range contract.Disruptions {
		if disruptionMessages[d] == "" {
			t.Errorf("disruption %s: no message in disruptionMessages", d)
		}
	}
	if len(disruptionMessages) != len(contract.Disruptions) {
		t.Errorf("disruptionMessages has %d entries; internal/contract has %d disruptions", len(disruptionMessages), len(contract.Disruptions))
	}
}
