// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package icmpengine

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Wire format of our echo requests:
//
//	0      1      2      4      6      8            16        24
//	| type | code | csum |  id  | seq  | "netpulse" | nonce   | zero padding ...
//
// The nonce is a random 64-bit value drawn for every probe. A reply is ours
// only if its sequence number names a remembered probe AND it carries that
// probe's nonce (and our identifier, and comes from the probed address).
const (
	echoHeaderLen = 8
	payloadMagic  = "netpulse"
	protoICMP     = 1
	protoICMPv6   = 58
)

var (
	typeEchoV4      = byte(ipv4.ICMPTypeEcho)
	typeEchoReplyV4 = byte(ipv4.ICMPTypeEchoReply)
	typeEchoV6      = byte(ipv6.ICMPTypeEchoRequest)
	typeEchoReplyV6 = byte(ipv6.ICMPTypeEchoReply)
)

// marshalEcho writes an echo request into b (len(b) = 8 + payload size).
// The checksum is only needed on IPv4 raw sockets: the kernel computes it
// for datagram ICMP sockets and for ICMPv6 raw sockets.
func marshalEcho(b []byte, v6 bool, id, seq uint16, nonce uint64, withChecksum bool) {
	clear(b)
	if v6 {
		b[0] = typeEchoV6
	} else {
		b[0] = typeEchoV4
	}
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:16], payloadMagic)
	binary.BigEndian.PutUint64(b[16:24], nonce)
	if withChecksum {
		binary.BigEndian.PutUint16(b[2:], checksum(b))
	}
}

func checksum(b []byte) uint16 {
	var s uint32
	n := len(b) &^ 1
	for i := 0; i < n; i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)&1 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// echoFields are the matching fields of an echo request or reply.
type echoFields struct {
	id, seq  uint16
	nonce    uint64
	hasNonce bool // false when an ICMP error quoted too little of the probe
}

// parseEcho parses an ICMP echo message of type typ (b starts at the ICMP
// header). Echo replies must carry our magic and nonce.
func parseEcho(b []byte, typ byte) (echoFields, bool) {
	if len(b) < echoHeaderLen || b[0] != typ || b[1] != 0 {
		return echoFields{}, false
	}
	f := echoFields{
		id:  binary.BigEndian.Uint16(b[4:]),
		seq: binary.BigEndian.Uint16(b[6:]),
	}
	if len(b) >= echoHeaderLen+MinPayloadSize && string(b[8:16]) == payloadMagic {
		f.nonce = binary.BigEndian.Uint64(b[16:24])
		f.hasNonce = true
	}
	return f, true
}

func parseEchoReply(b []byte, v6 bool) (echoFields, bool) {
	typ := typeEchoReplyV4
	if v6 {
		typ = typeEchoReplyV6
	}
	f, ok := parseEcho(b, typ)
	return f, ok && f.hasNonce
}

// parseQuotedEcho parses the echo request quoted by an ICMP error, b
// starting at the ICMP header.
func parseQuotedEcho(b []byte, v6 bool) (echoFields, bool) {
	typ := typeEchoV4
	if v6 {
		typ = typeEchoV6
	}
	return parseEcho(b, typ)
}

// icmpError is an ICMP error message quoting one of our echo requests.
type icmpError struct {
	kind       ErrorKind
	typ, code  int
	dst        netip.Addr // destination of the quoted packet
	probe      echoFields
	quotedEcho bool
}

// isErrorType reports whether an ICMP type byte is an error we decode.
func isErrorType(t byte, v6 bool) bool {
	if v6 {
		return t >= 1 && t <= 4
	}
	return t == 3 || t == 11 || t == 12
}

func classify(typ, code int, v6 bool) ErrorKind {
	if v6 {
		switch typ {
		case int(ipv6.ICMPTypeDestinationUnreachable):
			return KindUnreachable
		case int(ipv6.ICMPTypePacketTooBig):
			return KindPacketTooBig
		case int(ipv6.ICMPTypeTimeExceeded):
			return KindTimeExceeded
		case int(ipv6.ICMPTypeParameterProblem):
			return KindParameterProblem
		}
		return KindUnreachable
	}
	switch typ {
	case int(ipv4.ICMPTypeDestinationUnreachable):
		if code == 4 { // fragmentation needed and DF set
			return KindPacketTooBig
		}
		return KindUnreachable
	case int(ipv4.ICMPTypeTimeExceeded):
		return KindTimeExceeded
	case int(ipv4.ICMPTypeParameterProblem):
		return KindParameterProblem
	}
	return KindUnreachable
}

// parseICMPError decodes an ICMP error message received on a raw socket (b
// starts at the ICMP header) whose quoted packet is an ICMP echo request.
func parseICMPError(b []byte, v6 bool) (icmpError, bool) {
	if len(b) < 1 || !isErrorType(b[0], v6) {
		return icmpError{}, false
	}
	proto := protoICMP
	if v6 {
		proto = protoICMPv6
	}
	m, err := icmp.ParseMessage(proto, b)
	if err != nil {
		return icmpError{}, false
	}
	var quoted []byte
	switch body := m.Body.(type) {
	case *icmp.DstUnreach:
		quoted = body.Data
	case *icmp.TimeExceeded:
		quoted = body.Data
	case *icmp.ParamProb:
		quoted = body.Data
	case *icmp.PacketTooBig:
		quoted = body.Data
	default:
		return icmpError{}, false
	}
	e := icmpError{typ: int(b[0]), code: m.Code}
	e.kind = classify(e.typ, e.code, v6)
	var inner []byte
	if v6 {
		// Fixed 40-byte IPv6 header; we never send extension headers.
		if len(quoted) < 40 || quoted[0]>>4 != 6 || quoted[6] != protoICMPv6 {
			return icmpError{}, false
		}
		e.dst = netip.AddrFrom16([16]byte(quoted[24:40]))
		inner = quoted[40:]
	} else {
		if len(quoted) < 20 || quoted[0]>>4 != 4 {
			return icmpError{}, false
		}
		ihl := int(quoted[0]&0x0f) * 4
		if ihl < 20 || len(quoted) < ihl || quoted[9] != protoICMP {
			return icmpError{}, false
		}
		e.dst = netip.AddrFrom4([4]byte(quoted[16:20]))
		inner = quoted[ihl:]
	}
	p, ok := parseQuotedEcho(inner, v6)
	if !ok {
		return icmpError{}, false
	}
	e.probe, e.quotedEcho = p, true
	return e, true
}

// stripIPv4Header returns the ICMP part of a packet read from an IPv4 raw
// socket (which includes the IP header).
func stripIPv4Header(b []byte) []byte {
	if len(b) < 20 || b[0]>>4 != 4 {
		return nil
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl {
		return nil
	}
	return b[ihl:]
}
