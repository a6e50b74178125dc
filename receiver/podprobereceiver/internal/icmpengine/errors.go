// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package icmpengine

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Sentinel errors; test with errors.Is. A *ProbeError matches the sentinel
// of its Kind, a *PermissionError matches ErrPermission.
var (
	ErrTimeout        = errors.New("icmpengine: timeout")
	ErrUnreachable    = errors.New("icmpengine: destination unreachable")
	ErrPermission     = errors.New("icmpengine: permission denied")
	ErrClosed         = errors.New("icmpengine: engine closed")
	ErrNotStarted     = errors.New("icmpengine: engine not started")
	ErrUnsupported    = errors.New("icmpengine: address family not available")
	ErrTooManyPending = errors.New("icmpengine: all 65536 sequence numbers of the socket are in use")
)

// ErrorKind classifies why an echo (or a whole round) failed.
type ErrorKind int

const (
	// KindTimeout: no reply within the timeout.
	KindTimeout ErrorKind = iota + 1
	// KindUnreachable: an ICMP destination-unreachable quoting our probe
	// came back, or sending failed with EHOSTUNREACH / ENETUNREACH
	// (e.g. an "unreachable" route).
	KindUnreachable
	// KindTimeExceeded: an ICMP time-exceeded (TTL / hop limit) quoting our
	// probe came back.
	KindTimeExceeded
	// KindPacketTooBig: ICMPv6 packet-too-big, or ICMPv4
	// fragmentation-needed quoting our probe.
	KindPacketTooBig
	// KindParameterProblem: ICMP parameter problem quoting our probe.
	KindParameterProblem
	// KindPermission: the kernel refused the socket or the send (EPERM /
	// EACCES: missing CAP_NET_RAW or ping_group_range, a firewall, a
	// "prohibit" route).
	KindPermission
	// KindSend: any other error while sending (e.g. EINVAL for a blackhole
	// route, ENOBUFS).
	KindSend
	// KindCanceled: the caller's context ended the round.
	KindCanceled
	// KindClosed: the engine was closed during the round.
	KindClosed
	// KindUnsupported: no socket for the address family (disabled, IPv6 not
	// available, ...).
	KindUnsupported
)

var kindNames = map[ErrorKind]string{
	KindTimeout:          "timeout",
	KindUnreachable:      "unreachable",
	KindTimeExceeded:     "time_exceeded",
	KindPacketTooBig:     "packet_too_big",
	KindParameterProblem: "parameter_problem",
	KindPermission:       "permission",
	KindSend:             "send",
	KindCanceled:         "canceled",
	KindClosed:           "closed",
	KindUnsupported:      "unsupported",
}

// String returns a short snake_case name, suitable as a metric attribute.
func (k ErrorKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ProbeError describes the failure of an echo or a round.
type ProbeError struct {
	Kind ErrorKind
	// Addr is the probed address.
	Addr netip.Addr
	// From is the sender of the ICMP error message (a router), if any.
	From netip.Addr
	// ICMPType / ICMPCode of the ICMP error message; -1 when not from ICMP.
	ICMPType, ICMPCode int
	// TimeoutAfter is the per-echo timeout, for KindTimeout.
	TimeoutAfter time.Duration
	// Err is the underlying error (a syscall.Errno, context.Canceled, ...),
	// may be nil.
	Err error
}

func (e *ProbeError) Error() string {
	var b strings.Builder
	b.WriteString("icmp echo to ")
	b.WriteString(e.Addr.String())
	b.WriteString(": ")
	switch e.Kind {
	case KindTimeout:
		fmt.Fprintf(&b, "no reply within %v", e.TimeoutAfter)
	case KindUnreachable:
		b.WriteString("destination unreachable")
	case KindTimeExceeded:
		b.WriteString("time exceeded")
	case KindPacketTooBig:
		b.WriteString("packet too big")
	case KindParameterProblem:
		b.WriteString("parameter problem")
	case KindPermission:
		b.WriteString("permission denied")
	case KindSend:
		b.WriteString("send failed")
	case KindCanceled:
		b.WriteString("canceled")
	case KindClosed:
		b.WriteString("engine closed")
	case KindUnsupported:
		b.WriteString("address family not available")
	default:
		b.WriteString(e.Kind.String())
	}
	if e.ICMPType >= 0 && e.Kind != KindTimeout {
		fmt.Fprintf(&b, " (icmp type %d code %d)", e.ICMPType, e.ICMPCode)
	}
	if e.From.IsValid() {
		fmt.Fprintf(&b, " from %v", e.From)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *ProbeError) Unwrap() error { return e.Err }

// Is matches the sentinel error of e.Kind.
func (e *ProbeError) Is(target error) bool {
	switch target {
	case ErrTimeout:
		return e.Kind == KindTimeout
	case ErrUnreachable:
		return e.Kind == KindUnreachable
	case ErrPermission:
		return e.Kind == KindPermission
	case ErrClosed:
		return e.Kind == KindClosed
	case ErrUnsupported:
		return e.Kind == KindUnsupported
	}
	return false
}

// Timeout reports whether the failure was a timeout (net.Error style).
func (e *ProbeError) Timeout() bool { return e.Kind == KindTimeout }

// PermissionError is returned by Start when the kernel refuses every ICMP
// socket kind the mode allows. Its message names what to change.
type PermissionError struct {
	Mode Mode
	// PingGroupRange is the current value of net.ipv4.ping_group_range in
	// the caller's network namespace ("" if it could not be read).
	PingGroupRange string
	// GID is the effective group id, Groups the supplementary groups.
	GID    int
	Groups []int
	// Unprivileged / Privileged are the errors of the socket kinds tried
	// (nil when not tried).
	Unprivileged, Privileged error
}

func (e *PermissionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "icmpengine: cannot open an ICMP socket (mode %s)", e.Mode)
	if e.Unprivileged != nil {
		groups := ""
		if len(e.Groups) > 0 {
			groups = fmt.Sprintf(", supplementary groups %v", e.Groups)
		}
		rng := e.PingGroupRange
		if rng == "" {
			rng = "unreadable"
		} else {
			rng = fmt.Sprintf("%q", rng)
		}
		fmt.Fprintf(&b, "; unprivileged ICMP (datagram) sockets need the process group (gid %d%s) inside sysctl net.ipv4.ping_group_range, currently %s "+
			"(e.g. sysctl -w net.ipv4.ping_group_range=\"0 2147483647\", per network namespace/pod): %v",
			e.GID, groups, rng, e.Unprivileged)
	}
	if e.Privileged != nil {
		fmt.Fprintf(&b, "; privileged (raw) ICMP sockets need the CAP_NET_RAW capability: %v", e.Privileged)
	}
	return b.String()
}

// Is matches ErrPermission.
func (e *PermissionError) Is(target error) bool { return target == ErrPermission }
