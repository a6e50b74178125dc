// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/internal/contract"
)

// metadataAttribute is what this test reads of an attribute in metadata.yaml.
type metadataAttribute struct {
	Description string   `json:"description"`
	Enum        []string `json:"enum"`
}

// metadata.yaml's enums are mdatagen's input and must stay literal; they must equal the
// telemetry contract's closed lists (contract.Enums), which the gateway's admission
// enforces: a value pod_probe emits that the contract lacks is refused there, and a value
// the contract adds that metadata.yaml lacks cannot be emitted.
func TestMetadataEnumsMatchContract(t *testing.T) {
	b, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Attributes map[string]metadataAttribute `json:"attributes"`
	}
	if err := yaml.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	want := contract.Enums()
	for _, key := range slices.Sorted(maps.Keys(want)) {
		a, ok := md.Attributes[key]
		if !ok {
			t.Errorf("metadata.yaml: no attribute %s (internal/contract lists its values)", key)
			continue
		}
		got := a.Enum
		if got == nil {
			// error.type is a plain string for mdatagen; its description lists the values
			// ("Low-cardinality failure class - timeout, refused, ..., other.").
			_, list, _ := strings.Cut(strings.Join(strings.Fields(a.Description), " "), " - ")
			for _, v := range strings.Split(strings.TrimSuffix(list, "."), ",") {
				got = append(got, strings.TrimSpace(v))
			}
		}
		if !slices.Equal(got, want[key]) {
			t.Errorf("metadata.yaml: attribute %s lists %v; internal/contract says %v (edit metadata.yaml, then make generate-metadata)",
				key, got, want[key])
		}
	}
	for key, a := range md.Attributes {
		if a.Enum != nil && want[key] == nil {
			t.Errorf("metadata.yaml: attribute %s has an enum %v that internal/contract's Enums lacks (the gateway's admission would not check it)", key, a.Enum)
		}
	}
}

// The emitter maps the contract's values to mdatagen's (generated from metadata.yaml): every
// probe type and target kind of the contract has one, and nothing else.
func TestEmitterEnumsMatchContract(t *testing.T) {
	if got := slices.Sorted(maps.Keys(probeTypes)); !slices.Equal(got, slices.Sorted(slices.Values(contract.ProbeTypes[:]))) {
		t.Errorf("mdatagen's probe types %v; internal/contract says %v", got, contract.ProbeTypes)
	}
	if got := slices.Sorted(maps.Keys(targetKinds)); !slices.Equal(got, slices.Sorted(slices.Values(contract.TargetKinds[:]))) {
		t.Errorf("mdatagen's target kinds %v; internal/contract says %v", got, contract.TargetKinds)
	}
}
