// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSweepOrphanDirs(t *testing.T) {
	old := time.Now().Add(-2 * orphanAge)
	mk := func(name string, mtime time.Time) string {
		d := filepath.Join(os.TempDir(), name)
		require.NoError(t, os.MkdirAll(filepath.Join(d, "etcd"), 0o700))
		require.NoError(t, os.Chtimes(d, mtime, mtime))
		t.Cleanup(func() { _ = os.RemoveAll(d) })
		return d
	}
	orphan := mk("netpulse-kubetest-sweeptest-orphan", old)
	young := mk("netpulse-kubetest-sweeptest-young", time.Now())
	// inUse: a directory named on a live command line (etcd's --data-dir) is kept, however old.
	used := mk("netpulse-kubetest-sweeptest-used", old)
	require.True(t, inUse([][]byte{[]byte("etcd\x00--data-dir=" + used + "/etcd\x00")}, used))
	require.False(t, inUse([][]byte{[]byte("etcd\x00--data-dir=/elsewhere\x00")}, used))

	n, err := SweepOrphanDirs(t.Logf)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1)
	require.NoDirExists(t, orphan)
	require.DirExists(t, young)
}
