// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewserver

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The Host allow-list is the defence against DNS rebinding: a page on attacker.example
// whose name the attacker re-points at 127.0.0.1 (or at the pod's address) becomes
// same-origin with this server in the browser, and could read the JSON API, but its
// requests still carry "Host: attacker.example". The server answers only to:
//
//   - an IP literal (a browser sends one only when the page itself was loaded from that
//     address: no name was rebound);
//   - localhost (browsers resolve it to loopback themselves);
//   - the names in the allow-list (exact, case-insensitive; "*.example.com" matches any
//     name under example.com, not example.com itself).
//
// Anything else gets 421 Misdirected Request and nothing else.

// ValidateAllowedHosts reports the first entry that is not a DNS name or a "*."
// wildcard of one (ports are not part of an entry: any port matches).
func ValidateAllowedHosts(hosts []string) error {
	for i, h := range hosts {
		name := strings.TrimPrefix(h, "*.")
		if msgs := validation.IsDNS1123Subdomain(strings.ToLower(name)); len(msgs) > 0 {
			return fmt.Errorf("%d: %q: want a host name or *.domain (no port, no scheme): %s", i, h, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// HostAllowed reports whether a request's Host header (host or host:port) names this
// server: an IP literal, localhost, or a name in allowed.
func HostAllowed(hostHeader string, allowed []string) bool {
	host := hostHeader
	if h, _, err := net.SplitHostPort(hostHeader); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && a.Zone() == "" {
		return true
	}
	if host == "localhost" {
		return true
	}
	for _, e := range allowed {
		e = strings.TrimSuffix(strings.ToLower(e), ".")
		if suffix, wild := strings.CutPrefix(e, "*."); wild {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
			continue
		}
		if host == e {
			return true
		}
	}
	return false
}
