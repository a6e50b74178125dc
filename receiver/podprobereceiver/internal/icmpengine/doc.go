// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package icmpengine is a shared-socket ICMP echo ("ping") engine for many
// targets.
//
// One socket per address family (IPv4, IPv6) serves every target, and each
// socket has exactly one goroutine: an event loop that sends the due echo
// requests, reads replies and ICMP errors, and expires probes. Sockets and
// goroutines do not grow with the number of targets or of concurrent
// rounds.
//
// Usage:
//
//	e, err := icmpengine.New(icmpengine.Config{Mode: icmpengine.ModeAuto})
//	...
//	if err := e.Start(ctx); err != nil { // opens the sockets
//		// errors.Is(err, icmpengine.ErrPermission): see the message for the
//		// sysctl net.ipv4.ping_group_range / CAP_NET_RAW to fix.
//	}
//	defer e.Close()
//	res, err := e.Ping(ctx, netip.MustParseAddr("10.1.2.3"), 3, time.Second, time.Second)
//	// res.Sent, res.Received, res.Loss, res.MinRTT/AvgRTT/MaxRTT/Jitter,
//	// res.RTTs, res.Echoes; err is a *ProbeError when nothing answered.
//
// Ping blocks the calling goroutine; Submit is the asynchronous form (a
// callback per round), with which a single goroutine can keep thousands of
// rounds in flight.
//
// Replies are attributed to a probe only if identifier, sequence number,
// the probe's random 64-bit nonce (carried in the payload) and source
// address all match; late, duplicate and stray replies are counted
// separately (see Stats). RTTs use a monotonic send time taken right before
// sendto and the kernel receive timestamp (SO_TIMESTAMPNS), so they do not
// include the time the reply waited for the Go scheduler.
//
// See receiver/podprobereceiver/docs/icmp.md for design, permissions and
// measurements. The engine is Linux only; elsewhere New returns an error.
package icmpengine
