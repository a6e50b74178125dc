// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const goodMap = `# Developing

## Package map

| package | what it is for |
|---|---|
| ` + "`cmd/tool`" + ` | the shipped command (` + "`tool a|b`" + `) |
| ` + "`internal/core`" + ` | the shared core |
| ` + "`internal/coretest`" + ` | *ships nothing*: fixtures for the core's tests |

## Tests

| ` + "`internal/elsewhere`" + ` | a table of another section is not the map |
`

var (
	packages = []string{"cmd/tool", "internal/core", "internal/coretest"}
	shipped  = map[string]bool{"cmd/tool": true, "internal/core": true}
)

func TestWholeMapPasses(t *testing.T) {
	assert.Empty(t, Check([]byte(goodMap), packages, shipped))
	rs, found := rows([]byte(goodMap))
	require.True(t, found)
	require.Len(t, rs, 3)
	assert.Equal(t, "the shipped command (`tool a|b`)", rs[0].about)
}

// Each kind of error is found and says which package and line.
func TestEachProblem(t *testing.T) {
	for name, c := range map[string]struct {
		doc      string
		packages []string
		want     string
	}{
		"missing package": {goodMap, append(packages, "internal/newpkg"), "package internal/newpkg is missing"},
		"stale row": {strings.Replace(goodMap, "\n\n## Tests", "\n| `internal/gone` | removed long ago |\n\n## Tests", 1), packages,
			"internal/gone: no such package"},
		"listed twice": {strings.Replace(goodMap, "\n\n## Tests", "\n| `internal/core` | again |\n\n## Tests", 1), packages,
			"internal/core: listed again (first on line 8)"},
		"empty description": {strings.Replace(goodMap, "the shared core", "", 1), packages, "internal/core: say in one line"},
		"harness not marked": {strings.Replace(goodMap, "*ships nothing*: fixtures", "fixtures", 1), packages,
			`internal/coretest: no shipped binary`},
		"shipped marked": {strings.Replace(goodMap, "the shared core", "ships nothing, the shared core", 1), packages,
			`internal/core: a shipped binary`},
		"test bed shipped": {strings.Replace(goodMap, "\n\n## Tests", "\n| `testbed/bed` | the harness |\n\n## Tests", 1), append(packages, "testbed/bed"),
			`testbed/bed: a shipped binary (./cmd/otelcol-netpulse, ./cmd/kubectl-netpulse) links it, but testbed/ ships nothing`},
		"no section": {strings.Replace(goodMap, "## Package map", "## Packages", 1), packages, `no "## Package map" section`},
	} {
		t.Run(name, func(t *testing.T) {
			shipped := maps.Clone(shipped)
			if slices.Contains(c.packages, "testbed/bed") {
				shipped["testbed/bed"] = true
			}
			ps := Check([]byte(c.doc), c.packages, shipped)
			require.Len(t, ps, 1, "%v", ps)
			assert.Contains(t, ps[0].String(), c.want)
			assert.True(t, strings.HasPrefix(ps[0].String(), docFile+":"), ps[0].String())
		})
	}
}

// The map in the repository is whole against the packages its rows name (the full check,
// against `go list`, is what make lint runs).
func TestRepositoryMapParses(t *testing.T) {
	doc, err := os.ReadFile("../../" + docFile)
	require.NoError(t, err)
	rs, found := rows(doc)
	require.True(t, found, "docs/development.md has no %q section", heading)
	assert.NotEmpty(t, rs)
}
