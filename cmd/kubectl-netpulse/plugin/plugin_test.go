// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/matrix/matrixtest"
)

// The commands against a real API server are tested in testbed/viewtest; these cover
// what needs no server.

func model(t *testing.T, namespaces ...string) *matrix.Model {
	t.Helper()
	now := time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)
	in := matrix.Input{Now: now}
	for i, ns := range namespaces {
		f := matrixtest.Cluster(matrixtest.Options{Nodes: 4, Stable: 3, Namespace: ns, Partitioned: "node-2", Now: now})
		in.Objects = append(in.Objects, f.Objects...)
		if i == 0 {
			for _, n := range f.Nodes {
				in.Nodes = append(in.Nodes, matrix.NodeFrom(n, ""))
			}
		}
	}
	return matrix.Build(in)
}

func TestResolve(t *testing.T) {
	o := &options{}
	m := model(t, "netpulse", "other")
	e, err := o.resolve(m, "node-2")
	require.NoError(t, err)
	assert.Equal(t, "Node", e.Kind)
	e, err = o.resolve(m, "node/node-2")
	require.NoError(t, err)
	assert.Equal(t, "node-2", e.Name)
	_, err = o.resolve(m, "netpulse-agent-2")
	assert.ErrorContains(t, err, "a target in several namespaces (netpulse/netpulse-agent-2, other/netpulse-agent-2): use -n or NAMESPACE/NAME")
	e, err = o.resolve(m, "other/netpulse-agent-2")
	require.NoError(t, err)
	assert.Equal(t, "other/netpulse-agent-2", e.Name)
	o.overrides.Context.Namespace = "other"
	e, err = o.resolve(m, "pod/netpulse-agent-2")
	require.NoError(t, err)
	assert.Equal(t, matrix.Unreachable, e.Verdict)
	_, err = o.resolve(m, "node/nope")
	assert.ErrorContains(t, err, `node "nope": no such node`)
}

func TestMatrixTextAndColour(t *testing.T) {
	m := model(t, "netpulse")
	mx, err := m.Matrix(nil, 0)
	require.NoError(t, err)
	var plain, col bytes.Buffer
	writeMatrix(&plain, painter{}, m, mx)
	writeMatrix(&col, painter{on: true}, m, mx)
	assert.NotContains(t, plain.String(), "\x1b[")
	assert.Contains(t, col.String(), ansiRed+"X"+ansiReset)
	assert.Equal(t, plain.String(), ansi(col.String()), "colour changes nothing but colour")
	assert.Contains(t, plain.String(), "2  node-2  True    ? - ? ?  UnreachableFromPeers")

	_, err = (&options{color: "sometimes"}).colour()
	assert.ErrorContains(t, err, `--color: "sometimes"`)
	on, err := (&options{color: "auto", streams: Streams{Out: &bytes.Buffer{}}}).colour()
	require.NoError(t, err)
	assert.False(t, on, "not a terminal")
}

func ansi(s string) string {
	for {
		i := strings.Index(s, "\x1b[")
		if i < 0 {
			return s
		}
		j := strings.IndexByte(s[i:], 'm')
		s = s[:i] + s[i+j+1:]
	}
}
