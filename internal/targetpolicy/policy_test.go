// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package targetpolicy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPolicy(t *testing.T) {
	strict := Policy{}
	refused := []string{
		"169.254.169.254", "::ffff:169.254.169.254", "::ffff:a9fe:a9fe", "fe80::1", "fd00:ec2::254",
		"64:ff9b::a9fe:a9fe", "127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::",
		"224.0.0.1", "ff02::1", "255.255.255.255",
	}
	for _, s := range refused {
		require.Errorf(t, strict.Check(netip.MustParseAddr(s)), "%s should be refused", s)
	}
	for _, s := range []string{"10.244.1.7", "192.0.2.1", "2001:db8::1", "fd00::7"} {
		require.NoErrorf(t, strict.Check(netip.MustParseAddr(s)), "%s should be allowed", s)
	}
	loose := Policy{AllowLoopback: true, AllowLinkLocal: true}
	for _, s := range []string{"169.254.169.254", "fe80::1", "127.0.0.1", "::1", "fd00:ec2::254"} {
		require.NoErrorf(t, loose.Check(netip.MustParseAddr(s)), "%s should be allowed when opted in", s)
	}
	for _, s := range []string{"0.0.0.0", "224.0.0.1"} {
		require.Errorf(t, loose.Check(netip.MustParseAddr(s)), "%s is never a host", s)
	}
	require.ErrorContains(t, strict.Check(netip.MustParseAddr("::ffff:169.254.169.254")), "169.254.169.254")
	require.Error(t, strict.Check(netip.Addr{}))
}

// The gaps of issue #28 item 11: metadata services off link-local, and the NAT64 forms of
// link-local, loopback and metadata addresses.
func TestPolicyRefusesMetadataAndNAT64Forms(t *testing.T) {
	strict := Policy{}
	for _, s := range []string{
		// metadata services that are not link-local
		"100.100.100.200", "168.63.129.16", "fd00:ec2::254", "::ffff:100.100.100.200",
		// the well-known NAT64 prefix 64:ff9b::/96
		"64:ff9b::a9fe:aa02", // 169.254.170.2 (ECS task metadata)
		"64:ff9b::a9fe:a9fe", // 169.254.169.254
		"64:ff9b::7f00:1",    // 127.0.0.1
		"64:ff9b::6464:64c8", // 100.100.100.200
		"64:ff9b::a83f:8110", // 168.63.129.16
		// the local-use NAT64 prefix 64:ff9b:1::/48, at each RFC 6052 prefix length
		"64:ff9b:1::a9fe:a9fe",       // /96: 169.254.169.254
		"64:ff9b:1::7f00:1",          // /96: 127.0.0.1
		"64:ff9b:1:0:a9:fea9:fe00:0", // /64: 169.254.169.254
		"64:ff9b:1:a9:fe:a9fe::",     // /56: 169.254.169.254
		"64:ff9b:1:a9fe:a9:fe00::",   // /48: 169.254.169.254
		"64:ff9b:1:7f00:0:100::",     // /48: 127.0.0.1
		"64:ff9b:1:0:64:6464:c800:0", // /64: 100.100.100.200
	} {
		err := strict.Check(netip.MustParseAddr(s))
		require.Errorf(t, err, "%s should be refused", s)
	}
	require.ErrorContains(t, strict.Check(netip.MustParseAddr("64:ff9b::a9fe:aa02")), "169.254.170.2")
	// NAT64 forms of ordinary addresses are ordinary targets.
	for _, s := range []string{"64:ff9b::c000:201", "64:ff9b::808:808", "64:ff9b:1::c000:201", "64:ff9b:2::a9fe:a9fe"} {
		require.NoErrorf(t, strict.Check(netip.MustParseAddr(s)), "%s should be allowed", s)
	}
	// The opt-ins cover the NAT64 forms as they cover the addresses.
	loose := Policy{AllowLoopback: true, AllowLinkLocal: true}
	for _, s := range []string{"64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "168.63.129.16", "100.100.100.200", "64:ff9b:1::a9fe:a9fe"} {
		require.NoErrorf(t, loose.Check(netip.MustParseAddr(s)), "%s should be allowed when opted in", s)
	}
}
