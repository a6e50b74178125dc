// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture is a small repository: a component with metadata.yaml, a collector helper's
// metadata.yaml, a Makefile, the chart's values.yaml and docs.
var fixture = map[string]string{
	"Makefile": "GO ?= go\n.PHONY: lint\nlint: ## lint\n\t@true\ntest-real: kube-bins\n\t@true\n",
	"receiver/fooreceiver/metadata.yaml": `type: foo
attributes:
  netpulse.probe.type: {type: string}
metrics:
  netpulse.probe.errors:
    unit: "{probe}"
    sum: {value_type: int, monotonic: true}
  netpulse.probe.loss.ratio:
    unit: "1"
    gauge: {value_type: double}
telemetry:
  metrics:
    pod_probe.rounds:
      unit: "{round}"
      sum: {value_type: int, monotonic: true}
    pod_probe.round_duration:
      unit: s
      histogram: {value_type: double}
`,
	"receiver/fooreceiver/internal/decode/x.go": "package decode\n",
	"receiver/fooreceiver/docs/engine.md":       "# Engine\n\nThe decoder: `internal/decode`.\n",
	"collector/receiverhelper/metadata.yaml": `telemetry:
  metrics:
    receiver_accepted_metric_points:
      sum: {value_type: int, monotonic: true}
`,
	"deploy/helm/netpulse/values.yaml": `probe:
  interval: 10s
gateway:
  shards: 1
  config: {}
  writeBudget:
    qps: null
`,
	"hack/tool.sh": "#!/bin/sh\n",
	"docs/a.md": "# Title\n\n## Gateway shards ([sharding](b.md))\n\n## Gateway shards ([sharding](b.md))\n\n" +
		"<a id=\"custom\"></a>\n\n## `make test-real`: `go test -v ./x/`\n",
	"docs/b.md": `# B

Links: [a](a.md#gateway-shards-sharding), [again](a.md#gateway-shards-sharding-1),
[custom](a.md#custom), [heading with code](a.md#make-test-real-go-test--v-x), [self](#b),
[dir](../hack), [external](https://example.com/x#y), [engine](../receiver/fooreceiver/docs/engine.md).

Metrics: ` + "`otelcol_pod_probe_rounds`, `otelcol_pod_probe_round_duration_bucket`, " +
		"`otelcol_receiver_accepted_metric_points`, `netpulse_probe_errors_total`, " +
		"`netpulse_probe_loss_ratio`, `netpulse_probe_duration_seconds_bucket`, `netpulse.probe.errors`, " +
		"`netpulse_probe_type`, `otelcol_pod_probe_*`." + `

Values: ` + "`gateway.shards`, `--set probe.interval=5s`, `gateway.config.exporters.x`, " +
		"`gateway.writeBudget.qps`, `gateway.yaml` (a file), `tls.crt` (not a value)." + `

Run ` + "`make lint`, `DEMO_REAL=1 make test-real`" + `; see hack/tool.sh and ` + "`./receiver/fooreceiver/...`" + `,
` + "`internal/decode`" + ` (the component's), ` + "`kubectl port-forward deploy/netpulse-gateway 8089`" + `.

` + "```sh\nmake lint\nhelm install x --set gateway.shards=2\n```\n",
}

func writeFixture(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	return root
}

func check(t *testing.T, files map[string]string) []string {
	t.Helper()
	root := writeFixture(t, files)
	var docs []string
	for name := range files {
		if strings.HasSuffix(name, ".md") {
			docs = append(docs, name)
		}
	}
	c, err := New(root, docs, []string{filepath.Join(root, "collector", "receiverhelper")})
	require.NoError(t, err)
	var out []string
	for _, p := range c.Check() {
		out = append(out, p.String())
	}
	return out
}

func TestFixturePasses(t *testing.T) {
	assert.Empty(t, check(t, fixture))
}

// Each planted error is found, with its file and line, and nothing else is.
func TestPlantedErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		want string
	}{
		"missing file":         {"See [x](nope.md).", "docs/c.md:1: link nope.md: docs/nope.md does not exist"},
		"broken anchor":        {"See [x](a.md#gateway-shards).", "docs/c.md:1: link a.md#gateway-shards: docs/a.md has no heading with anchor #gateway-shards"},
		"own anchor":           {"# C\n\n[x](#d)", "docs/c.md:3: link #d: docs/c.md has no heading with anchor #d"},
		"reference link":       {"[x][y]\n\n[y]: ../nothere.md", "docs/c.md:3: link ../nothere.md: nothere.md does not exist"},
		"_total internal":      {"`otelcol_pod_probe_rounds_total`", "docs/c.md:1: metric otelcol_pod_probe_rounds_total exists in no metadata.yaml (nor as the collector names it)"},
		"exported sans _total": {"`netpulse_probe_errors`", "docs/c.md:1: metric netpulse_probe_errors exists in no metadata.yaml (nor as the collector names it)"},
		"OTel name":            {"`netpulse.probe.rtt`", "docs/c.md:1: metric netpulse.probe.rtt exists in no metadata.yaml (nor as the collector names it)"},
		"unknown prefix":       {"`otelcol_pod_nothing_*`", "docs/c.md:1: no metric begins with otelcol_pod_nothing_"},
		"chart value":          {"Set `gateway.goMemLimit`.", "docs/c.md:1: chart value gateway.goMemLimit: values.yaml has no gateway.goMemLimit"},
		"chart value --set":    {"```\nhelm upgrade --set probe.intervall=5s\n```", "docs/c.md:2: chart value probe.intervall: values.yaml has no probe.intervall"},
		"make target":          {"Run `make docs`.", "docs/c.md:1: make docs: no such target in the Makefile"},
		"make in a block":      {"```\n$ make lint test\n```", "docs/c.md:2: make test: no such target in the Makefile"},
		"path":                 {"See hack/tools.sh.", "docs/c.md:1: path hack/tools.sh does not exist (relative to the repository, the file or a component)"},
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"docs/c.md": tc.doc}
			for k, v := range fixture {
				files[k] = v
			}
			assert.Equal(t, []string{tc.want}, check(t, files))
		})
	}
}

func TestIgnoreMarker(t *testing.T) {
	files := map[string]string{"docs/c.md": "<!-- doccheck:ignore probe.intervall -->\n```\n$ helm install --set probe.intervall=5s\nError: ...\n```\n"}
	for k, v := range fixture {
		files[k] = v
	}
	assert.Empty(t, check(t, files))
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Real nodes (`make test-real`: `go test -v -run '^TestRealNodes$' ./internal/e2ereal/`)": "real-nodes-make-test-real-go-test--v--run-testrealnodes-internale2ereal",
		"Zones: failures above the node (zones)":                                                 "zones-failures-above-the-node-zones",
		"The scale simulation (`internal/scalesim`)":                                             "the-scale-simulation-internalscalesim",
		"Gateway shards ([sharding](sharding.md))":                                               "gateway-shards-sharding",
		"**Bold** and *em*, a_b":                                                                 "bold-and-em-a_b",
	} {
		assert.Equal(t, want, Slug(h), h)
	}
}
