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
