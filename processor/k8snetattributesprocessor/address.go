// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor // import "github.com/netpulse/netpulse/processor/k8snetattributesprocessor"

import (
	"net/netip"
	"strings"
)

// parseAddress extracts the IP from an attribute value: a bare IPv4 or IPv6 address
// (with or without a zone), "ipv4:port", "[ipv6]" or "[ipv6]:port". Anything else - a
// hostname, a URL, garbage - is not an IP and is left alone (hostnames are never
// resolved).
func parseAddress(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !isPort(rest[1:])) {
			return netip.Addr{}, false
		}
		// Brackets are for IPv6; a bracketed IPv4 address is accepted too.
		a, err := netip.ParseAddr(s[1:end])
		return a, err == nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a, true
	}
	// "ipv4:port": exactly one colon (an IPv6 address without brackets has several and
	// parsed above, or is not an address).
	if i := strings.IndexByte(s, ':'); i > 0 && strings.IndexByte(s[i+1:], ':') < 0 && isPort(s[i+1:]) {
		if a, err := netip.ParseAddr(s[:i]); err == nil && a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func isPort(s string) bool {
	if len(s) == 0 || len(s) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}
