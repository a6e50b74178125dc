// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/targetpolicy"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/probe"
)

// Result is one run of a check.
type Result struct {
	Assignment
	Start   time.Time
	Success bool
	// Reason is a checkstatus.Reason* log-entry reason.
	Reason  string
	Message string
	Latency time.Duration
	// Address and Port are what was probed (Address invalid when nothing was: a failed
	// lookup, a refused target); Local is the address the probe left from.
	Address netip.Addr
	Port    int
	Local   netip.Addr
}

// Resolver looks up a host name; net.DefaultResolver in production.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Run runs a once. No packet is sent to an address the policy refuses: the run fails with
// reason TargetRefused.
func Run(ctx context.Context, a Assignment, policy targetpolicy.Policy, resolver Resolver) Result {
	r := Result{Assignment: a, Start: time.Now()}
	switch a.Probe {
	case contract.ProbeTypeTCP:
		runTCP(ctx, &r, policy, resolver)
	case contract.ProbeTypeHTTP:
		runHTTP(ctx, &r, policy)
	case contract.ProbeTypeICMP:
		runICMP(ctx, &r, policy)
	default:
		r.Reason, r.Message = checkstatus.ReasonTCPConnectError, fmt.Sprintf("probe %q not supported", a.Probe)
	}
	return r
}

func refused(r *Result, addr netip.Addr, err error) {
	r.Reason = checkstatus.ReasonTargetRefused
	r.Message = fmt.Sprintf("refused by target policy, nothing sent to %s: %v", addr, err)
}

// runTCP: OpenShift's check: a DNS lookup when the host is a name, then a TCP connect.
func runTCP(ctx context.Context, r *Result, policy targetpolicy.Policy, resolver Resolver) {
	host, portText, _ := net.SplitHostPort(r.Endpoint)
	port, _ := strconv.Atoi(portText)
	r.Port = port
	addr, err := netip.ParseAddr(host)
	if err != nil {
		lctx, cancel := context.WithTimeout(ctx, r.Timeout)
		addrs, lerr := resolver.LookupNetIP(lctx, "ip", host)
		cancel()
		if lerr != nil || len(addrs) == 0 {
			if lerr == nil {
				lerr = errors.New("no addresses")
			}
			r.Latency = time.Since(r.Start)
			r.Reason, r.Message = checkstatus.ReasonDNSError, fmt.Sprintf("failure looking up host %s: %v", host, lerr)
			return
		}
		addr = addrs[0]
	}
	addr = addr.Unmap()
	r.Address = addr
	if err := policy.Check(addr); err != nil {
		refused(r, addr, err)
		return
	}
	ap := netip.AddrPortFrom(addr, uint16(port))
	res := probe.TCP(ctx, ap, r.Timeout)
	r.Latency, r.Local = res.Duration, res.LocalAddr
	if res.Success {
		r.Success = true
		r.Reason, r.Message = checkstatus.ReasonTCPConnect, fmt.Sprintf("tcp connection to %s succeeded", endpointText(host, ap))
		return
	}
	r.Reason = checkstatus.ReasonTCPConnectError
	r.Message = fmt.Sprintf("failed to establish a TCP connection to %s: %s", endpointText(host, ap), res.Message)
}

func endpointText(host string, ap netip.AddrPort) string {
	if host != ap.Addr().String() {
		return net.JoinHostPort(host, strconv.Itoa(int(ap.Port()))) + " (" + ap.String() + ")"
	}
	return ap.String()
}

func runHTTP(ctx context.Context, r *Result, policy targetpolicy.Policy) {
	u, _ := url.Parse(r.Endpoint)
	r.Port = portOf(u)
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		r.Address = a.Unmap()
		if err := policy.Check(r.Address); err != nil {
			refused(r, r.Address, err)
			return
		}
	}
	res := probe.HTTP(ctx, r.Endpoint, probe.HTTPOptions{Timeout: r.Timeout, Policy: policy.Check, UserAgent: "netpulse-check"})
	r.Latency, r.Local = res.Duration, res.LocalAddr
	if res.Success {
		r.Success = true
		r.Reason, r.Message = checkstatus.ReasonHTTPRequest, fmt.Sprintf("GET %s returned %d", u.Redacted(), res.HTTPStatus)
		return
	}
	switch {
	case strings.Contains(res.Message, "refused by target policy"):
		r.Reason = checkstatus.ReasonTargetRefused
	case res.ErrorType == contract.ErrorTypeDNS:
		r.Reason = checkstatus.ReasonDNSError
	case res.HTTPStatus == 0 && (res.ErrorType == contract.ErrorTypeRefused || res.ErrorType == contract.ErrorTypeUnreachable ||
		(res.ErrorType == contract.ErrorTypeTimeout && !hasPhase(res, "connect"))):
		r.Reason = checkstatus.ReasonTCPConnectError
	default:
		r.Reason = checkstatus.ReasonHTTPError
	}
	r.Message = fmt.Sprintf("GET %s failed: %s", u.Redacted(), res.Message)
}

func hasPhase(res probe.Result, name string) bool {
	for _, p := range res.Phases {
		if p.Name == name {
			return true
		}
	}
	return false
}

func portOf(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// runICMP sends one echo from an unprivileged ICMP datagram socket of its own (checks are
// rare: one socket per run costs nothing and needs no shared engine).
func runICMP(ctx context.Context, r *Result, policy targetpolicy.Policy) {
	addr, _ := netip.ParseAddr(r.Endpoint)
	addr = addr.Unmap()
	r.Address = addr
	if err := policy.Check(addr); err != nil {
		refused(r, addr, err)
		return
	}
	network, listen, proto := "udp4", "0.0.0.0", 1
	var typ icmp.Type = ipv4.ICMPTypeEcho
	if addr.Is6() {
		network, listen, proto, typ = "udp6", "::", 58, ipv6.ICMPTypeEchoRequest
	}
	fail := func(err error) {
		r.Latency = time.Since(r.Start)
		r.Reason, r.Message = checkstatus.ReasonICMPError, fmt.Sprintf("icmp echo to %s failed: %v", addr, err)
	}
	conn, err := icmp.ListenPacket(network, listen)
	if err != nil {
		fail(err)
		return
	}
	defer conn.Close()
	deadline := time.Now().Add(r.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	seq := int(time.Now().UnixNano() & 0x7fff)
	msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: seq, Data: []byte("netpulse-check")}}
	wire, err := msg.Marshal(nil)
	if err != nil {
		fail(err)
		return
	}
	start := time.Now()
	if _, err := conn.WriteTo(wire, &net.UDPAddr{IP: addr.AsSlice(), Zone: addr.Zone()}); err != nil {
		fail(err)
		return
	}
	buf := make([]byte, 1500)
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			fail(fmt.Errorf("no reply within %s", r.Timeout))
			return
		}
		reply, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil {
			continue
		}
		if echo, ok := reply.Body.(*icmp.Echo); ok && echo.Seq == seq &&
			(reply.Type == ipv4.ICMPTypeEchoReply || reply.Type == ipv6.ICMPTypeEchoReply) {
			r.Latency = time.Since(start)
			r.Success = true
			if la, ok := conn.LocalAddr().(*net.UDPAddr); ok {
				r.Local, _ = netip.AddrFromSlice(la.IP)
				r.Local = r.Local.Unmap()
			}
			r.Reason, r.Message = checkstatus.ReasonICMPEcho, fmt.Sprintf("icmp echo to %s answered", addr)
			return
		}
	}
}
