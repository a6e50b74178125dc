// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package agentbench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netpulse/netpulse/testbed/childproc"
)

// memCgroupRoot is the cgroup v1 memory hierarchy (the real-node harness,
// testbed/realcluster, uses the same one for its kubelets).
const memCgroupRoot = "/sys/fs/cgroup/memory"

// collector is a collector process started inside a memory cgroup of its own.
type collector struct {
	name, file string
	ip         string
	cgroup     string // its memory cgroup's directory
	proc       *childproc.Process

	// peakAnon is the largest anonymous memory (/proc RssAnon) seen since the start,
	// sampled every 50 ms: the start-up LISTs' transient, which the cgroup's peak
	// (memory.max_usage_in_bytes) hides under the binary's file pages.
	peakAnon    atomic.Int64
	stopSampler chan struct{}
	samplerDone chan struct{}
}

// startCollector creates a fresh cgroup (limit bytes, 0: none) and starts argv in it: a shell
// joins the cgroup and execs the collector, so that every page it ever touches is charged
// there, as in a container.
func startCollector(t *testing.T, name, file, ip string, limit int64, argv, env []string, logPath string) *collector {
	t.Helper()
	cg := filepath.Join(memCgroupRoot, fmt.Sprintf("netpulse-agentbench-%d-%s", os.Getpid(), file))
	if err := os.Mkdir(cg, 0o755); err != nil && !os.IsExist(err) {
		t.Fatalf("memory cgroup (needs root and cgroup v1's memory hierarchy): %v", err)
	}
	t.Cleanup(func() {
		// After the process is gone (cleanups run last-registered first).
		for range 50 {
			if err := os.Remove(cg); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("could not remove %s", cg)
	})
	if limit > 0 {
		if err := os.WriteFile(filepath.Join(cg, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wrapped := append([]string{"/bin/sh", "-c", `echo $$ > "$NETPULSE_AGENTBENCH_CGROUP/cgroup.procs" && exec "$@"`, "sh"}, argv...)
	p, err := childproc.Start(childproc.Options{Name: name, Harness: "agentbench", Argv: wrapped,
		Env: append(env, "NETPULSE_AGENTBENCH_CGROUP="+cg), LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{name: name, file: file, ip: ip, cgroup: cg, proc: p, stopSampler: make(chan struct{}), samplerDone: make(chan struct{})}
	go c.sampleAnon()
	t.Cleanup(c.stop)
	return c
}

func (c *collector) sampleAnon() {
	defer close(c.samplerDone)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if s, err := readProcStatus(c.proc.Pid()); err == nil && int64(s.anon) > c.peakAnon.Load() {
			c.peakAnon.Store(int64(s.anon))
		}
		select {
		case <-c.stopSampler:
			return
		case <-c.proc.Done():
			return
		case <-tick.C:
		}
	}
}

func (c *collector) stop() {
	select {
	case <-c.stopSampler:
	default:
		close(c.stopSampler)
	}
	<-c.samplerDone
	_ = c.proc.Stop(10 * time.Second)
}

// waitReady polls url until it answers 2xx.
func (c *collector) waitReady(t *testing.T, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c.proc.Exited() {
			t.Fatalf("%s exited: %v\n%s", c.name, c.proc.Err(), c.proc.LogTail(40))
		}
		if resp, err := httpClient.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode < 300 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready at %s within %v\n%s", c.name, url, timeout, c.proc.LogTail(40))
}

// coldCopy copies the binary src to dst and drops dst's pages from the page cache.
func coldCopy(t *testing.T, src, dst string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(out.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	return dst
}

// procStatus is /proc/<pid>/status's memory lines, in bytes.
type procStatus struct{ rss, anon, file, hwm float64 }

func readProcStatus(pid int) (procStatus, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	defer f.Close()
	var s procStatus
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			s.rss = kb * 1024
		case "RssAnon":
			s.anon = kb * 1024
		case "RssFile":
			s.file = kb * 1024
		case "VmHWM":
			s.hwm = kb * 1024
		}
	}
	return s, sc.Err()
}

// cgroupMemory is what the kubelet reports for a container: the working set (usage less
// inactive file pages), the anonymous memory (total_rss), and the peak usage.
type cgroupMemory struct {
	workingSet, anon, peak float64
	// failcnt: how often usage hit the limit (and the kernel reclaimed); majorFaults: page
	// faults that read from disk (the binary's pages read again after reclaim).
	failcnt, majorFaults int64
}

func readCgroup(dir string) (cgroupMemory, error) {
	readInt := func(name string) (float64, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		return strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	}
	var m cgroupMemory
	usage, err := readInt("memory.usage_in_bytes")
	if err != nil {
		return m, err
	}
	if m.peak, err = readInt("memory.max_usage_in_bytes"); err != nil {
		return m, err
	}
	failcnt, err := readInt("memory.failcnt")
	if err != nil {
		return m, err
	}
	m.failcnt = int64(failcnt)
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return m, err
	}
	m.workingSet = usage
	for _, l := range strings.Split(string(stat), "\n") {
		k, v, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch k {
		case "total_inactive_file":
			if n < usage {
				m.workingSet = usage - n
			}
		case "total_rss":
			m.anon = n
		case "total_pgmajfault":
			m.majorFaults = int64(n)
		}
	}
	return m, nil
}

// sample is the largest of each figure over a window.
type sample struct {
	proc   procStatus
	cgroup cgroupMemory
}

func (s *sample) add(p procStatus, c cgroupMemory) {
	s.proc.rss, s.proc.anon, s.proc.file, s.proc.hwm = max(s.proc.rss, p.rss), max(s.proc.anon, p.anon), max(s.proc.file, p.file), max(s.proc.hwm, p.hwm)
	s.cgroup.workingSet, s.cgroup.anon, s.cgroup.peak = max(s.cgroup.workingSet, c.workingSet), max(s.cgroup.anon, c.anon), max(s.cgroup.peak, c.peak)
	s.cgroup.failcnt, s.cgroup.majorFaults = max(s.cgroup.failcnt, c.failcnt), max(s.cgroup.majorFaults, c.majorFaults)
}

func (c *collector) read(t *testing.T) (procStatus, cgroupMemory) {
	t.Helper()
	if c.proc.Exited() {
		t.Fatalf("%s exited: %v\n%s", c.name, c.proc.Err(), c.proc.LogTail(40))
	}
	p, err := readProcStatus(c.proc.Pid())
	if err != nil {
		t.Fatal(err)
	}
	cg, err := readCgroup(c.cgroup)
	if err != nil {
		t.Fatal(err)
	}
	return p, cg
}

// goMem is the Go runtime's view after a forced GC (runtime.MemStats, as the pprof
// extension's heap profile with gc=1&debug=1 ends).
type goMem struct{ heapAlloc, heapInuse, heapSys, heapReleased, stackInuse, sys float64 }

var memStatRE = regexp.MustCompile(`(?m)^# (HeapAlloc|HeapInuse|HeapSys|HeapReleased|Stack|Sys) = (\d+)`)

func (c *collector) goMemory(t *testing.T) goMem {
	t.Helper()
	body := c.get(t, "/debug/pprof/heap?gc=1&debug=1")
	var m goMem
	found := 0
	for _, sm := range memStatRE.FindAllSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(string(sm[2]), 64)
		found++
		switch string(sm[1]) {
		case "HeapAlloc":
			m.heapAlloc = v
		case "HeapInuse":
			m.heapInuse = v
		case "HeapSys":
			m.heapSys = v
		case "HeapReleased":
			m.heapReleased = v
		case "Stack":
			m.stackInuse = v
		case "Sys":
			m.sys = v
		}
	}
	if found < 5 {
		t.Fatalf("%s: no runtime.MemStats in the heap profile", c.name)
	}
	return m
}

func (c *collector) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := httpClient.Get("http://" + net.JoinHostPort(c.ip, "1777") + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// saveHeapProfile writes the live heap profile (after a GC) to dir and logs the top of it
// by in-use space (`go tool pprof -top`).
func (c *collector) saveHeapProfile(t *testing.T, dir string) string {
	t.Helper()
	file := filepath.Join(dir, c.file+"-heap.pprof")
	if err := os.WriteFile(file, c.get(t, "/debug/pprof/heap?gc=1"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, view := range [][]string{{"-top"}, {"-top", "-cum"}} {
		args := append([]string{"tool", "pprof", "-sample_index=inuse_space", "-nodecount=25"}, view...)
		out, err := exec.Command("go", append(args, file)...).CombinedOutput()
		if err != nil {
			t.Logf("go tool pprof %s: %v\n%s", file, err, out)
			break
		}
		t.Logf("%s: go tool pprof %s %s\n%s", c.name, strings.Join(args[2:], " "), file, out)
	}
	return file
}

// httpClient bounds every read of a collector's endpoints: a collector that thrashes
// against its memory limit must fail the run, not hang it.
var httpClient = &http.Client{Timeout: time.Minute}
