// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package contract

import (
	"slices"
	"testing"
)

// Each closed list is a set: no value twice, none empty.
func TestEnumerationsAreSets(t *testing.T) {
	lists := map[string][]string{
		"ProbeTypes": ProbeTypes[:], "AddressProbeTypes": AddressProbeTypes[:], "TargetKinds": TargetKinds[:],
		"NetworkTypes": NetworkTypes[:], "ErrorTypes": ErrorTypes[:], "PathMTUStatuses": PathMTUStatuses[:],
		"Disruptions": Disruptions[:],
	}
	for name, list := range lists {
		seen := map[string]bool{}
		for _, v := range list {
			if v == "" || seen[v] {
				t.Errorf("%s: %q empty or listed twice", name, v)
			}
			seen[v] = true
		}
	}
	for _, p := range AddressProbeTypes {
		if !slices.Contains(ProbeTypes[:], p) {
			t.Errorf("AddressProbeTypes: %s is not one of ProbeTypes", p)
		}
	}
	// The exporter's per-pair RTT and the API's probe results put ICMP first.
	if ProbeTypes[0] != ProbeTypeICMP {
		t.Errorf("ProbeTypes starts with %s; ICMP must be first", ProbeTypes[0])
	}
}

// Enums hands out copies: a caller cannot change the contract.
func TestEnumsReturnsCopies(t *testing.T) {
	e := Enums()
	e[ProbeType][0] = "changed"
	if ProbeTypes[0] != ProbeTypeICMP || Enums()[ProbeType][0] != ProbeTypeICMP {
		t.Fatal("Enums shares its slices with the contract")
	}
	for _, k := range []string{NetworkType, ProbeType, TargetKind, ErrorType, PathMTUStatus} {
		if len(Enums()[k]) == 0 {
			t.Errorf("Enums: no values for %s", k)
		}
	}
}
