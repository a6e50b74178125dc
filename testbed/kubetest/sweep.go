// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"time"
)

// orphanAge is how old an unused control-plane directory must be before SweepOrphanDirs
// removes it: a Start that has made its directory but not yet started etcd is not orphaned.
const orphanAge = 10 * time.Minute

// SweepOrphanDirs removes the working directories ("netpulse-kubetest-*" under /dev/shm and
// the temp dir) of control planes that crashed or whose host was stopped under them: older
// than orphanAge and named on no live process's command line (etcd and kube-apiserver carry
// the directory in their flags). It returns how many it removed. Such directories sit in
// tmpfs and hold an etcd database each, so a machine that keeps them pays in memory.
func SweepOrphanDirs(logf func(string, ...any)) (int, error) {
	var dirs []string
	for _, base := range []string{"/dev/shm", os.TempDir()} {
		m, _ := filepath.Glob(filepath.Join(base, "netpulse-kubetest-*"))
		dirs = append(dirs, m...)
	}
	if len(dirs) == 0 {
		return 0, nil
	}
	cmdlines := liveCmdlines()
	removed := 0
	var errs []error
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() || time.Since(st.ModTime()) < orphanAge || inUse(cmdlines, d) {
			continue
		}
		logf("kubetest: removing orphaned control-plane directory %s", d)
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

func liveCmdlines() [][]byte {
	var out [][]byte
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil {
			out = append(out, b)
		}
	}
	return out
}

func inUse(cmdlines [][]byte, dir string) bool {
	for _, c := range cmdlines {
		if bytes.Contains(c, []byte(dir)) {
			return true
		}
	}
	return false
}
