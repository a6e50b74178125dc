// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package netnstest

import (
	"os/exec"
	"strings"
	"testing"
)

// MTU path addresses: the source's, and the target's behind the router.
const (
	MTUPathSource4 = "10.98.1.1"
	MTUPathSource6 = "fd00:98:1::1"
	MTUPathTarget4 = "10.98.2.1"
	MTUPathTarget6 = "fd00:98:2::1"
	// MTUPathLinkMTU is the MTU of the router's link to the target; the source's is 1500.
	MTUPathLinkMTU = 1400
)

// MTUPath builds source -- router -- target for path-MTU tests and returns the source's
// namespace (ping_group_range open). The source's link has MTU 1500, the router's link to
// the target MTUPathLinkMTU. blackHole drops the router's fragmentation-needed and
// packet-too-big messages, as a misconfigured overlay or firewall does: full-size
// don't-fragment packets then vanish without a trace. IPv6 forwarding works once the
// link-local addresses pass duplicate address detection (~2 s): wait for small echoes.
func MTUPath(t testing.TB, blackHole bool) *NS {
	t.Helper()
	src := New(t, WithSysctl("net.ipv4.ping_group_range", "0 2147483647"))
	router := New(t,
		WithSysctl("net.ipv4.ip_forward", "1"),
		WithSysctl("net.ipv4.icmp_ratelimit", "0"),
		WithSysctl("net.ipv6.icmp.ratelimit", "0"))
	dst := New(t)
	run := func(ns *NS, name string, args ...string) {
		t.Helper()
		err := ns.Do(func() error {
			out, err := exec.Command(name, args...).CombinedOutput()
			if err != nil {
				t.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
			}
			return nil
		})
		if err != nil || t.Failed() {
			t.FailNow()
		}
	}
	run(src, "ip", "link", "add", "veth-s", "type", "veth", "peer", "name", "veth-rs", "netns", router.Path())
	run(router, "ip", "link", "add", "veth-rd", "mtu", "1400", "type", "veth", "peer", "name", "veth-d", "netns", dst.Path())
	run(dst, "ip", "link", "set", "veth-d", "mtu", "1400")
	for _, c := range [][]string{
		{"addr", "add", MTUPathSource4 + "/24", "dev", "veth-s"}, {"-6", "addr", "add", MTUPathSource6 + "/64", "dev", "veth-s", "nodad"},
		{"link", "set", "veth-s", "up"},
		{"route", "add", "default", "via", "10.98.1.2"}, {"-6", "route", "add", "default", "via", "fd00:98:1::2"},
	} {
		run(src, "ip", c...)
	}
	for _, c := range [][]string{
		{"addr", "add", "10.98.1.2/24", "dev", "veth-rs"}, {"-6", "addr", "add", "fd00:98:1::2/64", "dev", "veth-rs", "nodad"},
		{"addr", "add", "10.98.2.2/24", "dev", "veth-rd"}, {"-6", "addr", "add", "fd00:98:2::2/64", "dev", "veth-rd", "nodad"},
		{"link", "set", "veth-rs", "up"}, {"link", "set", "veth-rd", "up"},
	} {
		run(router, "ip", c...)
	}
	// Forwarding after the links exist, so that it covers them.
	if err := router.SetSysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"addr", "add", MTUPathTarget4 + "/24", "dev", "veth-d"}, {"-6", "addr", "add", MTUPathTarget6 + "/64", "dev", "veth-d", "nodad"},
		{"link", "set", "veth-d", "up"},
		{"route", "add", "default", "via", "10.98.2.2"}, {"-6", "route", "add", "default", "via", "fd00:98:2::2"},
	} {
		run(dst, "ip", c...)
	}
	if blackHole {
		run(router, "nft", "add table inet pmtu; add chain inet pmtu out { type filter hook output priority 0; };"+
			" add rule inet pmtu out icmp type destination-unreachable icmp code frag-needed drop;"+
			" add rule inet pmtu out icmpv6 type packet-too-big drop")
	}
	return src
}
