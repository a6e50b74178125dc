// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// helmOnlyLabels are the labels the chart adds to every object (and pod template) that
// deploy/ has no use for.
var helmOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// generatorSuffix is the content hash kustomize's configMapGenerator appends to a name.
var generatorSuffix = regexp.MustCompile(`^(netpulse-(agent|gateway)-config)-[a-z0-9]{10}$`)

// One source of truth: `helm template` with the default values renders the objects of
// `kubectl kustomize deploy/agent-gateway`, field for field, with the same collector
// configurations (compared as data: the chart renders them without comments). Normalised
// away: the chart's Helm labels and checksum/config annotations, kustomize's hash suffix
// on the generated ConfigMaps (the chart rolls pods by checksum instead). By design the
// chart renders no Namespace by default (`helm install --create-namespace` makes it;
// namespace.create=true renders this one, checked below) and adds the generated TLS Secret
// and its CA's (tls.generate, which deploy/ leaves to hack/gateway-tls-secret.sh).
func TestChartMatchesKustomize(t *testing.T) {
	bins, err := kubetest.FindBinaries()
	require.NoError(t, err)
	if bins.Kubectl == "" {
		t.Fatal("bin/kubectl missing: run make kube-bins")
	}
	out, err := exec.Command(bins.Kubectl, "kustomize", kubetest.DeployPath("agent-gateway")).CombinedOutput()
	require.NoError(t, err, "kubectl kustomize:\n%s", out)
	kust, err := Decode(out)
	require.NoError(t, err)
	chart := render(t, nil, "--include-crds")

	want := index(t, kust, normaliseKustomize)
	got := index(t, chart, normaliseHelm)
	ns := want["Namespace//netpulse"]
	require.NotNil(t, ns)
	delete(want, "Namespace//netpulse")
	require.NotNil(t, got["Secret/netpulse/netpulse-gateway-tls"], "the chart generates the TLS Secret by default")
	delete(got, "Secret/netpulse/netpulse-gateway-tls")
	require.NotNil(t, got["Secret/netpulse/netpulse-gateway-tls-ca"], "and its CA's, kept for reissues")
	delete(got, "Secret/netpulse/netpulse-gateway-tls-ca")

	require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), "the chart and deploy/agent-gateway render different objects")
	for k := range want {
		require.Empty(t, cmp.Diff(want[k], got[k]), "%s differs between kubectl kustomize deploy/agent-gateway (-) and helm template (+)", k)
	}

	// namespace.create renders deploy/agent-gateway's Namespace.
	withNS := index(t, render(t, map[string]any{"namespace": map[string]any{"create": true}}), normaliseHelm)
	require.Empty(t, cmp.Diff(ns, withNS["Namespace//netpulse"]))
}

func index(t *testing.T, objs []Object, normalise func(Object)) map[string]Object {
	t.Helper()
	m := map[string]Object{}
	for _, o := range objs {
		normalise(o)
		ns, _ := nested(o, "metadata", "namespace").(string)
		k := fmt.Sprintf("%s/%s/%s", o["kind"], ns, nested(o, "metadata", "name"))
		require.NotContains(t, m, k, "rendered twice")
		if o["kind"] == "ConfigMap" {
			// Collector configurations as data.
			for key, v := range o["data"].(map[string]any) {
				var cfg any
				require.NoError(t, yaml.Unmarshal([]byte(v.(string)), &cfg), "%s %s", k, key)
				o["data"].(map[string]any)[key] = cfg
			}
		}
		m[k] = o
	}
	return m
}

func normaliseKustomize(o Object) {
	meta := o["metadata"].(map[string]any)
	if o["kind"] == "ConfigMap" {
		meta["name"] = generatorSuffix.ReplaceAllString(meta["name"].(string), "$1")
	}
	// The workloads' references to the generated ConfigMaps.
	vols, _ := nested(o, "spec", "template", "spec", "volumes").([]any)
	for _, v := range vols {
		if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
			cm["name"] = generatorSuffix.ReplaceAllString(cm["name"].(string), "$1")
		}
	}
}

func normaliseHelm(o Object) {
	strip := func(meta map[string]any) {
		if meta == nil {
			return
		}
		if labels, ok := meta["labels"].(map[string]any); ok {
			for _, l := range helmOnlyLabels {
				delete(labels, l)
			}
			if len(labels) == 0 {
				delete(meta, "labels")
			}
		}
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, "checksum/config")
			if len(ann) == 0 {
				delete(meta, "annotations")
			}
		}
	}
	strip(o["metadata"].(map[string]any))
	if tmpl, ok := nested(o, "spec", "template", "metadata").(map[string]any); ok {
		strip(tmpl)
	}
}

// deploy/readiness-gate-injection renders the objects the chart renders with
// readinessGate.inject.enabled (and the readiness condition's writer on), field for field:
// the same policy, match conditions and patch, binding and namespace label.
func TestInjectionMatchesKustomize(t *testing.T) {
	bins, err := kubetest.FindBinaries()
	require.NoError(t, err)
	if bins.Kubectl == "" {
		t.Fatal("bin/kubectl missing: run make kube-bins")
	}
	out, err := exec.Command(bins.Kubectl, "kustomize", kubetest.DeployPath("readiness-gate-injection")).CombinedOutput()
	require.NoError(t, err, "kubectl kustomize:\n%s", out)
	kust, err := Decode(out)
	require.NoError(t, err)
	want := index(t, kust, normaliseKustomize)
	got := map[string]Object{}
	for k, o := range index(t, render(t, injectValues(nil)), normaliseHelm) {
		if strings.HasPrefix(k, "MutatingAdmissionPolicy") {
			got[k] = o
		}
	}
	require.Equal(t, []string{"MutatingAdmissionPolicy//netpulse-readiness-gate", "MutatingAdmissionPolicyBinding//netpulse-readiness-gate"}, slices.Sorted(maps.Keys(want)))
	require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)))
	for k := range want {
		require.Empty(t, cmp.Diff(want[k], got[k]), "%s differs between kubectl kustomize deploy/readiness-gate-injection (-) and helm template (+)", k)
	}
}
