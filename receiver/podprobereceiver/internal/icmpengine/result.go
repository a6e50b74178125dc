// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package icmpengine

import (
	"net/netip"
	"time"
)

// EchoStatus is the outcome of one echo request.
type EchoStatus uint8

const (
	// EchoPending is only seen inside the engine.
	EchoPending EchoStatus = iota
	// EchoReplied: the matching echo reply arrived within the timeout.
	EchoReplied
	// EchoTimeout: no reply within the timeout (a reply arriving later is
	// counted in Result.Late, the echo stays EchoTimeout).
	EchoTimeout
	// EchoError: sending failed or an ICMP error quoting the probe came
	// back; see Echo.Err.
	EchoError
	// EchoCanceled: the round was canceled or the engine closed before the
	// echo was answered.
	EchoCanceled
)

func (s EchoStatus) String() string {
	switch s {
	case EchoPending:
		return "pending"
	case EchoReplied:
		return "replied"
	case EchoTimeout:
		return "timeout"
	case EchoError:
		return "error"
	case EchoCanceled:
		return "canceled"
	}
	return "unknown"
}

// Echo is one echo request of a round.
type Echo struct {
	// Seq is the ICMP sequence number used on the wire.
	Seq    int
	Status EchoStatus
	// RTT is set for EchoReplied.
	RTT time.Duration
	// KernelTimestamp tells whether RTT used the kernel receive timestamp
	// (SO_TIMESTAMPNS) rather than the time the engine read the reply.
	KernelTimestamp bool
	// From is the source of the reply or of the ICMP error message.
	From netip.Addr
	// Err is set for EchoError (a *ProbeError).
	Err error
}

// Result summarizes a round of echoes to one address.
type Result struct {
	Addr netip.Addr
	// Sent counts echo requests the round tried to send (including sends
	// that failed), Received the replies that matched within the timeout,
	// Lost = Sent - Received.
	Sent, Received, Lost int
	// Loss = Lost / Sent (0 when nothing was sent).
	Loss float64
	// Late counts replies that matched a probe of this round after its
	// timeout, Duplicates second replies to an answered probe, both while
	// the round was running (later ones only show in Engine.Stats).
	Late, Duplicates int
	// MinRTT, AvgRTT, MaxRTT over the received echoes; Jitter is the mean
	// absolute difference of consecutive RTTs (in send order, replies only).
	MinRTT, AvgRTT, MaxRTT, Jitter time.Duration
	// RTTs are the round-trip times of the received echoes in send order.
	RTTs []time.Duration
	// Echoes has one entry per echo request, in send order.
	Echoes []Echo
}

func summarize(addr netip.Addr, echoes []Echo, late, dups int) Result {
	r := Result{Addr: addr, Sent: len(echoes), Echoes: echoes, Late: late, Duplicates: dups}
	var sum time.Duration
	var jsum time.Duration
	for i := range echoes {
		e := &echoes[i]
		if e.Status != EchoReplied {
			continue
		}
		if r.Received == 0 || e.RTT < r.MinRTT {
			r.MinRTT = e.RTT
		}
		if e.RTT > r.MaxRTT {
			r.MaxRTT = e.RTT
		}
		if r.Received > 0 {
			d := e.RTT - r.RTTs[r.Received-1]
			if d < 0 {
				d = -d
			}
			jsum += d
		}
		sum += e.RTT
		r.RTTs = append(r.RTTs, e.RTT)
		r.Received++
	}
	r.Lost = r.Sent - r.Received
	if r.Sent > 0 {
		r.Loss = float64(r.Lost) / float64(r.Sent)
	}
	if r.Received > 0 {
		r.AvgRTT = sum / time.Duration(r.Received)
	}
	if r.Received > 1 {
		r.Jitter = jsum / time.Duration(r.Received-1)
	}
	return r
}

// Stats are engine-wide counters since Start.
type Stats struct {
	// Sent echo requests (attempted), SendErrors among them.
	Sent, SendErrors uint64
	// Replies matched a pending probe in time; Timeouts expired unanswered.
	Replies, Timeouts uint64
	// Late replies matched a probe after its timeout (or after its round
	// was canceled); Duplicates matched an already answered probe.
	Late, Duplicates uint64
	// Stray echo replies reached our socket but matched no probe (unknown
	// sequence, wrong nonce, identifier or source): e.g. another ping
	// process using the same identifier on a raw socket, or a reply older
	// than LateReplyWindow.
	Stray uint64
	// ICMPErrors matched one of our probes (unreachable, time exceeded,
	// ...); StrayICMPErrors quoted a packet that was not ours.
	ICMPErrors, StrayICMPErrors uint64
	// KernelTimestamps / UserTimestamps count replies whose RTT used the
	// kernel receive timestamp / the user-space read time.
	KernelTimestamps, UserTimestamps uint64
	// ReceiveQueueDrops is the kernel's count of packets dropped because a
	// socket receive buffer was full (SO_RXQ_OVFL), summed over sockets.
	ReceiveQueueDrops uint64
	// ReceiveErrors are unexpected recvmsg errors.
	ReceiveErrors uint64
	// ActiveRounds and PendingProbes are current values.
	ActiveRounds, PendingProbes int
}

// SocketInfo describes the socket of one address family.
type SocketInfo struct {
	// Family is "ipv4" or "ipv6".
	Family string
	// Network is the socket kind in net/x/net/icmp terms: "udp4", "udp6",
	// "ip4:icmp" or "ip6:ipv6-icmp"; "" when unavailable.
	Network string
	// Mode is ModeUnprivileged or ModePrivileged ("" when unavailable).
	Mode Mode
	// Identifier is the ICMP echo identifier on the wire: the
	// kernel-assigned socket "port" in unprivileged mode, a random value in
	// privileged mode.
	Identifier int
	// ReceiveBufferBytes is the effective SO_RCVBUF the kernel reports
	// (twice the usable payload budget; see socket(7)).
	ReceiveBufferBytes int
	// ReceiveBufferForced tells whether SO_RCVBUFFORCE was accepted.
	ReceiveBufferForced bool
	// KernelTimestamps tells whether SO_TIMESTAMPNS was enabled.
	KernelTimestamps bool
	// Err is why the family is unavailable (nil when available).
	Err error
}

// Request describes a round of echoes for Submit.
type Request struct {
	Addr netip.Addr
	// Count echo requests (>= 1), Interval apart (>= 0), each waiting
	// Timeout (> 0) for its reply.
	Count    int
	Interval time.Duration
	Timeout  time.Duration
	// Size, when not 0, is the size of each echo request as an IP packet in bytes (IP
	// header, ICMP header and payload: what a link's MTU limits), for path-MTU probes;
	// 0 sends the engine's PayloadSize. With Config.DontFragment an echo larger than the
	// path's MTU is dropped (or answered with packet-too-big) instead of fragmented.
	Size int
}

// IP header sizes without options, for Request.Size.
const (
	IPv4HeaderLen = 20
	IPv6HeaderLen = 40
)

// payloadFor is the ICMP payload that makes an IP packet of size bytes.
func payloadFor(size int, v6 bool) int {
	if v6 {
		return size - IPv6HeaderLen - echoHeaderLen
	}
	return size - IPv4HeaderLen - echoHeaderLen
}
