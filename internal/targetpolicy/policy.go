// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package targetpolicy vets every address before a probe may touch it: pod_probe applies it
// to each target it plans and each declared check it runs, and pod_network_health to the
// targets of declared checks before it places them.
//
// Refused unless opted in (allow_loopback, allow_link_local):
//
//   - loopback: 127.0.0.0/8, ::1;
//   - link-local: 169.254.0.0/16, fe80::/10 (where cloud metadata services live);
//   - cloud metadata services that are not link-local: fd00:ec2::254 (AWS IMDS over IPv6),
//     100.100.100.200 (Alibaba Cloud), 168.63.129.16 (Azure WireServer and IMDS proxy);
//   - the NAT64 forms of all of the above (RFC 6052): an IPv4 address embedded in the
//     well-known prefix 64:ff9b::/96 (64:ff9b::a9fe:a9fe is 169.254.169.254,
//     64:ff9b::7f00:1 is 127.0.0.1) or in the local-use prefix 64:ff9b:1::/48 (RFC 8215),
//     where the IPv4 address is read at every position RFC 6052 allows for a prefix of
//     /48, /56, /64 and /96 and the address is refused when any reading is;
//   - IPv4-mapped forms (::ffff:169.254.169.254) are the IPv4 address itself.
//
// Always refused (never a single host): unspecified, multicast, 255.255.255.255.
package targetpolicy

import (
	"fmt"
	"net/netip"
)

// Policy decides which addresses probes may reach. Targets are not free-form: loopback and
// link-local addresses (where cloud metadata services live) and the metadata services'
// other addresses are refused unless explicitly allowed, and addresses that cannot be a
// single host are always refused.
type Policy struct {
	AllowLoopback  bool
	AllowLinkLocal bool
}

// metadataAddrs are the well-known metadata endpoints that are not link-local; they are
// refused with link-local addresses (allow_link_local opts in to both).
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS, IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud metadata
	netip.MustParseAddr("168.63.129.16"),   // Azure WireServer / IMDS proxy
}

// NAT64 prefixes (RFC 6052 well-known, RFC 8215 local-use).
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48")
)

// Check returns nil when a may be probed, else an error saying why not.
func (p Policy) Check(a netip.Addr) error {
	if !a.IsValid() {
		return fmt.Errorf("invalid address")
	}
	a = a.Unmap() // ::ffff:169.254.169.254 is 169.254.169.254
	if err := p.check(a); err != nil {
		return err
	}
	for _, v4 := range nat64Embedded(a) {
		if err := p.checkSensitive(v4); err != nil {
			return fmt.Errorf("NAT64 address %s embeds %s: %w", a, v4, err)
		}
	}
	return nil
}

// check applies the policy to one address (no NAT64 reading).
func (p Policy) check(a netip.Addr) error {
	switch {
	case a.IsUnspecified():
		return fmt.Errorf("unspecified address %s refused", a)
	case a.IsMulticast():
		return fmt.Errorf("multicast address %s refused", a)
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("broadcast address %s refused", a)
	}
	return p.checkSensitive(a)
}

// checkSensitive refuses what the opt-ins guard: loopback, link-local and metadata
// addresses. NAT64 readings get only this check: a translator does not forward an
// unspecified or multicast IPv4 destination, and the local-use prefix's several readings
// of one address would otherwise refuse ordinary targets.
func (p Policy) checkSensitive(a netip.Addr) error {
	switch {
	case a.IsLoopback() && !p.AllowLoopback:
		return fmt.Errorf("loopback address %s refused (set allow_loopback to probe it)", a)
	case (a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast()) && !p.AllowLinkLocal:
		return fmt.Errorf("link-local address %s refused: it hosts cloud metadata services (set allow_link_local to probe it)", a)
	}
	for _, m := range metadataAddrs {
		if a == m && !p.AllowLinkLocal {
			return fmt.Errorf("metadata service address %s refused (set allow_link_local to probe it)", a)
		}
	}
	return nil
}

// nat64Embedded returns the IPv4 addresses a NAT64 translator could make of a (RFC 6052
// section 2.2): the last 32 bits under the well-known /96; under the local-use /48, one
// reading per prefix length it may be configured with (/48, /56, /64, /96), bits 64-71
// (the "u" octet) skipped.
func nat64Embedded(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	switch {
	case nat64WellKnown.Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})}
	case nat64LocalUse.Contains(a):
		return []netip.Addr{
			netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}),    // /48
			netip.AddrFrom4([4]byte{b[7], b[9], b[10], b[11]}),   // /56
			netip.AddrFrom4([4]byte{b[9], b[10], b[11], b[12]}),  // /64
			netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), // /96
		}
	}
	return nil
}
