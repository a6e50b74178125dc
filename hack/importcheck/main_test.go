// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	const (
		view     = module + "/extension/netpulseviewextension"
		viewSub  = module + "/extension/netpulseviewextension/viewserver"
		viewMeta = module + "/extension/netpulseviewextension/internal/metadata"
		exporter = module + "/exporter/podnetworkhealthexporter"
		receiver = module + "/receiver/podprobereceiver"
	)
	pkgs := []Package{
		// Allowed: its own tree, shared packages, third-party packages.
		{ImportPath: view, Imports: []string{viewMeta, module + "/internal/viewserver", "go.uber.org/zap"}},
		// The import this rule was written for: the kubectl plugin importing the extension's server.
		{ImportPath: module + "/cmd/kubectl-netpulse/plugin", Imports: []string{viewSub, module + "/internal/matrix"}},
		// A component importing another component, in its tests only.
		{ImportPath: receiver, TestImports: []string{exporter}},
		// A shared package importing a component.
		{ImportPath: module + "/internal/matrix", XTestImports: []string{viewSub}},
		// The distribution may import every component.
		{ImportPath: module + "/cmd/otelcol-netpulse", Imports: []string{view, exporter, receiver}},
		// Outside the module: never judged.
		{ImportPath: "example.com/other", Imports: []string{view}},
	}
	got := Check(pkgs)
	var lines []string
	for _, v := range got {
		lines = append(lines, v.String())
	}
	require.Len(t, got, 3, strings.Join(lines, "\n"))

	assert.Equal(t, module+"/cmd/kubectl-netpulse/plugin", got[0].Importer)
	assert.Equal(t, viewSub, got[0].Imported)
	assert.Contains(t, lines[0], "only cmd/otelcol-netpulse may import components (extension/netpulseviewextension)")

	assert.Equal(t, module+"/internal/matrix", got[1].Importer)
	assert.True(t, got[1].Test)
	assert.Contains(t, lines[1], "shared packages must not import components")

	assert.Equal(t, receiver, got[2].Importer)
	assert.Equal(t, exporter, got[2].Imported)
	assert.Contains(t, lines[2], "(in its tests): component receiver/podprobereceiver must not import component exporter/podnetworkhealthexporter")
}

func TestStageRules(t *testing.T) {
	const internal = module + "/exporter/podnetworkhealthexporter/internal/"
	pkgs := []Package{
		// Allowed: verdict's own subpackages and earlier stages; plan importing verdict
		// and writequeue.
		{ImportPath: internal + "verdict", Imports: []string{internal + "verdict/quorum", internal + "observation"}},
		{ImportPath: internal + "plan", Imports: []string{internal + "verdict", internal + "writequeue"}},
		// The import the rule was written for: verdict deciding write priorities.
		{ImportPath: internal + "verdict", Imports: []string{internal + "writequeue"}},
		// A subpackage of verdict, in its tests, importing a subpackage of plan's kin.
		{ImportPath: internal + "verdict/zones", XTestImports: []string{internal + "apply/sub"}},
		// A package merely named like a stage is not one.
		{ImportPath: internal + "verdictlike", Imports: []string{internal + "writequeue"}},
	}
	got := Check(pkgs)
	var lines []string
	for _, v := range got {
		lines = append(lines, v.String())
	}
	require.Len(t, got, 2, strings.Join(lines, "\n"))
	assert.Equal(t, internal+"verdict", got[0].Importer)
	assert.Equal(t, internal+"writequeue", got[0].Imported)
	assert.Contains(t, lines[0], "stage exporter/podnetworkhealthexporter/internal/verdict must not import exporter/podnetworkhealthexporter/internal/writequeue")
	assert.Equal(t, internal+"verdict/zones", got[1].Importer)
	assert.True(t, got[1].Test)
	assert.Contains(t, lines[1], "must not import exporter/podnetworkhealthexporter/internal/apply")
}

func TestComponentOf(t *testing.T) {
	for rel, want := range map[string]string{
		"exporter/podnetworkhealthexporter":                "exporter/podnetworkhealthexporter",
		"exporter/podnetworkhealthexporter/internal/plan":  "exporter/podnetworkhealthexporter",
		"extension/k8stokenauthextension/k8stokenauthtest": "extension/k8stokenauthextension",
		"internal/viewserver":                              "",
		"cmd/kubectl-netpulse/plugin":                      "",
		"receiver":                                         "",
		"":                                                 "",
	} {
		assert.Equal(t, want, componentOf(rel), rel)
	}
}

func TestDecode(t *testing.T) {
	pkgs, err := decode(strings.NewReader(`{"ImportPath":"a","Imports":["b"]}
{"ImportPath":"c","XTestImports":["d"]}`))
	require.NoError(t, err)
	assert.Equal(t, []Package{{ImportPath: "a", Imports: []string{"b"}}, {ImportPath: "c", XTestImports: []string{"d"}}}, pkgs)
}
