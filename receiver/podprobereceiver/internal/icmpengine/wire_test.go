// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package icmpengine

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

func TestMarshalEcho(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := make([]byte, echoHeaderLen+40)
		marshalEcho(b, v6, 0x1234, 0xfedc, 0x0102030405060708, !v6)
		proto := protoICMP
		if v6 {
			proto = protoICMPv6
		}
		m, err := icmp.ParseMessage(proto, b)
		if err != nil {
			t.Fatal(err)
		}
		echo, ok := m.Body.(*icmp.Echo)
		if !ok || echo.ID != 0x1234 || echo.Seq != 0xfedc || string(echo.Data[:8]) != payloadMagic || len(echo.Data) != 40 {
			t.Fatalf("v6=%v: parsed %+v %+v", v6, m, m.Body)
		}
		if !v6 && checksum(b) != 0 {
			t.Fatalf("IPv4 checksum does not verify: %x", checksum(b))
		}
		if v6 && (m.Type != ipv6.ICMPTypeEchoRequest) || !v6 && m.Type != ipv4.ICMPTypeEcho {
			t.Fatalf("type %v", m.Type)
		}
		// The reply the kernel builds: same bytes, reply type.
		reply := append([]byte(nil), b...)
		reply[0] = typeEchoReplyV4
		if v6 {
			reply[0] = typeEchoReplyV6
		}
		f, ok := parseEchoReply(reply, v6)
		if !ok || f.id != 0x1234 || f.seq != 0xfedc || f.nonce != 0x0102030405060708 {
			t.Fatalf("parseEchoReply: %+v %v", f, ok)
		}
		if _, ok := parseEchoReply(b, v6); ok {
			t.Fatal("an echo request parsed as a reply")
		}
		if _, ok := parseEchoReply(reply[:echoHeaderLen+8], v6); ok {
			t.Fatal("a reply without nonce parsed")
		}
		reply[9] ^= 0xff // corrupt the magic
		if _, ok := parseEchoReply(reply, v6); ok {
			t.Fatal("a reply without our magic parsed")
		}
	}
}

func TestChecksumOddLength(t *testing.T) {
	b := []byte{8, 0, 0, 0, 0, 1, 0, 2, 0xab}
	c := checksum(b)
	b[2], b[3] = byte(c>>8), byte(c)
	if checksum(b) != 0 {
		t.Fatal("odd-length checksum does not verify")
	}
}

func quotedIPv4(dst netip.Addr, payload []byte) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	h[8] = 64
	h[9] = protoICMP
	copy(h[12:16], []byte{10, 0, 0, 1})
	d := dst.As4()
	copy(h[16:20], d[:])
	return append(h, payload...)
}

func quotedIPv6(dst netip.Addr, payload []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	h[6] = protoICMPv6
	h[7] = 64
	d := dst.As16()
	copy(h[24:40], d[:])
	return append(h, payload...)
}

func TestParseICMPError(t *testing.T) {
	probe4 := make([]byte, echoHeaderLen+MinPayloadSize)
	marshalEcho(probe4, false, 7, 9, 42, true)
	probe6 := make([]byte, echoHeaderLen+MinPayloadSize)
	marshalEcho(probe6, true, 7, 9, 42, false)
	dst4, dst6 := netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("2001:db8::9")

	for _, tc := range []struct {
		name      string
		v6        bool
		msg       icmp.Message
		kind      ErrorKind
		dst       netip.Addr
		withNonce bool
	}{
		{"v4 host unreachable", false, icmp.Message{Type: ipv4.ICMPTypeDestinationUnreachable, Code: 1,
			Body: &icmp.DstUnreach{Data: quotedIPv4(dst4, probe4)}}, KindUnreachable, dst4, true},
		{"v4 frag needed", false, icmp.Message{Type: ipv4.ICMPTypeDestinationUnreachable, Code: 4,
			Body: &icmp.DstUnreach{Data: quotedIPv4(dst4, probe4)}}, KindPacketTooBig, dst4, true},
		{"v4 time exceeded, RFC 792 8-byte quote", false, icmp.Message{Type: ipv4.ICMPTypeTimeExceeded,
			Body: &icmp.TimeExceeded{Data: quotedIPv4(dst4, probe4[:8])}}, KindTimeExceeded, dst4, false},
		{"v6 no route", true, icmp.Message{Type: ipv6.ICMPTypeDestinationUnreachable,
			Body: &icmp.DstUnreach{Data: quotedIPv6(dst6, probe6)}}, KindUnreachable, dst6, true},
		{"v6 packet too big", true, icmp.Message{Type: ipv6.ICMPTypePacketTooBig,
			Body: &icmp.PacketTooBig{MTU: 1280, Data: quotedIPv6(dst6, probe6)}}, KindPacketTooBig, dst6, true},
		{"v6 hop limit", true, icmp.Message{Type: ipv6.ICMPTypeTimeExceeded,
			Body: &icmp.TimeExceeded{Data: quotedIPv6(dst6, probe6)}}, KindTimeExceeded, dst6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.msg.Marshal(nil)
			if err != nil {
				t.Fatal(err)
			}
			ie, ok := parseICMPError(b, tc.v6)
			if !ok || ie.kind != tc.kind || ie.dst != tc.dst || ie.probe.id != 7 || ie.probe.seq != 9 ||
				ie.probe.hasNonce != tc.withNonce || (tc.withNonce && ie.probe.nonce != 42) {
				t.Fatalf("parsed %+v ok=%v", ie, ok)
			}
		})
	}

	// Errors quoting something else than an echo request are not ours.
	udp := quotedIPv4(dst4, make([]byte, 8))
	udp[9] = 17
	other := icmp.Message{Type: ipv4.ICMPTypeDestinationUnreachable, Code: 3, Body: &icmp.DstUnreach{Data: udp}}
	b, _ := other.Marshal(nil)
	if _, ok := parseICMPError(b, false); ok {
		t.Fatal("a UDP port unreachable parsed as ours")
	}
	if _, ok := parseICMPError([]byte{3}, false); ok {
		t.Fatal("a truncated message parsed")
	}
}

func TestSummarize(t *testing.T) {
	us := time.Microsecond
	echoes := []Echo{
		{Status: EchoReplied, RTT: 10 * us},
		{Status: EchoTimeout},
		{Status: EchoReplied, RTT: 20 * us},
		{Status: EchoReplied, RTT: 15 * us},
	}
	r := summarize(netip.MustParseAddr("127.0.0.1"), echoes, 1, 2)
	if r.Sent != 4 || r.Received != 3 || r.Lost != 1 || r.Loss != 0.25 || r.Late != 1 || r.Duplicates != 2 {
		t.Fatalf("counts %+v", r)
	}
	if r.MinRTT != 10*us || r.MaxRTT != 20*us || r.AvgRTT != 15*us || r.Jitter != 7500*time.Nanosecond {
		t.Fatalf("rtts %+v", r)
	}
	if len(r.RTTs) != 3 || r.RTTs[1] != 20*us {
		t.Fatalf("raw rtts %v", r.RTTs)
	}
	if z := summarize(netip.Addr{}, nil, 0, 0); z.Loss != 0 || z.AvgRTT != 0 {
		t.Fatalf("empty %+v", z)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{
		{Mode: "root"},
		{PayloadSize: 8},
		{PayloadSize: MaxPayloadSize + 1},
		{ReceiveBufferBytes: -1},
		{LateReplyWindow: -time.Second},
		{DisableIPv4: true, DisableIPv6: true},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) succeeded", c)
		}
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) succeeded", c)
		}
	}
}

func TestErrors(t *testing.T) {
	pe := &ProbeError{Kind: KindTimeout, Addr: netip.MustParseAddr("10.0.0.1"), ICMPType: -1, TimeoutAfter: time.Second}
	if !errors.Is(pe, ErrTimeout) || errors.Is(pe, ErrUnreachable) || !pe.Timeout() {
		t.Fatal("timeout error classification")
	}
	if got := pe.Error(); got != "icmp echo to 10.0.0.1: no reply within 1s" {
		t.Fatalf("message %q", got)
	}
	ue := &ProbeError{Kind: KindUnreachable, Addr: netip.MustParseAddr("10.0.0.1"), From: netip.MustParseAddr("10.0.0.254"), ICMPType: 3, ICMPCode: 1}
	if !errors.Is(ue, ErrUnreachable) || !strings.Contains(ue.Error(), "type 3 code 1) from 10.0.0.254") {
		t.Fatalf("unreachable error %q", ue.Error())
	}
	if KindPacketTooBig.String() != "packet_too_big" || ErrorKind(99).String() != "kind(99)" {
		t.Fatal("kind names")
	}
	perm := &PermissionError{Mode: ModeAuto, PingGroupRange: "1 0", GID: 1000, Groups: []int{1000, 27},
		Unprivileged: errors.New("udp4: socket: permission denied"), Privileged: errors.New("ip4:icmp: socket: operation not permitted")}
	msg := perm.Error()
	for _, w := range []string{"net.ipv4.ping_group_range", `"1 0"`, "gid 1000", "[1000 27]", "CAP_NET_RAW"} {
		if !strings.Contains(msg, w) {
			t.Errorf("permission error lacks %q: %s", w, msg)
		}
	}
	if !errors.Is(perm, ErrPermission) {
		t.Fatal("PermissionError is not ErrPermission")
	}
}
