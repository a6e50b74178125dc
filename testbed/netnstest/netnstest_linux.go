// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package netnstest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// AllowSkipEnv is the environment variable that turns "must run as root"
// failures into skips: NETPULSE_ALLOW_SKIP_PRIVILEGED=1.
const AllowSkipEnv = "NETPULSE_ALLOW_SKIP_PRIVILEGED"

// RequireRoot fails t unless the process runs as root. With
// NETPULSE_ALLOW_SKIP_PRIVILEGED=1 in the environment it skips t instead.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	msg := fmt.Sprintf("this test needs root (it creates network namespaces and raw sockets); "+
		"euid is %d. Run it as root, or set %s=1 to skip it", os.Geteuid(), AllowSkipEnv)
	if os.Getenv(AllowSkipEnv) == "1" {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

// NS is a network namespace held open by a file descriptor.
type NS struct {
	mu sync.Mutex
	fd int // -1 once closed
}

type options struct {
	sysctls  [][2]string
	noLoopUp bool
}

// Option configures Create / New.
type Option func(*options)

// WithSysctl writes value to the sysctl name (dotted form, e.g.
// "net.ipv4.ping_group_range") inside the new namespace. Options apply in
// order, after the loopback interface is up.
func WithSysctl(name, value string) Option {
	return func(o *options) { o.sysctls = append(o.sysctls, [2]string{name, value}) }
}

// WithoutLoopback leaves the loopback interface down.
func WithoutLoopback() Option {
	return func(o *options) { o.noLoopUp = true }
}

// New creates a namespace for a test (see Create) and closes it in
// t.Cleanup. It calls RequireRoot first and fails t on any error.
func New(t testing.TB, opts ...Option) *NS {
	t.Helper()
	RequireRoot(t)
	ns, err := Create(opts...)
	if err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	return ns
}

// Create creates a new network namespace, brings its loopback interface up
// and applies the options. The calling goroutine's namespace is unchanged
// when Create returns.
func Create(opts ...Option) (_ *NS, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}

	runtime.LockOSThread()
	orig, err := openThreadNS()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer unix.Close(orig)

	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("unshare(CLONE_NEWNET): %w (needs root / CAP_SYS_ADMIN)", err)
	}
	fd, openErr := openThreadNS()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the new namespace: keep it locked so the
		// runtime destroys it when this goroutine exits, and stop here.
		panic(fmt.Sprintf("netnstest: cannot restore the original network namespace: %v", err))
	}
	runtime.UnlockOSThread()
	if openErr != nil {
		return nil, openErr
	}

	ns := &NS{fd: fd}
	defer func() {
		if err != nil {
			_ = ns.Close()
		}
	}()
	err = ns.Do(func() error {
		if !o.noLoopUp {
			if err := LinkUp("lo"); err != nil {
				return err
			}
		}
		for _, kv := range o.sysctls {
			if err := SetSysctl(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ns, nil
}

// Do runs fn on the calling goroutine, locked to its OS thread, with that
// thread inside ns; the thread returns to its previous namespace afterwards
// (also if fn panics or calls runtime.Goexit, e.g. through t.FailNow).
// Do calls may nest. If the previous namespace cannot be restored, Do
// panics rather than letting the caller continue in the wrong namespace.
func (ns *NS) Do(fn func() error) error {
	ns.mu.Lock()
	fd := ns.fd
	if fd < 0 {
		ns.mu.Unlock()
		return errors.New("netnstest: namespace is closed")
	}
	// Hold our own reference so a concurrent Close cannot invalidate fd.
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	ns.mu.Unlock()
	if err != nil {
		return fmt.Errorf("netnstest: dup: %w", err)
	}
	defer unix.Close(dup)

	runtime.LockOSThread()
	orig, err := openThreadNS()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	if err := unix.Setns(dup, unix.CLONE_NEWNET); err != nil {
		unix.Close(orig)
		runtime.UnlockOSThread()
		return fmt.Errorf("netnstest: setns: %w", err)
	}
	defer func() {
		err := unix.Setns(orig, unix.CLONE_NEWNET)
		unix.Close(orig)
		if err != nil {
			panic(fmt.Sprintf("netnstest: cannot restore the original network namespace: %v", err))
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}

// Run is Do for tests: it fails t if the namespace cannot be entered.
func (ns *NS) Run(t testing.TB, fn func()) {
	t.Helper()
	if err := ns.Do(func() error { fn(); return nil }); err != nil {
		t.Fatalf("netnstest: %v", err)
	}
}

// SetSysctl writes a sysctl inside ns (see the package function SetSysctl).
func (ns *NS) SetSysctl(name, value string) error {
	return ns.Do(func() error { return SetSysctl(name, value) })
}

// Path returns a path naming the namespace, valid while ns is open and only
// for processes that may read this process's /proc entries; usable wherever
// iproute2 accepts a namespace, e.g. `ip link set dev veth1 netns <path>`.
func (ns *NS) Path() string {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), ns.fd)
}

// Close releases the namespace. The kernel destroys it once no process,
// socket or mount still refers to it. Close is idempotent.
func (ns *NS) Close() error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.fd < 0 {
		return nil
	}
	err := unix.Close(ns.fd)
	ns.fd = -1
	return err
}

// SetSysctl writes value to the sysctl name ("net.ipv4.ping_group_range")
// in the network namespace of the calling thread; call it inside Do. Names
// whose components contain dots (e.g. interface "eth0.100") are not
// supported.
func SetSysctl(name, value string) error {
	if err := os.WriteFile(sysctlPath(name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("netnstest: sysctl %s=%q: %w", name, value, err)
	}
	return nil
}

// Sysctl reads the sysctl name in the network namespace of the calling
// thread, with surrounding white space removed.
func Sysctl(name string) (string, error) {
	b, err := os.ReadFile(sysctlPath(name))
	if err != nil {
		return "", fmt.Errorf("netnstest: sysctl %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// LinkUp sets IFF_UP on the interface name in the network namespace of the
// calling thread; call it inside Do.
func LinkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netnstest: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("netnstest: %s: %w", name, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("netnstest: SIOCGIFFLAGS %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("netnstest: SIOCSIFFLAGS %s up: %w", name, err)
	}
	return nil
}

func sysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

// openThreadNS opens the network namespace of the calling thread (the
// caller must have locked its OS thread).
func openThreadNS() (int, error) {
	p := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("netnstest: open %s: %w", p, err)
	}
	return fd, nil
}
