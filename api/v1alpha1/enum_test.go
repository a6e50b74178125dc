/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/internal/contract"
)

// The API's closed lists that must stay literal are the +kubebuilder markers (controller-gen
// reads them, not the Go constants) and the CRDs generated from them (deploy/crds and the
// Helm chart's copy). These tests keep them equal to the telemetry contract's lists
// (internal/contract), from which the Go constants derive: a probe type added to the
// contract fails here until the markers say it too and `make generate` has run.

// capitalised is the API's spelling of the contract's target kinds (pod -> Pod).
func capitalised(values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = strings.ToUpper(v[:1]) + v[1:]
	}
	return out
}

func sorted(values []string) []string {
	out := slices.Clone(values)
	slices.Sort(out)
	return out
}

// marker returns the value of the +kubebuilder:validation:<name>= marker in the comment
// block right above the first line of file that starts with decl (trimmed).
func marker(t *testing.T, file, decl, name string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), decl) {
			continue
		}
		for j := i - 1; j >= 0 && strings.HasPrefix(strings.TrimSpace(lines[j]), "//"); j-- {
			c := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[j]), "//"))
			if v, ok := strings.CutPrefix(c, "+kubebuilder:validation:"+name+"="); ok {
				return v
			}
		}
		t.Fatalf("%s: no +kubebuilder:validation:%s marker above %q", file, name, decl)
	}
	t.Fatalf("%s: no line starts with %q", file, decl)
	return ""
}

func TestEnumMarkersMatchContract(t *testing.T) {
	for _, c := range []struct {
		file, decl string
		want       []string
		anyOrder   bool
	}{
		{"types.go", "type ProbeType string", contract.ProbeTypes[:], false},
		{"types.go", "type TargetKind string", capitalised(contract.TargetKinds[:]), false},
		// A declared check probes an address or URL: the contract's address probe types
		// (the marker keeps its own order, the CRD's).
		{"networkcheck_types.go", "Probe ProbeType `json:\"probe", contract.AddressProbeTypes[:], true},
	} {
		got := strings.Split(marker(t, c.file, c.decl, "Enum"), ";")
		want := c.want
		if c.anyOrder {
			got, want = sorted(got), sorted(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the Enum marker above %q is %v; internal/contract says %v (edit the marker, then make generate-api)",
				c.file, c.decl, got, want)
		}
	}
	if got := marker(t, "types.go", "Probes []ProbeResult", "MaxItems"); got != strconv.Itoa(MaxProbeTypes) {
		t.Errorf("types.go: status.probes MaxItems=%s; one result per probe type is %d (len(contract.ProbeTypes))", got, MaxProbeTypes)
	}
}

// schemaAt walks properties (and array items) of a CRD's first version's schema.
func schemaAt(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, path ...string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	s := *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, p := range path {
		if p == "[]" {
			s = *s.Items.Schema
			continue
		}
		next, ok := s.Properties[p]
		if !ok {
			t.Fatalf("%s: no property %s", crd.Name, strings.Join(path, "."))
		}
		s = next
	}
	return s
}

// enums are the enums a schema states, its own and its allOf's.
func enums(t *testing.T, s apiextensionsv1.JSONSchemaProps) [][]string {
	t.Helper()
	var out [][]string
	add := func(values []apiextensionsv1.JSON) {
		if len(values) == 0 {
			return
		}
		var list []string
		for _, v := range values {
			var str string
			if err := json.Unmarshal(v.Raw, &str); err != nil {
				t.Fatal(err)
			}
			list = append(list, str)
		}
		out = append(out, list)
	}
	add(s.Enum)
	for _, a := range s.AllOf {
		add(a.Enum)
	}
	return out
}

func readCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &crd
}

func TestCRDEnumsMatchContract(t *testing.T) {
	for _, dir := range []string{"../../deploy/crds", "../../deploy/helm/netpulse/crds"} {
		pnh := readCRD(t, filepath.Join(dir, "netpulse.io_podnetworkhealths.yaml"))
		nc := readCRD(t, filepath.Join(dir, "netpulse.io_networkchecks.yaml"))
		for _, c := range []struct {
			crd  *apiextensionsv1.CustomResourceDefinition
			path []string
			want [][]string // each enum the schema states, in order; sorted when anyOrder
			// anyOrder compares the last enum as a set.
			anyOrder bool
		}{
			{pnh, []string{"status", "probes", "[]", "type"}, [][]string{contract.ProbeTypes[:]}, false},
			{pnh, []string{"spec", "targetKind"}, [][]string{capitalised(contract.TargetKinds[:])}, false},
			{nc, []string{"spec", "probe"}, [][]string{contract.ProbeTypes[:], sorted(contract.AddressProbeTypes[:])}, true},
		} {
			got := enums(t, schemaAt(t, c.crd, c.path...))
			if c.anyOrder && len(got) > 0 {
				got[len(got)-1] = sorted(got[len(got)-1])
			}
			if !slices.EqualFunc(got, c.want, slices.Equal) {
				t.Errorf("%s/%s: %s enums %v; internal/contract says %v (make generate after the markers agree)",
					dir, c.crd.Name, strings.Join(c.path, "."), got, c.want)
			}
		}
		if got := schemaAt(t, pnh, "status", "probes").MaxItems; got == nil || *got != int64(len(contract.ProbeTypes)) {
			t.Errorf("%s/%s: status.probes maxItems %s; one result per probe type is %d", dir, pnh.Name, describe(got), len(contract.ProbeTypes))
		}
	}
}

func describe(n *int64) string {
	if n == nil {
		return "unset"
	}
	return strconv.FormatInt(*n, 10)
}
