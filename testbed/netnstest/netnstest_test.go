// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package netnstest_test

import (
	"net"
	"testing"

	"github.com/netpulse/netpulse/testbed/netnstest"
)

func TestNamespaceIsolation(t *testing.T) {
	ns := netnstest.New(t, netnstest.WithSysctl("net.ipv4.ping_group_range", "0 2147483647"))

	outside, err := netnstest.Sysctl("net.ipv4.ping_group_range")
	if err != nil {
		t.Fatal(err)
	}
	var inside string
	ns.Run(t, func() {
		var err error
		if inside, err = netnstest.Sysctl("net.ipv4.ping_group_range"); err != nil {
			t.Fatal(err)
		}
		ifi, err := net.InterfaceByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		if ifi.Flags&net.FlagUp == 0 {
			t.Fatalf("lo is not up inside the namespace: %v", ifi.Flags)
		}
	})
	if inside != "0\t2147483647" {
		t.Fatalf("sysctl inside the namespace = %q, want %q", inside, "0\t2147483647")
	}
	after, err := netnstest.Sysctl("net.ipv4.ping_group_range")
	if err != nil {
		t.Fatal(err)
	}
	if after != outside {
		t.Fatalf("sysctl outside changed: before %q after %q", outside, after)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if err := ns.Do(func() error { return nil }); err == nil {
		t.Fatal("Do on a closed namespace succeeded")
	}
}
