// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package icmpengine

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	probing "github.com/prometheus-community/pro-bing"
	"golang.org/x/sys/unix"

	"github.com/netpulse/netpulse/testbed/netnstest"
)

// Benchmark of the engine against one pro-bing Pinger per target.
//
//	NETPULSE_BENCH=1 go test -run TestICMPEngineVsProBing -v -count=1 ./receiver/podprobereceiver/internal/icmpengine/
//
// Knobs (environment):
//
//	NETPULSE_BENCH_WINDOW   measurement window per implementation (default 10s)
//	NETPULSE_BENCH_TARGETS  number of targets, each probed once per second (default 1000)
//	NETPULSE_BENCH_FLOOD    arguments of the concurrent /usr/bin/ping against
//	                        127.0.0.1 (default "-i 0.002"; "off" disables it)
//	NETPULSE_BENCH_TIMER_SLACK  Config.TimerSlack of the engine (default: the default)
//	NETPULSE_BENCH_ONLY     "ours" or "reference": run one side only and print
//	                        no BENCH lines (for profiling, e.g. with
//	                        -test.cpuprofile on the child)
//
// The test re-executes itself in a child process created with
// CLONE_NEWNET, so the whole child (every thread, and the ping process it
// starts) lives in a fresh network namespace with lo up and
// net.ipv4.ping_group_range = "0 2147483647". Both implementations run in
// that child, one after the other, in unprivileged mode, against the
// loopback targets 127.1.x.y. It prints one line per comparison:
//
//	BENCH <name> ours=<value><unit> reference=<value><unit> ratio=<reference/ours>x
//
// (ratio is 1.0x when both values are 0 and "infx" when only ours is 0).
const (
	benchEnv        = "NETPULSE_BENCH"
	benchChildEnv   = "NETPULSE_BENCH_CHILD"
	benchWindowEnv  = "NETPULSE_BENCH_WINDOW"
	benchTargetsEnv = "NETPULSE_BENCH_TARGETS"
	benchFloodEnv   = "NETPULSE_BENCH_FLOOD"
	benchOnlyEnv    = "NETPULSE_BENCH_ONLY"
)

func TestICMPEngineVsProBing(t *testing.T) {
	if os.Getenv(benchEnv) != "1" {
		t.Skipf("benchmark; run with %s=1", benchEnv)
	}
	if os.Getenv(benchChildEnv) != "1" {
		netnstest.RequireRoot(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestICMPEngineVsProBing$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), benchChildEnv+"=1")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Run(); err != nil {
			t.Fatalf("benchmark child: %v", err)
		}
		return
	}
	runBenchmark(t)
}

type benchConfig struct {
	window  time.Duration
	targets int
	flood   []string
}

func benchSettings(t *testing.T) benchConfig {
	c := benchConfig{window: 10 * time.Second, targets: 1000, flood: []string{"-i", "0.002"}}
	if v := os.Getenv(benchWindowEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("%s=%q: want a duration >= 1s", benchWindowEnv, v)
		}
		c.window = d
	}
	if v := os.Getenv(benchTargetsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 || n > 60000 {
			t.Fatalf("%s=%q: want 10..60000", benchTargetsEnv, v)
		}
		c.targets = n
	}
	if v := os.Getenv(benchFloodEnv); v != "" {
		c.flood = strings.Fields(v)
		if v == "off" {
			c.flood = nil
		}
	}
	return c
}

// benchRun is what one run of one implementation measured.
type benchRun struct {
	targets          int
	windowProbes     uint64        // echo requests sent during the window
	windowCPU        time.Duration // process CPU time (user+sys) during the window
	window           time.Duration
	sent, received   uint64 // whole run
	misattributed    uint64 // replies credited to a target they did not come from
	rtts             []time.Duration
	fds, goroutines  int // above the baseline, measured at the start of the window
	notes            string
	lostByTargetMost int
}

func (r *benchRun) lost() uint64 { return r.sent - r.received }

func (r *benchRun) cpuPerProbe() time.Duration {
	if r.windowProbes == 0 {
		return 0
	}
	return r.windowCPU / time.Duration(r.windowProbes)
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		panic(err)
	}
	return len(ents)
}

func benchTargets(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)})
	}
	return out
}

// Timeline of a run: targets start spread evenly over one interval
// (stagger), then a warm-up second, then the measurement window; each
// target sends echoes once per second until past the window.
const (
	benchInterval = time.Second
	benchWarmup   = time.Second
)

func benchCount(window time.Duration) int {
	return int((benchInterval+benchWarmup+window)/benchInterval) + 2
}

// staggerStart calls start(i) for every target, spread over one interval.
func staggerStart(n int, start func(i int)) time.Time {
	t0 := time.Now()
	for i := range n {
		if d := time.Until(t0.Add(time.Duration(i) * benchInterval / time.Duration(n))); d > 0 {
			time.Sleep(d)
		}
		start(i)
	}
	return t0
}

// measureWindow waits for the window start, samples, waits out the window
// and fills the window fields of r.
func measureWindow(r *benchRun, t0 time.Time, window time.Duration, baseFDs, baseG int, sent func() uint64) {
	time.Sleep(time.Until(t0.Add(benchInterval + benchWarmup)))
	r.fds, r.goroutines = openFDs()-baseFDs, runtime.NumGoroutine()-baseG
	cpu0, sent0, w0 := processCPU(), sent(), time.Now()
	time.Sleep(window)
	r.windowCPU, r.windowProbes, r.window = processCPU()-cpu0, sent()-sent0, time.Since(w0)
}

func runProBing(t *testing.T, targets []netip.Addr, window time.Duration) *benchRun {
	runtime.GC()
	r := &benchRun{targets: len(targets)}
	baseFDs, baseG := openFDs(), runtime.NumGoroutine()
	count := benchCount(window)
	var sent atomic.Uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	pingers := make([]*probing.Pinger, len(targets))
	errs := make([]error, len(targets))
	t0 := staggerStart(len(targets), func(i int) {
		target := targets[i]
		p := probing.New(target.String())
		p.SetIPAddr(&net.IPAddr{IP: net.IP(target.AsSlice())})
		p.SetPrivileged(false)
		p.Count = count
		p.Interval = benchInterval
		p.Timeout = time.Duration(count)*benchInterval + 5*time.Second
		p.RecordRtts = false
		p.OnSend = func(*probing.Packet) { sent.Add(1) }
		p.OnRecv = func(pkt *probing.Packet) {
			from, _ := netip.AddrFromSlice(pkt.IPAddr.IP)
			mu.Lock()
			if from.Unmap() != target {
				r.misattributed++
			}
			r.rtts = append(r.rtts, pkt.Rtt)
			mu.Unlock()
		}
		pingers[i] = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Run()
		}()
	})
	measureWindow(r, t0, window, baseFDs, baseG, sent.Load)
	wg.Wait()
	for i, p := range pingers {
		if errs[i] != nil {
			t.Errorf("pro-bing %v: %v", targets[i], errs[i])
		}
		st := p.Statistics()
		r.sent += uint64(st.PacketsSent)
		r.received += uint64(st.PacketsRecv)
		r.lostByTargetMost = max(r.lostByTargetMost, st.PacketsSent-st.PacketsRecv)
	}
	return r
}

func runEngine(t *testing.T, targets []netip.Addr, window time.Duration) *benchRun {
	runtime.GC()
	r := &benchRun{targets: len(targets)}
	baseFDs, baseG := openFDs(), runtime.NumGoroutine()
	cfg := Config{Mode: ModeUnprivileged}
	if v := os.Getenv("NETPULSE_BENCH_TIMER_SLACK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TimerSlack = d
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	count := benchCount(window)
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(len(targets))
	t0 := staggerStart(len(targets), func(i int) {
		target := targets[i]
		err := e.Submit(context.Background(), Request{Addr: target, Count: count, Interval: benchInterval, Timeout: time.Second},
			func(res Result, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("engine %v: %v", target, err)
				}
				r.sent += uint64(res.Sent)
				r.received += uint64(res.Received)
				r.lostByTargetMost = max(r.lostByTargetMost, res.Lost)
				for _, echo := range res.Echoes {
					if echo.Status == EchoReplied && echo.From != target {
						r.misattributed++
					}
				}
				r.rtts = append(r.rtts, res.RTTs...)
			})
		if err != nil {
			t.Fatal(err)
		}
	})
	measureWindow(r, t0, window, baseFDs, baseG, func() uint64 { return e.Stats().Sent })
	wg.Wait()
	st := e.Stats()
	info := e.Info()
	r.notes = fmt.Sprintf("socket %s ident %d rcvbuf %d (forced %v); stats %+v",
		info[0].Network, info[0].Identifier, info[0].ReceiveBufferBytes, info[0].ReceiveBufferForced, st)
	if st.Late != 0 || st.Timeouts != 0 || st.ReceiveQueueDrops != 0 || st.UserTimestamps != 0 {
		t.Logf("engine stats of note: %+v", st)
	}
	return r
}

func ratio(ours, ref float64) string {
	switch {
	case ours == 0 && ref == 0:
		return "1.0x"
	case ours == 0:
		return "infx"
	}
	return fmt.Sprintf("%.1fx", ref/ours)
}

func benchLine(name string, ours, ref float64, format, unit string) {
	fmt.Printf("BENCH %s ours="+format+"%s reference="+format+"%s ratio=%s\n", name, ours, unit, ref, unit, ratio(ours, ref))
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func runBenchmark(t *testing.T) {
	cfg := benchSettings(t)
	if err := netnstest.LinkUp("lo"); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.SetSysctl("net.ipv4.ping_group_range", openPingGroupRange); err != nil {
		t.Fatal(err)
	}
	t.Logf("benchmark: %d targets x 1 probe/s, window %v, concurrent ping %q, GOMAXPROCS %d, %d CPUs",
		cfg.targets, cfg.window, cfg.flood, runtime.GOMAXPROCS(0), runtime.NumCPU())

	if cfg.flood != nil {
		args := append([]string{"-q"}, cfg.flood...)
		args = append(args, "127.0.0.1")
		cmd := exec.Command("ping", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("ping %v: %v", args, err)
		}
		defer func() {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
			t.Logf("concurrent ping %s:\n%s", strings.Join(args, " "), lastLines(out.String(), 3))
		}()
		time.Sleep(200 * time.Millisecond)
	}

	many := benchTargets(cfg.targets)
	few := many[:10]
	short := 2 * time.Second

	if only := os.Getenv(benchOnlyEnv); only != "" {
		var r *benchRun
		switch only {
		case "ours":
			r = runEngine(t, many, cfg.window)
		case "reference":
			r = runProBing(t, many, cfg.window)
		default:
			t.Fatalf("%s=%q: want ours or reference", benchOnlyEnv, only)
		}
		t.Logf("%s: %d probes, cpu %v, %v/probe, rtt p50 %v p99 %v, lost %d, notes %s", only, r.windowProbes, r.windowCPU,
			r.cpuPerProbe(), percentile(r.rtts, 50), percentile(r.rtts, 99), r.lost(), r.notes)
		return
	}

	ref := runProBing(t, many, cfg.window)
	ours := runEngine(t, many, cfg.window)
	ref10 := runProBing(t, few, short)
	ours10 := runEngine(t, few, short)

	for _, x := range []struct {
		name string
		r    *benchRun
	}{{"pro-bing", ref}, {"engine", ours}, {"pro-bing/10", ref10}, {"engine/10", ours10}} {
		r := x.r
		t.Logf("%-12s targets %d: window %v: %d probes (%.0f/s), cpu %v (%.2f%% of a core), %v/probe; "+
			"sent %d received %d lost %d (max per target %d) misattributed %d; rtt p50 %v p99 %v max %v; fds +%d goroutines +%d",
			x.name, r.targets, r.window.Round(time.Millisecond), r.windowProbes, float64(r.windowProbes)/r.window.Seconds(),
			r.windowCPU, 100*r.windowCPU.Seconds()/r.window.Seconds(), r.cpuPerProbe(),
			r.sent, r.received, r.lost(), r.lostByTargetMost, r.misattributed,
			percentile(r.rtts, 50), percentile(r.rtts, 99), percentile(r.rtts, 100), r.fds, r.goroutines)
		if r.notes != "" {
			t.Logf("%-12s %s", x.name, r.notes)
		}
	}

	n := cfg.targets
	benchLine("icmp_cpu_per_probe", us(ours.cpuPerProbe()), us(ref.cpuPerProbe()), "%.1f", "µs")
	benchLine(fmt.Sprintf("icmp_cpu_core_percent_%dx1pps", n),
		100*ours.windowCPU.Seconds()/ours.window.Seconds(), 100*ref.windowCPU.Seconds()/ref.window.Seconds(), "%.2f", "%")
	benchLine(fmt.Sprintf("icmp_rtt_p50_%dpps", n), us(percentile(ours.rtts, 50)), us(percentile(ref.rtts, 50)), "%.1f", "µs")
	benchLine(fmt.Sprintf("icmp_rtt_p99_%dpps", n), us(percentile(ours.rtts, 99)), us(percentile(ref.rtts, 99)), "%.1f", "µs")
	benchLine("icmp_lost_replies_with_concurrent_ping", float64(ours.lost()), float64(ref.lost()), "%.0f", "")
	benchLine("icmp_misattributed_replies_with_concurrent_ping", float64(ours.misattributed), float64(ref.misattributed), "%.0f", "")
	benchLine("icmp_open_fds_10_targets", float64(ours10.fds), float64(ref10.fds), "%.0f", "")
	benchLine(fmt.Sprintf("icmp_open_fds_%d_targets", n), float64(ours.fds), float64(ref.fds), "%.0f", "")
	benchLine("icmp_goroutines_10_targets", float64(ours10.goroutines), float64(ref10.goroutines), "%.0f", "")
	benchLine(fmt.Sprintf("icmp_goroutines_%d_targets", n), float64(ours.goroutines), float64(ref.goroutines), "%.0f", "")

	// Correctness is asserted; performance bars are only reported.
	if ours.lost() != 0 || ours.misattributed != 0 || ours10.lost() != 0 || ours10.misattributed != 0 {
		t.Errorf("engine lost %d / misattributed %d replies", ours.lost()+ours10.lost(), ours.misattributed+ours10.misattributed)
	}
	cpuRatio := float64(ref.cpuPerProbe()) / float64(max(ours.cpuPerProbe(), 1))
	p99 := percentile(ours.rtts, 99)
	t.Logf("bars: cpu/probe ratio %.1fx (want >= 5x): %v; rtt p99 %v (want <= 200µs): %v; fds and goroutines flat from 10 to %d targets: %v",
		cpuRatio, cpuRatio >= 5, p99, p99 <= 200*time.Microsecond, n, ours.fds == ours10.fds && ours.goroutines == ours10.goroutines)
}
