// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// echoResponder answers ICMP and ICMPv6 echo requests addressed to a namespace's
// addresses after a fixed delay, from raw sockets opened inside the namespace. The kernel's
// own echo replies are switched off (icmp_echo_ignore_all) while it runs, so every reply
// the namespace sends comes from here: this is how Delay works without tc netem.
type echoResponder struct {
	delay time.Duration
	// from, when set, are the only sources answered after delay; the others are answered
	// at once (DelayFrom: a slow link towards some peers only).
	from     map[netip.Addr]bool
	c4, c6   *icmp.PacketConn
	p4       *ipv4.PacketConn
	p6       *ipv6.PacketConn
	closed   atomic.Bool
	wg       sync.WaitGroup
	answered atomic.Int64
}

func startEchoResponder(netns string, delay time.Duration, from []netip.Addr) (*echoResponder, error) {
	r := &echoResponder{delay: delay}
	if from != nil {
		r.from = map[netip.Addr]bool{}
		for _, a := range from {
			r.from[a.Unmap()] = true
		}
	}
	err := inNetns(netns, func() error {
		var err error
		if r.c4, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0"); err != nil {
			return err
		}
		r.c6, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	})
	if err != nil {
		r.close()
		return nil, err
	}
	r.p4 = r.c4.IPv4PacketConn()
	r.p6 = r.c6.IPv6PacketConn()
	if err := r.p4.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err != nil {
		r.close()
		return nil, err
	}
	if err := r.p6.SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true); err != nil {
		r.close()
		return nil, err
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeEchoRequest)
	if err := r.p6.SetICMPFilter(&f); err != nil {
		r.close()
		return nil, err
	}
	r.wg.Add(2)
	go r.loop4()
	go r.loop6()
	return r, nil
}

func (r *echoResponder) loop4() {
	defer r.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, cm, src, err := r.p4.ReadFrom(buf)
		if err != nil {
			if r.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		msg, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || msg.Type != ipv4.ICMPTypeEcho {
			continue
		}
		echo, ok := msg.Body.(*icmp.Echo)
		if !ok {
			continue
		}
		reply := icmp.Message{Type: ipv4.ICMPTypeEchoReply, Body: &icmp.Echo{ID: echo.ID, Seq: echo.Seq, Data: append([]byte(nil), echo.Data...)}}
		b, err := reply.Marshal(nil) // computes the ICMPv4 checksum
		if err != nil {
			continue
		}
		var out *ipv4.ControlMessage
		if cm != nil && cm.Dst != nil {
			// Answer from the address that was asked, whichever of the node's it is.
			out = &ipv4.ControlMessage{Src: cm.Dst}
		}
		r.later(src, func() { _, _ = r.p4.WriteTo(b, out, src) })
	}
}

func (r *echoResponder) loop6() {
	defer r.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, cm, src, err := r.p6.ReadFrom(buf)
		if err != nil {
			if r.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		msg, err := icmp.ParseMessage(58, buf[:n])
		if err != nil || msg.Type != ipv6.ICMPTypeEchoRequest {
			continue
		}
		echo, ok := msg.Body.(*icmp.Echo)
		if !ok {
			continue
		}
		if cm != nil && cm.Dst != nil && cm.Dst.IsMulticast() {
			continue // answer unicast requests only
		}
		reply := icmp.Message{Type: ipv6.ICMPTypeEchoReply, Body: &icmp.Echo{ID: echo.ID, Seq: echo.Seq, Data: append([]byte(nil), echo.Data...)}}
		b, err := reply.Marshal(nil) // the kernel fills in the ICMPv6 checksum
		if err != nil {
			continue
		}
		var out *ipv6.ControlMessage
		if cm != nil && cm.Dst != nil {
			out = &ipv6.ControlMessage{Src: cm.Dst}
		}
		r.later(src, func() { _, _ = r.p6.WriteTo(b, out, src) })
	}
}

func (r *echoResponder) later(src net.Addr, send func()) {
	d := r.delay
	if r.from != nil {
		a, _ := src.(*net.IPAddr)
		if ip, ok := netip.AddrFromSlice(a.IP); a == nil || !ok || !r.from[ip.Unmap()] {
			d = 0
		}
	}
	time.AfterFunc(d, func() {
		if r.closed.Load() {
			return
		}
		send()
		r.answered.Add(1)
	})
}

// Answered counts the replies sent.
func (r *echoResponder) Answered() int64 { return r.answered.Load() }

func (r *echoResponder) close() {
	if r == nil {
		return
	}
	r.closed.Store(true)
	if r.c4 != nil {
		_ = r.c4.Close()
	}
	if r.c6 != nil {
		_ = r.c6.Close()
	}
	r.wg.Wait()
}
