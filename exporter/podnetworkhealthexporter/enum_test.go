// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// metadata.yaml's enums are mdatagen's input and stay literal; the gray verdict's reasons
// and node sides are defined in the verdict stage (the reasons are the API's): the two
// must agree, or the node gauge would report values its documentation does not list.
func TestMetadataEnumsMatchVerdict(t *testing.T) {
	b, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Attributes map[string]struct {
			Enum []string `json:"enum"`
		} `json:"attributes"`
	}
	if err := yaml.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string][]string{
		"netpulse.gray.reason": verdict.GrayReasons[:],
		"netpulse.gray.side":   verdict.NodeSides[:],
	} {
		if got := md.Attributes[key].Enum; !slices.Equal(got, want) {
			t.Errorf("metadata.yaml: attribute %s lists %v; the verdict stage says %v (edit metadata.yaml, then make generate-metadata)", key, got, want)
		}
	}
}
