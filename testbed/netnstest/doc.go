// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package netnstest runs test code inside fresh Linux network namespaces.
//
// A test creates a namespace with New (or Create outside of tests), then runs
// code inside it with NS.Do / NS.Run:
//
//	ns := netnstest.New(t, netnstest.WithSysctl("net.ipv4.ping_group_range", "0 2147483647"))
//	ns.Run(t, func() {
//		// This goroutine's OS thread is inside ns. Sockets created here stay
//		// bound to ns for their whole lifetime and can be used from any
//		// goroutine afterwards.
//	})
//
// How it works: Create locks the calling goroutine to its OS thread,
// unshare(CLONE_NEWNET)s that thread, keeps a file descriptor on the new
// namespace, switches the thread back with setns(2) and unlocks it. Do locks
// the calling goroutine to its thread, setns(2)s into the namespace, runs the
// function and switches back before unlocking. Every new namespace gets its
// loopback interface brought up (127.0.0.0/8 and ::1 answer pings), then the
// requested sysctls are written to /proc/sys/net/... from inside it.
//
// Caveats:
//   - Only the goroutine running inside Do is in the namespace. Goroutines it
//     starts run on other threads, in the original namespace. Sockets and file
//     descriptors opened inside Do keep their namespace, so "open inside Do,
//     use anywhere" is the intended pattern.
//   - A child process started (os/exec) from inside Do inherits the namespace
//     (the fork happens on the locked thread); this is how a test runs e.g.
//     /usr/bin/ping inside the namespace.
//   - NS.Path names the namespace for tools such as
//     `ip link set dev veth1 netns <path>` while the NS is open.
//   - Everything needs root (CAP_SYS_ADMIN for unshare/setns, CAP_NET_ADMIN
//     for links and most sysctls). RequireRoot fails the test with a clear
//     message when not root, unless NETPULSE_ALLOW_SKIP_PRIVILEGED=1 is set,
//     in which case the test is skipped.
//
// The package is Linux only; on other systems the functions return errors.
package netnstest
