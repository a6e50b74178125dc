// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package targetpolicy vets every address before a probe may touch it: pod_probe applies it
// to each target it plans and each declared check it runs, and pod_network_health to the
// targets of declared checks before it places them.
package targetpolicy

import (
	"fmt"
	"net/netip"
)

// Policy decides which addresses probes may reach. Targets are not free-form: loopback and
// link-local addresses (where cloud metadata services live) are refused unless explicitly
// allowed, and addresses that cannot be a single host are always refused.
type Policy struct {
	AllowLoopback  bool
	AllowLinkLocal bool
}

// Well-known metadata endpoints that are not link-local: AWS's IPv6 IMDS, and the IPv4
// metadata address embedded in the NAT64 well-known prefix.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("64:ff9b::a9fe:a9fe"),
}

// Check returns nil when a may be probed, else an error saying why not.
func (p Policy) Check(a netip.Addr) error {
	if !a.IsValid() {
		return fmt.Errorf("invalid address")
	}
	a = a.Unmap() // ::ffff:169.254.169.254 is 169.254.169.254
	switch {
	case a.IsUnspecified():
		return fmt.Errorf("unspecified address %s refused", a)
	case a.IsMulticast():
		return fmt.Errorf("multicast address %s refused", a)
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("broadcast address %s refused", a)
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
