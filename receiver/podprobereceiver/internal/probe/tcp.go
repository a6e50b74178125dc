// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// TCP connects to addr:port and closes the connection at once (a SYN / SYN-ACK / ACK / FIN
// exchange); the duration is the connect time.
func TCP(ctx context.Context, addr netip.AddrPort, timeout time.Duration) Result {
	return dialTCP(ctx, &net.Dialer{}, addr.String(), timeout)
}

// TCPHost connects to host:port by name. Every resolved address is vetted by policy before
// the connect, so a name cannot lead the probe to a refused address.
func TCPHost(ctx context.Context, host string, port uint16, timeout time.Duration, policy AddressPolicy) Result {
	return dialTCP(ctx, &net.Dialer{Control: vet(policy)}, net.JoinHostPort(host, strconv.Itoa(int(port))), timeout)
}

func dialTCP(ctx context.Context, d *net.Dialer, address string, timeout time.Duration) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := Result{Start: time.Now()}
	conn, err := d.DialContext(ctx, "tcp", address)
	r.Duration = time.Since(r.Start)
	if err != nil {
		fail(&r, Classify(err), err)
		return r
	}
	r.Phases = []Phase{{Name: "connect", Start: r.Start, Duration: r.Duration}}
	r.LocalAddr = localAddr(conn)
	_ = conn.Close()
	r.Success = true
	return r
}

// localAddr is the local IP of conn (unmapped), or the zero Addr.
func localAddr(conn net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(conn.LocalAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}
