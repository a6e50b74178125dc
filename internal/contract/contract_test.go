// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package contract

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Each closed list is a set: no value twice, none empty.
func TestEnumerationsAreSets(t *testing.T) {
	lists := map[string][]string{
		"ProbeTypes": ProbeTypes[:], "AddressProbeTypes": AddressProbeTypes[:], "TargetKinds": TargetKinds[:],
		"NetworkTypes": NetworkTypes[:], "ErrorTypes": ErrorTypes[:], "PathMTUStatuses": PathMTUStatuses[:],
		"Disruptions": Disruptions[:], "GatewayCheckReasons": GatewayCheckReasons[:],
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

// docs/telemetry-contract.md lists each closed attribute's values (its target table, and
// a table of its own for path-MTU statuses): the doc must list the contract's.
func TestTelemetryContractDocListsTheValues(t *testing.T) {
	b, err := os.ReadFile("../../docs/telemetry-contract.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	code := regexp.MustCompile("`([^`]*)`")
	// codeIn returns the backquoted words of s.
	codeIn := func(s string) []string {
		var out []string
		for _, m := range code.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		return out
	}
	got := map[string][]string{}
	for i, l := range lines {
		for key := range Enums() {
			if rest, ok := strings.CutPrefix(l, "| `"+key+"` | "); ok {
				// The values, before any remark in parentheses.
				values, _, _ := strings.Cut(rest, " (")
				got[key] = codeIn(values)
			}
			if strings.HasPrefix(l, "| `"+key+"` | when |") {
				// A table of the values: the first cell of each row after the separator.
				for _, r := range lines[i+2:] {
					if !strings.HasPrefix(r, "| `") {
						if strings.HasPrefix(r, "| ") {
							continue
						}
						break
					}
					first, _, _ := strings.Cut(strings.TrimPrefix(r, "| "), " |")
					got[key] = append(got[key], codeIn(first)...)
				}
			}
		}
	}
	for key, want := range Enums() {
		if !slices.Equal(got[key], want) {
			t.Errorf("docs/telemetry-contract.md lists %s as %v; internal/contract says %v", key, got[key], want)
		}
	}
}

// docs/api.md's NetworkCheck status row lists the Reachable reasons, and docs/checks.md
// explains each reason only the gateway gives.
func TestDocsListTheGatewayCheckReasons(t *testing.T) {
	api, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	checks, err := os.ReadFile("../../docs/checks.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(api), "\n") {
		if strings.HasPrefix(l, "| `status.conditions` | `Accepted`") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("docs/api.md: no NetworkCheck status.conditions row")
	}
	for _, r := range GatewayCheckReasons {
		if !strings.Contains(row, "`"+r+"`") {
			t.Errorf("docs/api.md's NetworkCheck status.conditions row does not name %s", r)
		}
		if !strings.Contains(string(checks), "`"+r+"`") {
			t.Errorf("docs/checks.md does not explain %s", r)
		}
	}
}
