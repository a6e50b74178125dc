// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseAddress(t *testing.T) {
	ok := map[string]string{
		"10.0.0.1":                "10.0.0.1",
		"10.0.0.1:80":             "10.0.0.1",
		"10.0.0.1:65535":          "10.0.0.1",
		"fd00::1":                 "fd00::1",
		"[fd00::1]":               "fd00::1",
		"[fd00::1]:53":            "fd00::1",
		"fe80::1%eth0":            "fe80::1%eth0",
		"[fe80::1%eth0]:8080":     "fe80::1%eth0",
		"::ffff:10.0.0.1":         "::ffff:10.0.0.1",
		"[::ffff:10.0.0.1]:443":   "::ffff:10.0.0.1",
		"[10.0.0.1]:80":           "10.0.0.1",
		"2001:db8:0:0:0:0:0:1":    "2001:db8::1",
		"fd00:10:0:0:0:0:0:1:53":  "", // 9 groups: not an address (IPv6 with a port needs brackets)
		"10.0.0.1:":               "",
		"10.0.0.1:http":           "",
		"10.0.0.1:65536":          "",
		"10.0.0.1:123456":         "",
		"[fd00::1":                "",
		"[fd00::1]53":             "",
		"[fd00::1]:":              "",
		"[not-an-ip]:80":          "",
		"cart.shop.svc":           "",
		"cart.shop.svc:8080":      "",
		"http://10.0.0.1:80/path": "",
		"":                        "",
		" 10.0.0.1":               "",
		"10.0.0.256":              "",
	}
	for in, want := range ok {
		got, parsed := parseAddress(in)
		if want == "" {
			assert.False(t, parsed, "%q parsed as %v", in, got)
			continue
		}
		if assert.True(t, parsed, "%q", in) {
			assert.Equal(t, netip.MustParseAddr(want), got, "%q", in)
		}
	}
}
