// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package identity

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

var agent = Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-a", PodUID: "uid-a", NodeName: "node-a", Role: RoleAgent}

func own(id Identity) Source {
	return Source{Namespace: id.Namespace, PodName: id.PodName, PodUID: id.PodUID, NodeName: id.NodeName}
}

func TestAccountsDecideTheRole(t *testing.T) {
	a := NewAccounts([]string{"netpulse/netpulse-agent", "shop/web"}, []string{"netpulse/netpulse-agent"})
	assert.Equal(t, RoleAgent, a.RoleOf("netpulse", "netpulse-agent"))
	assert.Equal(t, RoleSidecar, a.RoleOf("shop", "web"), "any other allowed account is a sidecar")
	assert.Equal(t, RoleNone, a.RoleOf("shop", "db"))
	assert.Equal(t, RoleNone, a.RoleOf("netpulse", "default"))
	// An agent account is allowed even when the allowed list omits it.
	assert.Equal(t, RoleAgent, NewAccounts(nil, []string{"netpulse/netpulse-agent"}).RoleOf("netpulse", "netpulse-agent"))
}

func TestMatch(t *testing.T) {
	sidecar := Identity{Namespace: "shop", ServiceAccount: "web", PodName: "web-0", PodUID: "uid-w", NodeName: "node-a", Role: RoleSidecar}
	for name, info := range map[string]client.Info{
		"auth":     {Auth: NewAuthData(agent)},
		"metadata": {Metadata: WithIdentity(client.Metadata{}, agent)},
	} {
		b := Match(info, own(agent))
		_, ok := b.Agent()
		assert.True(t, ok, name)
		assert.Equal(t, RoleAgent, b.Role, name)
		// A claim without a UID names the pod by name (the token binds the current pod).
		noUID := own(agent)
		noUID.PodUID = ""
		_, ok = Match(info, noUID).Agent()
		assert.True(t, ok, name)
	}
	for name, src := range map[string]Source{
		"another pod":     {Namespace: "netpulse", PodName: "agent-b", PodUID: "uid-b", NodeName: "node-b"},
		"same node":       {Namespace: "netpulse", PodName: "victim", PodUID: "uid-v", NodeName: "node-a"},
		"another UID":     {Namespace: "netpulse", PodName: "agent-a", PodUID: "uid-old", NodeName: "node-a"},
		"another node":    {Namespace: "netpulse", PodName: "agent-a", PodUID: "uid-a", NodeName: "node-b"},
		"no node":         {Namespace: "netpulse", PodName: "agent-a", PodUID: "uid-a"},
		"other namespace": {Namespace: "kube-system", PodName: "agent-a", PodUID: "uid-a", NodeName: "node-a"},
	} {
		b := Match(client.Info{Auth: NewAuthData(agent)}, src)
		refusal, ok := b.Own()
		assert.False(t, ok, name)
		assert.Equal(t, RefusedMismatch, refusal, name)
		assert.Equal(t, RoleNone, b.Role, "%s: a refused claim has no role", name)
	}
	b := Match(client.Info{}, own(agent))
	refusal, ok := b.Agent()
	assert.False(t, ok)
	assert.Equal(t, RefusedUnauthenticated, refusal)

	// A sidecar's own claim is its own, and not an agent's.
	b = Match(client.Info{Auth: NewAuthData(sidecar)}, own(sidecar))
	_, ok = b.Own()
	assert.True(t, ok)
	refusal, ok = b.Agent()
	assert.False(t, ok)
	assert.Equal(t, RefusedNotAgent, refusal)
}

// An identity without a role is no identity: neither through Auth nor through the
// metadata keys (which a batch processor keeps only when all are listed).
func TestRoleIsPartOfTheIdentity(t *testing.T) {
	noRole := agent
	noRole.Role = ""
	_, _, ok := FromClientInfo(client.Info{Auth: NewAuthData(noRole)})
	assert.False(t, ok)
	md := WithIdentity(client.Metadata{}, agent)
	assert.Equal(t, []string{"agent"}, md.Get(MetadataRole))
	m := map[string][]string{}
	for k := range md.Keys() {
		if k != MetadataRole {
			m[k] = md.Get(k)
		}
	}
	_, _, ok = FromClientInfo(client.Info{Metadata: client.NewMetadata(m)})
	assert.False(t, ok, "without the role key")
	m[MetadataRole] = []string{"admin"}
	_, _, ok = FromClientInfo(client.Info{Metadata: client.NewMetadata(m)})
	assert.False(t, ok, "an unknown role")
	m[MetadataRole] = []string{"sidecar"}
	id, via, ok := FromClientInfo(client.Info{Metadata: client.NewMetadata(m)})
	require.True(t, ok)
	assert.Equal(t, ViaMetadata, via)
	assert.Equal(t, RoleSidecar, id.Role)
	assert.Contains(t, MetadataKeys, MetadataRole)
	assert.Equal(t, "agent", NewAuthData(agent).GetAttribute(AttrRole))
}

// A relay (the gateway's own account) vouches per Resource for the agent whose data it
// forwards; nothing else is believed from it, and nobody else is believed about relayed
// attributes.
func TestMatchResourceBelievesARelayPerResource(t *testing.T) {
	a := NewAccounts([]string{"netpulse/netpulse-agent", "netpulse/netpulse-gateway"}, []string{"netpulse/netpulse-agent"}).
		WithRelays([]string{"netpulse/netpulse-gateway"})
	require.Equal(t, RoleRelay, a.RoleOf("netpulse", "netpulse-gateway"))
	require.Equal(t, RoleAgent, a.RoleOf("netpulse", "netpulse-agent"))
	relay := Identity{Namespace: "netpulse", ServiceAccount: "netpulse-gateway", PodName: "gw-0", PodUID: "uid-g", NodeName: "node-g", Role: RoleRelay}
	other := Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-b", PodUID: "uid-b", NodeName: "node-b", Role: RoleAgent}
	for name, info := range map[string]client.Info{
		"auth":     {Auth: NewAuthData(relay)},
		"metadata": {Metadata: WithIdentity(client.Metadata{}, relay)}, // after a batch processor
	} {
		attrs := pcommon.NewMap()
		b := MatchResource(info, own(agent), attrs)
		assert.Equal(t, RefusedUnauthenticated, b.Refused, "%s: a relay without a relayed identity", name)

		SetRelayed(attrs, agent)
		b = MatchResource(info, own(agent), attrs)
		_, ok := b.Agent()
		assert.True(t, ok, name)
		assert.Equal(t, ViaRelay, b.Via, name)
		assert.Equal(t, agent, b.Identity, name)
		assert.Equal(t, RefusedMismatch, MatchResource(info, own(other), attrs).Refused, "%s: another pod than the relayed one", name)

		// A relay vouches for no relay, nor for an incomplete identity.
		SetRelayed(attrs, relay)
		assert.Equal(t, RefusedUnauthenticated, MatchResource(info, own(relay), attrs).Refused, name)
		attrs.Remove(RelayedPodUID)
		assert.Equal(t, RefusedUnauthenticated, MatchResource(info, own(relay), attrs).Refused, name)

		// Its own claims are no agent's work.
		_, ok = Match(info, own(relay)).Agent()
		assert.False(t, ok, name)
	}
	// An agent's relayed attributes count for nothing: it is matched as itself.
	attrs := pcommon.NewMap()
	SetRelayed(attrs, other)
	info := client.Info{Auth: NewAuthData(agent)}
	assert.Equal(t, RefusedMismatch, MatchResource(info, own(other), attrs).Refused)
	_, ok := MatchResource(info, own(agent), attrs).Agent()
	assert.True(t, ok)
	// SetRelayed replaces what the attributes carried; StripRelayed removes it all.
	SetRelayed(attrs, agent)
	got, ok := RelayedOf(attrs)
	require.True(t, ok)
	assert.Equal(t, agent, got)
	StripRelayed(attrs)
	assert.Zero(t, attrs.Len())
}
