/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1/v1alpha1test"
)

// SizeLimit is the bound on a worst-case object (DESIGN: objects stay well under 20 KB).
const SizeLimit = 20 * 1024

const crdFile = "../../deploy/crds/netpulse.io_podnetworkhealths.yaml"

// loadSchema returns the generated CRD's openAPIV3Schema as generic JSON.
func loadSchema(t testing.TB) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(crdFile))
	if err != nil {
		t.Fatalf("read CRD (run `make generate-api`): %v", err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("CRD YAML: %v", err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(js, &crd); err != nil {
		t.Fatalf("CRD JSON: %v", err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == v1alpha1.Version {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("CRD has no version %s", v1alpha1.Version)
	return nil
}

// Limits the schema cannot express in maxLength/enum, by schema path ("[]" is any item).
var (
	// metav1.Condition's schema allows long types, reasons and messages; the CRD caps them
	// with CEL rules on status.conditions.
	celMaxLength = map[string]int{
		"status.conditions[].type":    64,
		"status.conditions[].reason":  v1alpha1.MaxReasonLength,
		"status.conditions[].message": v1alpha1.MaxMessageLength,
	}
	// Union members that are smaller than the member WorstCase sets (targetPodRef), and the
	// discriminator whose longest value ("External") selects a smaller member.
	smallerAlternatives = map[string]bool{
		"spec.targetNodeRef":  true,
		"spec.targetEndpoint": true,
		"spec.targetKind":     true,
		// The key of a list map: the four probe types are distinct by definition.
		"status.probes[].type": true,
	}
)

// checkWorstCase walks the schema and the object together and reports every place where the
// object is not as large as the schema allows: an absent property, a list shorter than
// maxItems, a string shorter than its maxLength (or longest enum value), an integer narrower
// than its format, and any string or list the schema does not bound at all.
func checkWorstCase(schema map[string]any, value any, path string, problems *[]string) {
	report := func(format string, args ...any) {
		*problems = append(*problems, path+": "+fmt.Sprintf(format, args...))
	}
	typ, _ := schema["type"].(string)
	switch typ {
	case "object":
		if path == "metadata" {
			return // ObjectMeta: bounded by the API server, not by this schema
		}
		obj, ok := value.(map[string]any)
		if !ok {
			report("expected an object, got %T", value)
			return
		}
		props, _ := schema["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if path == "" && (name == "apiVersion" || name == "kind") {
				continue // fixed by the API server
			}
			child := join(path, name)
			v, present := obj[name]
			if !present {
				if !smallerAlternatives[child] {
					report("property %q absent", name)
				}
				continue
			}
			checkWorstCase(props[name].(map[string]any), v, child, problems)
		}
	case "array":
		list, ok := value.([]any)
		if !ok {
			report("expected a list, got %T", value)
			return
		}
		maxItems, bounded := schema["maxItems"].(float64)
		if !bounded {
			report("list without maxItems")
		} else if len(list) != int(maxItems) {
			report("%d items, maxItems is %d", len(list), int(maxItems))
		}
		items, _ := schema["items"].(map[string]any)
		for _, item := range list {
			checkWorstCase(items, item, path+"[]", problems)
		}
	case "string":
		s, ok := value.(string)
		if !ok {
			report("expected a string, got %T", value)
			return
		}
		want := -1
		switch {
		case schema["enum"] != nil:
			for _, e := range schema["enum"].([]any) {
				want = max(want, utf8.RuneCountInString(e.(string)))
			}
		case schema["format"] == "date-time":
			want = len("2006-01-02T15:04:05Z") // metav1.Time: RFC 3339, seconds, UTC
		case celMaxLength[path] > 0:
			want = celMaxLength[path]
		case schema["maxLength"] != nil:
			want = int(schema["maxLength"].(float64))
		default:
			report("string without maxLength")
			return
		}
		if n := utf8.RuneCountInString(s); n != want && !smallerAlternatives[path] {
			report("%d characters, the limit is %d", n, want)
		}
	case "integer":
		n, ok := value.(json.Number)
		if !ok {
			report("expected a number, got %T", value)
			return
		}
		want := fmt.Sprint(math.MaxInt64)
		if schema["format"] == "int32" {
			want = fmt.Sprint(math.MaxInt32)
		}
		if n.String() != want {
			report("%s is not the widest value %s", n, want)
		}
	case "boolean":
	default:
		report("unexpected schema type %q", typ)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// TestWorstCaseSize proves the bound: the largest object the schema admits (every list at
// maxItems, every string at maxLength, checked against the generated CRD so a new unbounded
// or unfilled field fails here) serialises to less than 20 KB. Create-through-the-server of
// the same object is in api/v1alpha1/test.
func TestWorstCaseSize(t *testing.T) {
	schema := loadSchema(t)
	obj := v1alpha1test.WorstCase(v1alpha1test.LongNamespace("ns"), "0a1b2c3d-0a1b-4c3d-8e4f-0a1b2c3d4e5f")

	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic map[string]any
	if err := dec.Decode(&generic); err != nil {
		t.Fatal(err)
	}
	var problems []string
	checkWorstCase(schema, generic, "", &problems)
	if len(problems) > 0 {
		t.Errorf("WorstCase is not the worst case the schema admits:\n  %s", strings.Join(problems, "\n  "))
	}

	t.Logf("worst-case object: %d bytes of JSON (limit %d): spec %d, status %d (probes %d, outages %d, conditions %d)",
		len(raw), SizeLimit, jsonLen(t, obj.Spec), jsonLen(t, obj.Status),
		jsonLen(t, obj.Status.Probes), jsonLen(t, obj.Status.Outages), jsonLen(t, obj.Status.Conditions))
	if len(raw) >= SizeLimit {
		t.Fatalf("worst-case object is %d bytes, must be < %d", len(raw), SizeLimit)
	}
}

func jsonLen(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestSchemaPatternsMatchHelpers ties the Go helpers to the generated schema: what DurationOf
// and RatioOf write matches the CRD's patterns and fits maxLength.
func TestSchemaPatternsMatchHelpers(t *testing.T) {
	schema := loadSchema(t)
	status := schema["properties"].(map[string]any)["status"].(map[string]any)["properties"].(map[string]any)
	durSchema := status["window"].(map[string]any)
	ratioSchema := status["lossRatio"].(map[string]any)
	durRE := regexp.MustCompile(durSchema["pattern"].(string))
	ratioRE := regexp.MustCompile(ratioSchema["pattern"].(string))
	durMax := int(durSchema["maxLength"].(float64))
	ratioMax := int(ratioSchema["maxLength"].(float64))
	if durMax != v1alpha1.MaxDurationLength {
		t.Errorf("Duration maxLength %d, MaxDurationLength %d", durMax, v1alpha1.MaxDurationLength)
	}
	for _, d := range durationSamples() {
		s := string(v1alpha1.DurationOf(d))
		if !durRE.MatchString(s) || len(s) > durMax {
			t.Errorf("DurationOf(%v) = %q does not satisfy the schema (pattern %s, maxLength %d)", d, s, durRE, durMax)
		}
	}
	for _, c := range ratioSamples() {
		s := string(v1alpha1.RatioOf(c.part, c.whole))
		if !ratioRE.MatchString(s) || len(s) > ratioMax {
			t.Errorf("RatioOf(%d, %d) = %q does not satisfy the schema (pattern %s, maxLength %d)", c.part, c.whole, s, ratioRE, ratioMax)
		}
	}
	// Everything the Duration pattern admits within maxLength parses, without overflow.
	for _, s := range []string{"0s", "99999h99999h99999h99999h", "99999.999999999h99999.99999999h", "1.5us", "850us", "0.000000001ns"} {
		if !durRE.MatchString(s) || len(s) > durMax {
			t.Errorf("%q should be admitted by the Duration schema", s)
			continue
		}
		if _, err := v1alpha1.Duration(s).Duration(); err != nil {
			t.Errorf("%q admitted by the schema but does not parse: %v", s, err)
		}
	}
	for _, s := range []string{"-1ms", "1.5µs", "1", "", "1d", "1h2m3s4ms5us", "1e3ms", "+1s", " 1s"} {
		if durRE.MatchString(s) {
			t.Errorf("%q should be rejected by the Duration pattern", s)
		}
	}
	for _, s := range []string{"-0.1", "1.5", "2", "0.1234567", ".5", "0.", "1.01", "NaN"} {
		if ratioRE.MatchString(s) {
			t.Errorf("%q should be rejected by the Ratio pattern", s)
		}
	}
}
