/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestObjectName(t *testing.T) {
	n := ObjectName("shop", "agent-a", "Pod", "shop", "agent-b", "10.0.0.2")
	require.True(t, strings.HasPrefix(n, "agent-a.agent-b-"), n)
	require.Equal(t, n, ObjectName("shop", "agent-a", "Pod", "shop", "agent-b", "10.0.0.2"), "deterministic")
	require.NotEqual(t, n, ObjectName("shop", "agent-a", "Pod", "other", "agent-b", "10.0.0.2"))
	require.True(t, strings.HasPrefix(ObjectName("shop", "agent-a", "Pod", "other", "agent-b", ""), "agent-a.other.agent-b-"))
	require.True(t, strings.HasPrefix(ObjectName("ns", "a", "Node", "", "node-1", ""), "a.node.node-1-"))
	require.True(t, strings.HasPrefix(ObjectName("ns", "a", "External", "", "", "2001:db8::1"), "a.ext.2001-db8--1-"))

	long := strings.Repeat("x", 250)
	for _, name := range []string{
		ObjectName("ns", long, "Pod", "ns", long, ""),
		ObjectName("ns", "A_B", "External", "", "", "[::1]:53"),
		ObjectName("ns", "-", "External", "", "", "..."),
	} {
		require.LessOrEqual(t, len(name), maxNameLen)
		require.Empty(t, validation.IsDNS1123Subdomain(name), name)
	}
	require.NotEqual(t, ObjectName("ns", long+"1", "Pod", "ns", "b", ""), ObjectName("ns", long+"2", "Pod", "ns", "b", ""), "truncation keeps names unique")

	// Each configured external target is its own object: two URLs on one host:port, two
	// ports; an address-only target keeps the name it had before ports and endpoints.
	healthz := ExternalObjectName("ns", "a", "External", "", "", "192.0.2.1", 443, "https://192.0.2.1/healthz")
	fail := ExternalObjectName("ns", "a", "External", "", "", "192.0.2.1", 443, "https://192.0.2.1/fail")
	other := ExternalObjectName("ns", "a", "External", "", "", "192.0.2.1", 8443, "")
	require.NotEqual(t, healthz, fail)
	require.NotEqual(t, healthz, other)
	require.Equal(t, ObjectName("ns", "a", "External", "", "", "192.0.2.1"), ExternalObjectName("ns", "a", "External", "", "", "192.0.2.1", 0, ""))
	require.True(t, strings.HasPrefix(healthz, "a.ext.192.0.2.1-"), healthz)
}

func TestZoneObjectName(t *testing.T) {
	assert.Equal(t, "eu-west-1a.eu-west-1b", ZoneObjectName("eu-west-1a", "eu-west-1b"))
	for _, zs := range [][2]string{{"Zone_A", "b"}, {"a.b", "c"}, {"a", "b.c"}} {
		n := ZoneObjectName(zs[0], zs[1])
		assert.Regexp(t, `^zones-[0-9a-f]{20}$`, n, zs)
	}
	assert.NotEqual(t, ZoneObjectName("a.b", "c"), ZoneObjectName("a", "b.c"))
}
