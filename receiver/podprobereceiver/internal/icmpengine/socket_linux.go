// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package icmpengine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// sock is one ICMP socket (one per address family).
type sock struct {
	v6         bool
	privileged bool
	network    string
	file       *os.File
	rc         syscall.RawConn
	ident      uint16
	rcvbuf     int
	forced     bool
	kernelTS   bool
}

func networkName(v6, privileged bool) string {
	switch {
	case !v6 && !privileged:
		return "udp4"
	case v6 && !privileged:
		return "udp6"
	case !v6:
		return "ip4:icmp"
	default:
		return "ip6:ipv6-icmp"
	}
}

// openSocket opens and configures an ICMP socket in the network namespace
// of the calling thread. ident is the identifier to filter on for raw
// sockets; datagram sockets get theirs from the kernel.
func openSocket(v6, privileged bool, rcvbuf int, ident uint16, dontFragment bool) (*sock, error) {
	s := &sock{v6: v6, privileged: privileged, network: networkName(v6, privileged)}
	domain, proto := unix.AF_INET, unix.IPPROTO_ICMP
	if v6 {
		domain, proto = unix.AF_INET6, unix.IPPROTO_ICMPV6
	}
	typ := unix.SOCK_DGRAM
	if privileged {
		typ = unix.SOCK_RAW
	}
	fd, err := unix.Socket(domain, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.network, os.NewSyscallError("socket", err))
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	fail := func(op string, err error) (*sock, error) {
		return nil, fmt.Errorf("%s: %w", s.network, os.NewSyscallError(op, err))
	}

	// Receive buffer: SO_RCVBUFFORCE bypasses net.core.rmem_max but needs
	// CAP_NET_ADMIN; SO_RCVBUF is capped by rmem_max.
	if rcvbuf > 0 {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) == nil {
			s.forced = true
		} else if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); err != nil {
			return fail("setsockopt(SO_RCVBUF)", err)
		}
	}
	if s.rcvbuf, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil {
		return fail("getsockopt(SO_RCVBUF)", err)
	}
	if dontFragment {
		// PROBE: DF set (IPv4), no source fragmentation (IPv6), and the size is not
		// capped at the path-MTU cache, so each echo tests the path at its own size.
		if v6 {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_PROBE)
		} else {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE)
		}
		if err != nil {
			return fail("setsockopt(MTU_DISCOVER)", err)
		}
	}
	// Kernel receive timestamps (CLOCK_REALTIME, set when the packet entered
	// the stack) and the drop counter, both as control messages.
	s.kernelTS = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) == nil
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)

	if privileged {
		s.ident = ident
		if err := attachFilter(fd, v6, ident); err != nil {
			return fail("setsockopt(SO_ATTACH_FILTER)", err)
		}
	} else {
		// ICMP errors about our probes arrive on the error queue.
		if v6 {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1)
		} else {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVERR, 1)
		}
		if err != nil {
			return fail("setsockopt(RECVERR)", err)
		}
		// Binding to port 0 makes the kernel pick the echo identifier now.
		var sa unix.Sockaddr = &unix.SockaddrInet4{}
		if v6 {
			sa = &unix.SockaddrInet6{}
		}
		if err := unix.Bind(fd, sa); err != nil {
			return fail("bind", err)
		}
		local, err := unix.Getsockname(fd)
		if err != nil {
			return fail("getsockname", err)
		}
		switch la := local.(type) {
		case *unix.SockaddrInet4:
			s.ident = uint16(la.Port)
		case *unix.SockaddrInet6:
			s.ident = uint16(la.Port)
		}
	}

	// A non-blocking descriptor handed to os.NewFile is registered with the
	// runtime poller: RawConn.Read/Write park the goroutine instead of a
	// thread, and Close wakes them up.
	s.file = os.NewFile(uintptr(fd), s.network)
	ok = true
	if s.rc, err = s.file.SyscallConn(); err != nil {
		s.file.Close()
		return nil, err
	}
	return s, nil
}

// attachFilter installs a classic BPF program on a raw socket: accept echo
// replies carrying ident and the ICMP error types we decode, drop the rest
// (other processes' echo replies, echo requests, ...).
func attachFilter(fd int, v6 bool, ident uint16) error {
	const accept, drop = 0x40000, 0
	var prog []bpf.Instruction
	if v6 {
		// IPv6 raw sockets see the packet from the ICMPv6 header on.
		prog = []bpf.Instruction{
			bpf.LoadAbsolute{Off: 0, Size: 1}, // 0: A = type
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(typeEchoReplyV6), SkipFalse: 2},
			bpf.LoadAbsolute{Off: 4, Size: 2}, // 2: A = identifier
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(ident), SkipTrue: 3, SkipFalse: 2},
			bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: 4, SkipTrue: 1}, // 4: types 1..4 are errors
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: 1, SkipTrue: 1},
			bpf.RetConstant{Val: drop},   // 6
			bpf.RetConstant{Val: accept}, // 7
		}
	} else {
		// IPv4 raw sockets see the IP header first.
		prog = []bpf.Instruction{
			bpf.LoadMemShift{Off: 0},          // 0: X = IP header length
			bpf.LoadIndirect{Off: 0, Size: 1}, // 1: A = type
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(typeEchoReplyV4), SkipFalse: 2},
			bpf.LoadIndirect{Off: 4, Size: 2}, // 3: A = identifier
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(ident), SkipTrue: 4, SkipFalse: 3},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 3, SkipTrue: 3},  // 5: destination unreachable
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 11, SkipTrue: 2}, // 6: time exceeded
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 12, SkipTrue: 1}, // 7: parameter problem
			bpf.RetConstant{Val: drop},                            // 8
			bpf.RetConstant{Val: accept},                          // 9
		}
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return err
	}
	filters := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filters[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]})
}

func (s *sock) send(b []byte, sa unix.Sockaddr, beforeSend func()) error {
	var serr error
	err := s.rc.Write(func(fd uintptr) bool {
		for {
			beforeSend()
			serr = unix.Sendto(int(fd), b, 0, sa)
			if serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// packet is what the receive loop hands to the engine.
type packet struct {
	data []byte     // from the ICMP header on
	from netip.Addr // source (or, for the error queue, original destination)
	kts  int64      // kernel receive time, Unix ns; 0 if absent

	// Error-queue messages (datagram sockets) only.
	errQueue bool
	ee       unix.SockExtendedErr
	offender netip.Addr
}

// pendingSocketErrors are errnos a datagram ICMP socket reports through
// recvmsg when an ICMP error (or local error) is queued.
func pendingSocketError(err error) bool {
	switch err {
	case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH, unix.EHOSTDOWN, unix.ENETDOWN,
		unix.EMSGSIZE, unix.EPROTO, unix.ETIMEDOUT, unix.EACCES, unix.EPERM, unix.ENOPROTOOPT, unix.EOPNOTSUPP:
		return true
	}
	return false
}

// rxBuffers are the receive buffers of one socket's event loop.
type rxBuffers struct {
	buf, oob []byte
	pkt      packet
}

func newRxBuffers() *rxBuffers {
	return &rxBuffers{buf: make([]byte, 1<<16), oob: make([]byte, 512)}
}

// drain reads every queued packet without blocking (until EAGAIN), calling
// handle for each; it also drains the error queue of datagram sockets when
// the kernel signals a pending error. It returns the last unexpected error
// (it keeps reading past a few of them: readiness is edge-triggered, so
// packets left queued would wait for the next arrival).
func (s *sock) drain(fd int, rx *rxBuffers, handle func(*packet), onDrops func(uint32)) error {
	var lastErr error
	for errs := 0; errs < 16; {
		n, oobn, _, from, err := unix.Recvmsg(fd, rx.buf, rx.oob, unix.MSG_DONTWAIT)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return lastErr
		case err != nil && !s.privileged && pendingSocketError(err):
			// sk_err was set by a queued error: read the error queue.
			s.drainErrQueue(fd, rx, handle)
			continue
		case err != nil:
			lastErr = os.NewSyscallError("recvmsg", err)
			errs++
			continue
		}
		pkt := &rx.pkt
		*pkt = packet{}
		s.parseControl(rx.oob[:oobn], pkt, onDrops)
		pkt.from = sockaddrAddr(from)
		pkt.data = rx.buf[:n]
		if s.privileged && !s.v6 {
			if pkt.data = stripIPv4Header(pkt.data); pkt.data == nil {
				continue
			}
		}
		handle(pkt)
	}
	return lastErr
}

// drainErrQueue reads the socket error queue (IP_RECVERR/IPV6_RECVERR).
func (s *sock) drainErrQueue(fd int, rx *rxBuffers, handle func(*packet)) {
	for {
		n, oobn, _, from, err := unix.Recvmsg(fd, rx.buf, rx.oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return // EAGAIN: empty
		}
		pkt := &rx.pkt
		*pkt = packet{errQueue: true, data: rx.buf[:n], from: sockaddrAddr(from)}
		if s.parseErrControl(rx.oob[:oobn], pkt) {
			handle(pkt)
		}
	}
}

func (s *sock) parseControl(oob []byte, pkt *packet, onDrops func(uint32)) {
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return
		}
		oob = rest
		if h.Level != unix.SOL_SOCKET {
			continue
		}
		switch h.Type {
		case unix.SCM_TIMESTAMPNS:
			if len(data) >= int(unsafe.Sizeof(unix.Timespec{})) {
				ts := (*unix.Timespec)(unsafe.Pointer(&data[0]))
				pkt.kts = ts.Nano()
			}
		case unix.SO_RXQ_OVFL:
			if len(data) >= 4 {
				onDrops(binary.NativeEndian.Uint32(data))
			}
		}
	}
}

func (s *sock) parseErrControl(oob []byte, pkt *packet) bool {
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return false
		}
		oob = rest
		if !((h.Level == unix.IPPROTO_IP && h.Type == unix.IP_RECVERR) ||
			(h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_RECVERR)) {
			continue
		}
		const eeSize = int(unsafe.Sizeof(unix.SockExtendedErr{}))
		if len(data) < eeSize {
			return false
		}
		pkt.ee = *(*unix.SockExtendedErr)(unsafe.Pointer(&data[0]))
		// SO_EE_OFFENDER: the sockaddr right after the struct.
		off := data[eeSize:]
		if len(off) >= 2 {
			switch binary.NativeEndian.Uint16(off) {
			case unix.AF_INET:
				if len(off) >= unix.SizeofSockaddrInet4 {
					pkt.offender = netip.AddrFrom4([4]byte(off[4:8]))
				}
			case unix.AF_INET6:
				if len(off) >= unix.SizeofSockaddrInet6 {
					pkt.offender = netip.AddrFrom16([16]byte(off[8:24]))
				}
			}
		}
		if pkt.offender.IsUnspecified() {
			pkt.offender = netip.Addr{}
		}
		return true
	}
	return false
}

func sockaddrAddr(sa unix.Sockaddr) netip.Addr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrFrom4(a.Addr)
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(a.Addr)
	}
	return netip.Addr{}
}

func (s *sock) close() error { return s.file.Close() }

func isPermissionErr(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)
}

// classifySendError maps a sendto error to an ErrorKind.
func classifySendError(err error) ErrorKind {
	switch {
	case errors.Is(err, unix.EHOSTUNREACH), errors.Is(err, unix.ENETUNREACH),
		errors.Is(err, unix.EHOSTDOWN), errors.Is(err, unix.ENETDOWN):
		return KindUnreachable
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return KindPermission
	case errors.Is(err, os.ErrClosed):
		return KindClosed
	case errors.Is(err, unix.EMSGSIZE):
		return KindPacketTooBig // larger than the outgoing interface's MTU
	}
	return KindSend
}
