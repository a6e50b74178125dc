// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package icmpengine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/netpulse/netpulse/testbed/netnstest"
)

func TestPingLoopback(t *testing.T) {
	for _, mode := range []Mode{ModeUnprivileged, ModePrivileged} {
		t.Run(string(mode), func(t *testing.T) {
			ns := newNS(t)
			e := startEngine(t, ns, Config{Mode: mode})
			for _, info := range e.Info() {
				if info.Err != nil || info.Mode != mode || !info.KernelTimestamps || info.ReceiveBufferBytes <= 0 {
					t.Fatalf("unexpected socket info %+v", info)
				}
				t.Logf("%+v", info)
			}
			for _, a := range []string{"127.0.0.1", "127.1.2.3", "::1"} {
				addr := mustAddr(a)
				res, err := e.Ping(context.Background(), addr, 3, 10*time.Millisecond, time.Second)
				if err != nil {
					t.Fatalf("Ping %v: %v", addr, err)
				}
				if res.Sent != 3 || res.Received != 3 || res.Lost != 0 || res.Loss != 0 || len(res.RTTs) != 3 || len(res.Echoes) != 3 {
					t.Fatalf("Ping %v: unexpected result %+v", addr, res)
				}
				if !(0 < res.MinRTT && res.MinRTT <= res.AvgRTT && res.AvgRTT <= res.MaxRTT) {
					t.Fatalf("Ping %v: inconsistent RTTs %+v", addr, res)
				}
				for _, echo := range res.Echoes {
					if echo.Status != EchoReplied || echo.From != addr || !echo.KernelTimestamp {
						t.Fatalf("Ping %v: unexpected echo %+v", addr, echo)
					}
				}
				t.Logf("%v: rtts %v jitter %v", addr, res.RTTs, res.Jitter)
			}
			st := e.Stats()
			if st.Sent != 9 || st.Replies != 9 || st.Stray != 0 || st.Timeouts != 0 || st.KernelTimestamps != 9 {
				t.Fatalf("unexpected stats %+v", st)
			}
		})
	}
}

func TestAutoMode(t *testing.T) {
	t.Run("unprivileged allowed", func(t *testing.T) {
		e := startEngine(t, newNS(t), Config{})
		for _, info := range e.Info() {
			if info.Mode != ModeUnprivileged {
				t.Fatalf("auto picked %+v, want unprivileged", info)
			}
		}
		if _, err := e.Ping(context.Background(), mustAddr("127.0.0.1"), 1, 0, time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("falls back to raw", func(t *testing.T) {
		// A fresh namespace has ping_group_range "1 0": nobody may use
		// datagram ICMP sockets, but root has CAP_NET_RAW.
		e := startEngine(t, netnstest.New(t), Config{})
		for _, info := range e.Info() {
			if info.Mode != ModePrivileged {
				t.Fatalf("auto picked %+v, want privileged", info)
			}
		}
		if _, err := e.Ping(context.Background(), mustAddr("::1"), 1, 0, time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// withoutNetRaw runs fn in ns on a dedicated OS thread whose effective
// capabilities lack CAP_NET_RAW. The thread is discarded afterwards.
func withoutNetRaw(t *testing.T, ns *netnstest.NS, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		done <- ns.Do(func() error {
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var data [2]unix.CapUserData
			if err := unix.Capget(&hdr, &data[0]); err != nil {
				return err
			}
			data[0].Effective &^= 1 << unix.CAP_NET_RAW
			if err := unix.Capset(&hdr, &data[0]); err != nil {
				return err
			}
			fn()
			return nil
		})
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestPermissionError(t *testing.T) {
	ns := netnstest.New(t) // ping_group_range "1 0"
	for _, mode := range []Mode{ModeAuto, ModeUnprivileged, ModePrivileged} {
		t.Run(string(mode), func(t *testing.T) {
			e, err := New(Config{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var startErr error
			withoutNetRaw(t, ns, func() { startErr = e.Start(context.Background()) })
			if startErr == nil {
				t.Fatal("Start succeeded without ping_group_range and CAP_NET_RAW")
			}
			var pe *PermissionError
			if !errors.As(startErr, &pe) || !errors.Is(startErr, ErrPermission) {
				t.Fatalf("Start error %T %v, want *PermissionError", startErr, startErr)
			}
			msg := startErr.Error()
			t.Log(msg)
			want := []string{}
			if mode != ModePrivileged {
				want = append(want, "net.ipv4.ping_group_range", `"1 0"`, fmt.Sprintf("gid %d", os.Getegid()))
			}
			if mode != ModeUnprivileged {
				want = append(want, "CAP_NET_RAW")
			}
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("error message lacks %q: %s", w, msg)
				}
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	ns := newNS(t,
		netnstest.WithSysctl("net.ipv4.icmp_echo_ignore_all", "1"),
		netnstest.WithSysctl("net.ipv6.icmp.echo_ignore_all", "1"))
	for _, mode := range []Mode{ModeUnprivileged, ModePrivileged} {
		e := startEngine(t, ns, Config{Mode: mode})
		for _, a := range []string{"127.0.0.1", "::1"} {
			addr := mustAddr(a)
			start := time.Now()
			res, err := e.Ping(context.Background(), addr, 3, 20*time.Millisecond, 150*time.Millisecond)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("%s %v: error %v, want timeout", mode, addr, err)
			}
			var pe *ProbeError
			if !errors.As(err, &pe) || !pe.Timeout() || pe.Addr != addr {
				t.Fatalf("%s %v: error %#v", mode, addr, err)
			}
			if res.Sent != 3 || res.Received != 0 || res.Lost != 3 || res.Loss != 1.0 {
				t.Fatalf("%s %v: result %+v", mode, addr, res)
			}
			for _, echo := range res.Echoes {
				if echo.Status != EchoTimeout {
					t.Fatalf("%s %v: echo %+v", mode, addr, echo)
				}
			}
			if d := time.Since(start); d < 190*time.Millisecond {
				t.Fatalf("%s %v: returned after %v, before the last echo timed out", mode, addr, d)
			}
		}
		if st := e.Stats(); st.Timeouts != 6 || st.Replies != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
}

func TestUnreachableRoute(t *testing.T) {
	ns := newNS(t)
	run(t, ns, "ip", "route", "add", "unreachable", "198.51.100.0/24")
	run(t, ns, "ip", "-6", "route", "add", "unreachable", "2001:db8:dead::/48")
	for _, mode := range []Mode{ModeUnprivileged, ModePrivileged} {
		e := startEngine(t, ns, Config{Mode: mode})
		for _, a := range []string{"198.51.100.7", "2001:db8:dead::7"} {
			res, err := e.Ping(context.Background(), mustAddr(a), 2, 10*time.Millisecond, time.Second)
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("%s %s: error %v, want unreachable", mode, a, err)
			}
			if res.Loss != 1 || res.Echoes[0].Status != EchoError {
				t.Fatalf("%s %s: result %+v", mode, a, res)
			}
			t.Logf("%s: %v", mode, err)
		}
	}
}

// TestICMPDestinationUnreachable routes probes through a second namespace
// acting as a router that answers with ICMP destination unreachable.
func TestICMPDestinationUnreachable(t *testing.T) {
	ns := newNS(t)
	router := netnstest.New(t,
		netnstest.WithSysctl("net.ipv4.ip_forward", "1"),
		netnstest.WithSysctl("net.ipv6.conf.all.forwarding", "1"),
		netnstest.WithSysctl("net.ipv4.icmp_ratelimit", "0"),
		netnstest.WithSysctl("net.ipv6.icmp.ratelimit", "0"))
	run(t, ns, "ip", "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-b", "netns", router.Path())
	run(t, ns, "ip", "addr", "add", "10.99.0.1/24", "dev", "veth-a")
	run(t, ns, "ip", "-6", "addr", "add", "fd00:99::1/64", "dev", "veth-a", "nodad")
	run(t, ns, "ip", "link", "set", "veth-a", "up")
	run(t, ns, "ip", "route", "add", "203.0.113.0/24", "via", "10.99.0.2")
	run(t, ns, "ip", "-6", "route", "add", "2001:db8:99::/48", "via", "fd00:99::2")
	run(t, router, "ip", "addr", "add", "10.99.0.2/24", "dev", "veth-b")
	run(t, router, "ip", "-6", "addr", "add", "fd00:99::2/64", "dev", "veth-b", "nodad")
	run(t, router, "ip", "link", "set", "veth-b", "up")
	run(t, router, "ip", "route", "add", "unreachable", "203.0.113.0/24")
	run(t, router, "ip", "-6", "route", "add", "unreachable", "2001:db8:99::/48")

	for _, mode := range []Mode{ModeUnprivileged, ModePrivileged} {
		e := startEngine(t, ns, Config{Mode: mode})
		for _, tc := range []struct{ target, router string }{
			{"10.99.0.2", ""}, // the router itself answers
			{"fd00:99::2", ""},
			{"203.0.113.9", "10.99.0.2"},
			{"2001:db8:99::9", "fd00:99::2"},
		} {
			target := mustAddr(tc.target)
			res, err := e.Ping(context.Background(), target, 2, 20*time.Millisecond, 2*time.Second)
			if tc.router == "" {
				if err != nil || res.Received != 2 {
					t.Fatalf("%s %v: %+v %v", mode, target, res, err)
				}
				continue
			}
			var pe *ProbeError
			if !errors.As(err, &pe) || pe.Kind != KindUnreachable || pe.From != mustAddr(tc.router) || pe.ICMPType < 0 {
				t.Fatalf("%s %v: error %v, want ICMP unreachable from %s (result %+v)", mode, target, err, tc.router, res)
			}
			if res.Sent != 2 || res.Received != 0 || res.Loss != 1 {
				t.Fatalf("%s %v: result %+v", mode, target, res)
			}
			for _, echo := range res.Echoes {
				if echo.Status != EchoError || echo.From != mustAddr(tc.router) {
					t.Fatalf("%s %v: echo %+v", mode, target, echo)
				}
			}
			t.Logf("%s: %v", mode, err)
		}
		if st := e.Stats(); st.ICMPErrors != 4 || st.StrayICMPErrors != 0 {
			t.Fatalf("%s: stats %+v", mode, st)
		}
	}
}

// pendingProbe waits for the engine to have exactly one pending probe for
// family fi and returns its wire identity.
func pendingProbe(t *testing.T, e *Engine, fi int) (ident, seq uint16, nonce uint64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		f := e.fams[fi]
		var found []*probe
		for _, p := range f.probes {
			if p.state == probePending && p.sent.Load() != 0 {
				found = append(found, p)
			}
		}
		if len(found) == 1 {
			p := found[0]
			e.mu.Unlock()
			return f.ident, p.seq, p.nonce
		}
		e.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no single pending probe")
	return 0, 0, 0
}

// forgeReply sends an ICMP echo reply from src to dst from a raw socket in
// ns.
func forgeReply(t *testing.T, ns *netnstest.NS, src, dst netip.Addr, ident, seq uint16, nonce uint64) {
	t.Helper()
	v6 := dst.Is6()
	b := make([]byte, echoHeaderLen+MinPayloadSize)
	marshalEcho(b, v6, ident, seq, nonce, false)
	b[0] = typeEchoReplyV4
	if v6 {
		b[0] = typeEchoReplyV6
	} else {
		binary.BigEndian.PutUint16(b[2:], checksum(b))
	}
	ns.Run(t, func() {
		domain, proto := unix.AF_INET, unix.IPPROTO_ICMP
		if v6 {
			domain, proto = unix.AF_INET6, unix.IPPROTO_ICMPV6
		}
		fd, err := unix.Socket(domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		srcSA, _ := sockaddrFor(src)
		dstSA, _ := sockaddrFor(dst)
		if err := unix.Bind(fd, srcSA); err != nil {
			t.Fatalf("bind %v: %v", src, err)
		}
		if err := unix.Sendto(fd, b, 0, dstSA); err != nil {
			t.Fatalf("sendto %v: %v", dst, err)
		}
	})
}

// waitStats polls Stats until cond holds.
func waitStats(t *testing.T, e *Engine, what string, cond func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		st := e.Stats()
		if cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; stats %+v", what, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMatching forges echo replies to check that only a reply with our
// identifier, the probe's sequence number AND nonce, from the probed
// address, is attributed; and that late and duplicate replies are counted
// as such.
func TestMatching(t *testing.T) {
	ns := newNS(t,
		netnstest.WithSysctl("net.ipv4.icmp_echo_ignore_all", "1"),
		netnstest.WithSysctl("net.ipv6.icmp.echo_ignore_all", "1"))
	run(t, ns, "ip", "-6", "addr", "add", "fd00::2/128", "dev", "lo", "nodad")
	for _, mode := range []Mode{ModeUnprivileged, ModePrivileged} {
		for fi, tc := range []struct{ target, other string }{
			{"127.0.0.1", "127.0.0.2"},
			{"::1", "fd00::2"},
		} {
			t.Run(fmt.Sprintf("%s/%s", mode, tc.target), func(t *testing.T) {
				e := startEngine(t, ns, Config{Mode: mode})
				target, other := mustAddr(tc.target), mustAddr(tc.other)
				ch := make(chan completion, 1)
				submit := func(count int, interval, timeout time.Duration) {
					err := e.Submit(context.Background(), Request{Addr: target, Count: count, Interval: interval, Timeout: timeout},
						func(r Result, err error) { ch <- completion{res: r, err: err} })
					if err != nil {
						t.Fatal(err)
					}
				}

				// Round 1: one echo, answered by forged replies.
				submit(1, 0, 5*time.Second)
				ident, seq, nonce := pendingProbe(t, e, fi)
				forgeReply(t, ns, target, target, ident, seq, nonce^1) // wrong nonce
				forgeReply(t, ns, target, target, ident, seq+1, nonce) // wrong sequence
				forgeReply(t, ns, other, target, ident, seq, nonce)    // wrong source
				waitStats(t, e, "3 stray replies", func(s Stats) bool { return s.Stray == 3 })
				select {
				case c := <-ch:
					t.Fatalf("round finished on a forged reply: %+v %v", c.res, c.err)
				default:
				}
				forgeReply(t, ns, target, target, ident, seq, nonce) // the real one
				c := <-ch
				if c.err != nil || c.res.Received != 1 || c.res.Echoes[0].Seq != int(seq) {
					t.Fatalf("round 1: %+v %v", c.res, c.err)
				}
				forgeReply(t, ns, target, target, ident, seq, nonce) // duplicate
				waitStats(t, e, "a duplicate", func(s Stats) bool { return s.Duplicates == 1 })

				// Round 2: the first echo times out, its reply arrives while
				// the round still runs (late), the second is answered.
				submit(2, 300*time.Millisecond, 200*time.Millisecond)
				ident, seq, nonce = pendingProbe(t, e, fi)
				waitStats(t, e, "a timeout", func(s Stats) bool { return s.Timeouts == 1 })
				forgeReply(t, ns, target, target, ident, seq, nonce)
				waitStats(t, e, "a late reply", func(s Stats) bool { return s.Late == 1 })
				ident2, seq2, nonce2 := pendingProbe(t, e, fi)
				forgeReply(t, ns, target, target, ident2, seq2, nonce2)
				c = <-ch
				if c.err != nil || c.res.Sent != 2 || c.res.Received != 1 || c.res.Late != 1 || c.res.Loss != 0.5 ||
					c.res.Echoes[0].Status != EchoTimeout || c.res.Echoes[1].Status != EchoReplied {
					t.Fatalf("round 2: %+v %v", c.res, c.err)
				}
				if st := e.Stats(); st.Replies != 2 || st.Stray != 3 || st.Late != 1 || st.Duplicates != 1 {
					t.Fatalf("stats %+v", st)
				}
			})
		}
	}
}

// startPing starts /usr/bin/ping inside ns and stops it at the end of the
// test.
func startPing(t *testing.T, ns *netnstest.NS, args ...string) {
	t.Helper()
	cmd := exec.Command("ping", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	ns.Run(t, func() {
		if err := cmd.Start(); err != nil {
			t.Fatalf("ping %v: %v", args, err)
		}
	})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		t.Logf("ping %s:\n%s", strings.Join(args, " "), lastLines(out.String(), 3))
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestConcurrentPingProcess runs many rounds while other ping processes
// flood the same namespace, one of them (privileged mode) with our very
// identifier: no reply may be lost or attributed to the wrong target.
func TestConcurrentPingProcess(t *testing.T) {
	for _, mode := range []Mode{ModeUnprivileged, ModePrivileged} {
		t.Run(string(mode), func(t *testing.T) {
			ns := newNS(t)
			e := startEngine(t, ns, Config{Mode: mode})
			startPing(t, ns, "-q", "-i", "0.002", "127.0.0.1")
			if mode == ModePrivileged {
				startPing(t, ns, "-q", "-i", "0.002", "-e", strconv.Itoa(e.Info()[0].Identifier), "127.0.0.1")
			}
			time.Sleep(100 * time.Millisecond)

			const targets, count = 100, 8
			results := make(chan completion, targets)
			for i := range targets {
				addr := netip.AddrFrom4([4]byte{127, 2, byte(i >> 8), byte(i + 1)})
				err := e.Submit(context.Background(), Request{Addr: addr, Count: count, Interval: 50 * time.Millisecond, Timeout: time.Second},
					func(r Result, err error) { results <- completion{res: r, err: err} })
				if err != nil {
					t.Fatal(err)
				}
			}
			for range targets {
				c := <-results
				if c.err != nil || c.res.Sent != count || c.res.Received != count || c.res.Late != 0 || c.res.Duplicates != 0 {
					t.Fatalf("%v: %+v %v", c.res.Addr, c.res, c.err)
				}
				for _, echo := range c.res.Echoes {
					if echo.From != c.res.Addr || echo.Status != EchoReplied {
						t.Fatalf("%v: misattributed echo %+v", c.res.Addr, echo)
					}
				}
			}
			st := e.Stats()
			t.Logf("stats %+v", st)
			if st.Replies != targets*count || st.Timeouts != 0 || st.ReceiveQueueDrops != 0 {
				t.Fatalf("stats %+v", st)
			}
			if mode == ModePrivileged && st.Stray == 0 {
				t.Fatal("the same-identifier ping's replies never reached the matcher; the test proves nothing")
			}
		})
	}
}

func TestManyRoundsFixedGoroutines(t *testing.T) {
	ns := newNS(t)
	e := startEngine(t, ns, Config{})
	base := runtime.NumGoroutine()
	const targets = 1000
	var wg sync.WaitGroup
	var failed atomic.Int32
	wg.Add(targets)
	for i := range targets {
		addr := netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)})
		err := e.Submit(context.Background(), Request{Addr: addr, Count: 2, Interval: 100 * time.Millisecond, Timeout: time.Second},
			func(r Result, err error) {
				if err != nil || r.Received != 2 {
					failed.Add(1)
				}
				wg.Done()
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Errorf("goroutines grew from %d to %d with %d rounds in flight", base, n, targets)
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d rounds failed; stats %+v", failed.Load(), e.Stats())
	}
}

func TestLifecycle(t *testing.T) {
	t.Run("close without start", func(t *testing.T) {
		e, err := New(Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Ping(context.Background(), mustAddr("127.0.0.1"), 1, 0, time.Second); !errors.Is(err, ErrNotStarted) {
			t.Fatalf("Ping before Start: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Start after Close: %v", err)
		}
	})
	t.Run("close twice with a round in flight", func(t *testing.T) {
		ns := newNS(t, netnstest.WithSysctl("net.ipv4.icmp_echo_ignore_all", "1"))
		e := startEngine(t, ns, Config{})
		done := make(chan error, 1)
		go func() {
			_, err := e.Ping(context.Background(), mustAddr("127.0.0.1"), 5, 100*time.Millisecond, 10*time.Second)
			done <- err
		}()
		waitStats(t, e, "a round", func(s Stats) bool { return s.ActiveRounds == 1 })
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("Ping during Close: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Fatal("second Close:", err)
		}
		goleak.VerifyNone(t)
		if _, err := e.Ping(context.Background(), mustAddr("127.0.0.1"), 1, 0, time.Second); !errors.Is(err, ErrClosed) {
			t.Fatalf("Ping after Close: %v", err)
		}
		if err := e.Start(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Start after Close: %v", err)
		}
	})
	t.Run("start twice", func(t *testing.T) {
		e := startEngine(t, newNS(t), Config{})
		if err := e.Start(context.Background()); err == nil {
			t.Fatal("second Start succeeded")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ns := newNS(t, netnstest.WithSysctl("net.ipv4.icmp_echo_ignore_all", "1"))
		e := startEngine(t, ns, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := e.Ping(ctx, mustAddr("127.0.0.1"), 10, 100*time.Millisecond, 10*time.Second)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
			t.Fatalf("canceled Ping: %v after %v", err, time.Since(start))
		}
		var pe *ProbeError
		if !errors.As(err, &pe) || pe.Kind != KindCanceled {
			t.Fatalf("canceled Ping: %#v", err)
		}
		if res.Sent > 3 || res.Received != 0 || len(res.Echoes) != res.Sent {
			t.Fatalf("canceled Ping result %+v", res)
		}
		for _, echo := range res.Echoes {
			if echo.Status != EchoCanceled {
				t.Fatalf("canceled Ping echo %+v", echo)
			}
		}
		if _, err := e.Ping(ctx, mustAddr("127.0.0.1"), 1, 0, time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ping with a done context: %v", err)
		}
		if st := e.Stats(); st.ActiveRounds != 0 {
			t.Fatalf("stats after cancel %+v", st)
		}
	})
	t.Run("disabled family", func(t *testing.T) {
		e := startEngine(t, newNS(t), Config{DisableIPv6: true})
		if _, err := e.Ping(context.Background(), mustAddr("::1"), 1, 0, time.Second); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Ping ::1 without IPv6: %v", err)
		}
		if info := e.Info(); info[1].Err == nil || info[0].Err != nil {
			t.Fatalf("info %+v", info)
		}
		// v4-mapped IPv6 addresses are pinged over IPv4.
		if _, err := e.Ping(context.Background(), mustAddr("::ffff:127.0.0.1"), 1, 0, time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("invalid requests", func(t *testing.T) {
		e := startEngine(t, newNS(t), Config{})
		for _, req := range []Request{
			{Count: 1, Timeout: time.Second},
			{Addr: mustAddr("0.0.0.0"), Count: 1, Timeout: time.Second},
			{Addr: mustAddr("127.0.0.1"), Count: 0, Timeout: time.Second},
			{Addr: mustAddr("127.0.0.1"), Count: 1, Timeout: 0},
			{Addr: mustAddr("127.0.0.1"), Count: 2, Interval: -1, Timeout: time.Second},
		} {
			if err := e.Submit(context.Background(), req, func(Result, error) {}); err == nil {
				t.Errorf("Submit(%+v) succeeded", req)
			}
		}
	})
}
