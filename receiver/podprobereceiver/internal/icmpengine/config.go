// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package icmpengine

import (
	"fmt"
	"time"
)

// Mode selects the kind of ICMP socket the engine opens.
type Mode string

const (
	// ModeAuto tries ModeUnprivileged first and falls back to
	// ModePrivileged, per address family.
	ModeAuto Mode = "auto"
	// ModeUnprivileged uses datagram ICMP sockets ("udp4"/"udp6",
	// socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)). The kernel allows them when
	// one of the process's groups is inside the sysctl
	// net.ipv4.ping_group_range (which also governs IPv6). The kernel
	// rewrites the echo identifier to the socket's "port" and only delivers
	// replies carrying it.
	ModeUnprivileged Mode = "unprivileged"
	// ModePrivileged uses raw ICMP sockets ("ip4:icmp"/"ip6:ipv6-icmp"),
	// which need CAP_NET_RAW. A raw socket sees every ICMP packet of the
	// network namespace, so a BPF filter keeps only echo replies carrying
	// our identifier and ICMP error messages.
	ModePrivileged Mode = "privileged"
)

// Defaults used for zero Config fields.
const (
	DefaultReceiveBufferBytes = 4 << 20
	DefaultPayloadSize        = 16
	DefaultLateReplyWindow    = 5 * time.Second
	DefaultTimerSlack         = 10 * time.Millisecond

	// MinPayloadSize is the room needed for the magic and the nonce.
	MinPayloadSize = 16
	// MaxPayloadSize bounds the echo payload.
	MaxPayloadSize = 65000
)

// Config configures an Engine. The zero value is usable.
type Config struct {
	// Mode is the socket kind; "" means ModeAuto.
	Mode Mode `mapstructure:"mode"`

	// ReceiveBufferBytes is the SO_RCVBUF size requested for each socket
	// (0 means DefaultReceiveBufferBytes). The engine first tries
	// SO_RCVBUFFORCE (needs CAP_NET_ADMIN, ignores net.core.rmem_max), then
	// SO_RCVBUF (capped by net.core.rmem_max). The kernel doubles the value
	// for its bookkeeping; Info reports what the kernel granted. The
	// kernel's default (net.core.rmem_default, 208 KiB) drops replies when
	// many arrive at once.
	ReceiveBufferBytes int `mapstructure:"receive_buffer_bytes"`

	// PayloadSize is the number of bytes after the 8-byte ICMP echo header,
	// at least MinPayloadSize (0 means DefaultPayloadSize). The first 16
	// bytes carry the magic "netpulse" and the per-probe nonce.
	PayloadSize int `mapstructure:"payload_size"`

	// LateReplyWindow is how long after its timeout a probe is still
	// remembered, so that its reply is counted as late (or a second reply as
	// a duplicate) instead of stray. 0 means DefaultLateReplyWindow.
	LateReplyWindow time.Duration `mapstructure:"late_reply_window"`

	// TimerSlack lets the event loop of a socket run its timers (echoes to
	// send, probe deadlines) up to this much late, so that timers close to
	// each other share one wake-up: at most one timer wake-up per
	// TimerSlack per socket. RTTs are not affected (send times are taken
	// right before sendto, replies are timed by the kernel) and whether a
	// reply was on time is judged by its arrival time. 0 means
	// DefaultTimerSlack; a negative value disables the slack.
	TimerSlack time.Duration `mapstructure:"timer_slack"`

	// DontFragment sets the don't-fragment bit on IPv4 echoes and forbids IPv6
	// fragmentation at the source (IP(V6)_MTU_DISCOVER = PMTUDISC_PROBE: the
	// kernel neither fragments nor caps the size at its path-MTU cache, so
	// every echo tests the path at its size). Small echoes are unaffected;
	// path-MTU probes (Request.Size) need it.
	DontFragment bool `mapstructure:"dont_fragment"`

	// DisableIPv4 / DisableIPv6 skip opening the socket of that family.
	DisableIPv4 bool `mapstructure:"disable_ipv4"`
	DisableIPv6 bool `mapstructure:"disable_ipv6"`
}

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeAuto
	}
	if c.ReceiveBufferBytes == 0 {
		c.ReceiveBufferBytes = DefaultReceiveBufferBytes
	}
	if c.PayloadSize == 0 {
		c.PayloadSize = DefaultPayloadSize
	}
	if c.LateReplyWindow == 0 {
		c.LateReplyWindow = DefaultLateReplyWindow
	}
	if c.TimerSlack == 0 {
		c.TimerSlack = DefaultTimerSlack
	} else if c.TimerSlack < 0 {
		c.TimerSlack = 0
	}
	return c
}

// Validate reports a configuration error, after applying defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch c.Mode {
	case ModeAuto, ModeUnprivileged, ModePrivileged:
	default:
		return fmt.Errorf("icmpengine: invalid mode %q (want %q, %q or %q)", c.Mode, ModeAuto, ModeUnprivileged, ModePrivileged)
	}
	if c.ReceiveBufferBytes < 0 {
		return fmt.Errorf("icmpengine: receive_buffer_bytes must not be negative, got %d", c.ReceiveBufferBytes)
	}
	if c.PayloadSize < MinPayloadSize || c.PayloadSize > MaxPayloadSize {
		return fmt.Errorf("icmpengine: payload_size must be in [%d, %d], got %d", MinPayloadSize, MaxPayloadSize, c.PayloadSize)
	}
	if c.LateReplyWindow < 0 {
		return fmt.Errorf("icmpengine: late_reply_window must not be negative, got %v", c.LateReplyWindow)
	}
	if c.TimerSlack > time.Second {
		return fmt.Errorf("icmpengine: timer_slack must be at most 1s, got %v", c.TimerSlack)
	}
	if c.DisableIPv4 && c.DisableIPv6 {
		return fmt.Errorf("icmpengine: both IPv4 and IPv6 are disabled")
	}
	return nil
}
