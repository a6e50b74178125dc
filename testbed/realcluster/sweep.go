// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package realcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netpulse/netpulse/testbed/simcluster"
)

// Containers outlive a crashed harness (containerd's shims re-parent them), so cleaning up
// goes by what the kernel knows rather than by what the harness remembers: every process
// in a node's cgroup subtree is killed, every mount under the run directory is unmounted,
// and the pod network namespaces that containerd left are deleted.

var runCgroupRE = regexp.MustCompile(`^` + Prefix + `-[0-9a-f]{6}-[0-9]+$`)

// killCgroup SIGKILLs every process in the cgroup subtree name (in every hierarchy) and
// waits briefly for them to go.
func killCgroup(name string) {
	hs, err := cgroupHierarchies()
	if err != nil {
		return
	}
	for attempt := 0; attempt < 20; attempt++ {
		found := false
		for _, h := range hs {
			_ = filepath.WalkDir(filepath.Join(h, name), func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				for _, pid := range readPids(filepath.Join(p, "cgroup.procs")) {
					if pid > 1 && pid != os.Getpid() {
						found = true
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
		if !found {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Remove the subtree, deepest first.
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, name), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
	}
}

func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// cleanupRun unmounts everything under a run directory (kubelet volumes, containerd's
// rootfs mounts and shm) and deletes the pod network namespaces containerd made since the
// run started that no process uses any more.
func cleanupRun(ctx context.Context, dir string, since time.Time, logf func(string, ...any)) error {
	var errs []error
	for _, mp := range mountsUnder(dir) {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		info, err := e.Info()
		if err != nil || info.ModTime().Before(since) {
			continue
		}
		if err := run(ctx, "ip", "netns", "delete", e.Name()); err != nil {
			logf("realcluster: %v", err)
		}
	}
	return errors.Join(errs...)
}

// Sweep removes what crashed runs left behind: processes in their cgroups (containers and
// all), their mounts, network namespaces (simcluster.Sweep with Prefix), and the run
// directories under BaseDir. The caller holds the host lock (Start does).
func Sweep(ctx context.Context, logf func(string, ...any)) error {
	hs, _ := cgroupHierarchies()
	seen := map[string]bool{}
	for _, h := range hs {
		entries, _ := os.ReadDir(h)
		for _, e := range entries {
			if e.IsDir() && runCgroupRE.MatchString(e.Name()) && !seen[e.Name()] {
				seen[e.Name()] = true
				logf("realcluster: sweeping cgroup %s of a crashed run", e.Name())
				killCgroup(e.Name())
			}
		}
	}
	runs, _ := os.ReadDir(BaseDir)
	for _, r := range runs {
		dir := filepath.Join(BaseDir, r.Name())
		logf("realcluster: sweeping %s of a crashed run", dir)
		_ = cleanupRun(ctx, dir, time.Time{}, logf)
		if err := os.RemoveAll(dir); err != nil {
			logf("realcluster: remove %s: %v", dir, err)
		}
	}
	shm, _ := filepath.Glob("/dev/shm/" + Prefix + "-*-control-plane")
	for _, d := range shm {
		_ = os.RemoveAll(d)
	}
	return simcluster.Sweep(ctx, Prefix, logf)
}
