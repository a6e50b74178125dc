// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package childproc

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStartStopAndLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sub", "p.log")
	p, err := Start(Options{Name: "sleeper", Harness: "test", Argv: []string{"sh", "-c", "echo hello; trap 'echo bye; exit 0' TERM; while :; do sleep 0.1; done"}, LogPath: log})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(p.LogTail(5), "hello") }, 5*time.Second, 20*time.Millisecond)
	require.False(t, p.Exited())
	require.NoError(t, p.Stop(5*time.Second))
	require.NoError(t, p.Stop(time.Second), "twice")
	require.True(t, p.Exited())
	require.Contains(t, p.LogTail(5), "bye", "SIGTERM first")
	require.ErrorIs(t, syscall.Kill(p.Pid(), 0), syscall.ESRCH)
	var nilProc *Process
	require.NoError(t, nilProc.Stop(0))
}

func TestStopKillsAfterGrace(t *testing.T) {
	p, err := Start(Options{Name: "stubborn", Argv: []string{"sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"}, LogPath: filepath.Join(t.TempDir(), "p.log")})
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, p.Stop(300*time.Millisecond))
	require.Error(t, p.Err(), "killed")
}

func TestStartErrors(t *testing.T) {
	_, err := Start(Options{Name: "missing", Harness: "test", Argv: []string{"/nonexistent/binary"}, LogPath: filepath.Join(t.TempDir(), "p.log")})
	require.ErrorContains(t, err, "test: start missing")
	require.Equal(t, "", TailFile("/nonexistent/log", 3))
}
