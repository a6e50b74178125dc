// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// helm returns bin/helm and the chart's directory, failing (never skipping) when bin/helm
// has not been built.
func helm(t testing.TB) (bin, chart string) {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	chart, err = ChartDir()
	require.NoError(t, err)
	return bin, chart
}

// runHelm runs bin/helm and returns its combined output and error.
func runHelm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	bin, _ := helm(t)
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

func repoPath(t testing.TB, parts ...string) string {
	t.Helper()
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(append([]string{root}, parts...)...)
}

// allFeatures is testdata/all-features.yaml: every optional feature on.
func allFeatures(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile("testdata/all-features.yaml")
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, yaml.Unmarshal(b, &v))
	return v
}

// render runs helm template with values (nil: defaults) and decodes the objects.
func render(t testing.TB, values map[string]any, args ...string) []Object {
	t.Helper()
	bin, chart := helm(t)
	out, err := Template(bin, chart, values, args...)
	require.NoError(t, err)
	objs, err := Decode(out)
	require.NoError(t, err)
	return objs
}

// mustFind returns the object of that kind and name, failing when there is none.
func mustFind(t testing.TB, objs []Object, kind, name string) Object {
	t.Helper()
	o := Find(objs, kind, name)
	require.NotNil(t, o, "no %s %s rendered", kind, name)
	return o
}

// configOf parses the collector configuration in a rendered ConfigMap.
func configOf(t testing.TB, objs []Object, configMap, key string) map[string]any {
	t.Helper()
	data, _ := nested(mustFind(t, objs, "ConfigMap", configMap), "data", key).(string)
	require.NotEmpty(t, data, "ConfigMap %s has no %s", configMap, key)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(data), &cfg))
	return cfg
}

// container returns the first container of a workload's pod template.
func container(t testing.TB, o Object) map[string]any {
	t.Helper()
	cs, _ := nested(o, "spec", "template", "spec", "containers").([]any)
	require.NotEmpty(t, cs)
	return cs[0].(map[string]any)
}

func kinds(objs []Object) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o["kind"].(string)]++
	}
	return n
}
