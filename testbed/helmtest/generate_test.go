// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValuesTable(t *testing.T) {
	table, err := ValuesTable([]byte(`# File header: not part of any key.

# A section.
probe:
  # Base round | a duration.
  interval: 10s
  # Peers.
  k: 3
# Resources, shown whole: its keys have no comments.
resources:
  requests: {cpu: 10m}
# Empty.
config: {}
`))
	require.NoError(t, err)
	require.Equal(t, "| key | default | description |\n|---|---|---|\n"+
		"| `probe` | | A section. |\n"+
		"| `probe.interval` | `\"10s\"` | Base round \\| a duration. |\n"+
		"| `probe.k` | `3` | Peers. |\n"+
		"| `resources` | `{\"requests\":{\"cpu\":\"10m\"}}` | Resources, shown whole: its keys have no comments. |\n"+
		"| `config` | `{}` | Empty. |\n", table)

	_, err = ValuesTable([]byte("# A section.\nprobe:\n  # Documented.\n  interval: 10s\n  k: 3\n"))
	require.ErrorContains(t, err, "probe.k has no comment")
}
