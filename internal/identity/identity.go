// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package identity is the one place where netpulse decides who sent what: the
// authenticated identity of a pod as the k8s_token_auth extension establishes it (from a
// TokenReview of the pod's projected ServiceAccount token), its role, how it travels through
// a collector pipeline, and Match, the one function every component uses to decide whether
// a Resource's claimed source is the caller and in which role it may be believed.
//
// Roles (Accounts.RoleOf, decided by the extension from the token's service account):
//
//   - agent: the service account of the agents' DaemonSet. Only agents observe pairs:
//     their data points hold admission slots (k8s_net_attributes), count toward every
//     quorum (targets, node conditions, readiness) and get pair objects
//     (pod_network_health), and they report the declared checks placed on their node.
//   - sidecar: any other allowed service account (a workload's, whose pods run the netpulse
//     sidecar). A sidecar may vouch only for its own pod's declared checks (sidecar
//     vantage): nothing else it sends is used.
//   - relay: the gateway's own service account. A sharded gateway's shard (the relay)
//     authenticates the agents that connect to it and forwards each point to the shard that
//     owns its target, with the agent's identity on the point's Resource (Relayed). A relay
//     vouches for the identities it forwards (MatchResource); it observes nothing itself.
//     Nothing a relay can vouch for goes beyond what it can already do: a gateway pod writes
//     every status object.
//   - nothing else: a token of a service account that is neither is rejected.
//
// The identity travels with the collector's own client information
// (go.opentelemetry.io/collector/client):
//
//   - client.Info.Auth holds an *AuthData. It is set by the extension only (the type is
//     this package's, so nothing on the wire can produce it) and reaches every component
//     that is called with the receiver's context: processors such as memory_limiter and
//     k8s_net_attributes pass it on. The batch processor does not: it exports with a new
//     context that carries only client metadata.
//   - client.Info.Metadata holds the same identity under the reserved keys below, which the
//     batch processor keeps when they are listed in its metadata_keys. The keys contain a
//     "/", a character that neither a gRPC metadata key nor an HTTP header name may
//     contain, so no client can send them: they can only have been written by the
//     extension, which also removes any key with the reserved prefix before writing its
//     own.
//
// FromClientInfo reads the identity back, from Auth when present, else from Metadata.
package identity // import "github.com/netpulse/netpulse/internal/identity"

import (
	"context"
	"strings"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Reserved client-metadata keys (lower case: client.Metadata lower-cases its keys).
const (
	// MetadataPrefix starts every reserved key; the extension drops incoming keys with it.
	MetadataPrefix = "auth.netpulse.io/"

	MetadataNamespace      = MetadataPrefix + "namespace"
	MetadataServiceAccount = MetadataPrefix + "service-account"
	MetadataPodName        = MetadataPrefix + "pod-name"
	MetadataPodUID         = MetadataPrefix + "pod-uid"
	MetadataNodeName       = MetadataPrefix + "node-name"
	MetadataRole           = MetadataPrefix + "role"
)

// MetadataKeys are the keys to list in the batch processor's metadata_keys so that the
// identity survives batching (one batch per agent pod).
var MetadataKeys = []string{MetadataNamespace, MetadataServiceAccount, MetadataPodName, MetadataPodUID, MetadataNodeName, MetadataRole}

// Attribute names of AuthData.GetAttribute. "subject" and "membership" follow the
// contrib authenticators (oidc); the k8s.* names follow the OpenTelemetry semantic
// conventions of the Resource attributes they are compared with.
const (
	AttrSubject        = "subject"    // system:serviceaccount:<namespace>:<name>
	AttrMembership     = "membership" // the user's groups ([]string)
	AttrNamespace      = "k8s.namespace.name"
	AttrServiceAccount = "k8s.serviceaccount.name"
	AttrPodName        = "k8s.pod.name"
	AttrPodUID         = "k8s.pod.uid"
	AttrNodeName       = "k8s.node.name"
	AttrNodeUID        = "k8s.node.uid"
	// AttrCredentialID is the token's credential ID (its JWT ID) as the API server reports
	// it, for audit correlation.
	AttrCredentialID = "k8s.credential.id"
	// AttrRole is the caller's role: "agent" or "sidecar".
	AttrRole = "netpulse.role"
)

// Role is what an authenticated pod may report.
type Role string

// Roles.
const (
	// RoleNone: not authenticated, or an account that is neither (never on an Identity
	// that Complete accepts).
	RoleNone Role = ""
	// RoleAgent: the agents' DaemonSet service account; observes pairs, counts toward
	// quorums, reports the declared checks placed on its node.
	RoleAgent Role = "agent"
	// RoleSidecar: another allowed service account; vouches only for its own pod's
	// declared checks.
	RoleSidecar Role = "sidecar"
	// RoleRelay: the gateway's own service account: forwards what agents sent it, with
	// their identities (Relayed), to the shard that owns each target.
	RoleRelay Role = "relay"
)

func (r Role) valid() bool { return r == RoleAgent || r == RoleSidecar || r == RoleRelay }

// Accounts are the service accounts allowed to authenticate, "namespace/name", and the
// role of each: the agents' accounts are agents, the relays' relays, every other allowed
// account a sidecar.
type Accounts struct {
	agents, relays, allowed map[string]bool
}

// NewAccounts: allowed are every account that may authenticate, agents those of them
// whose pods are agents (an agent account is allowed even when allowed omits it).
func NewAccounts(allowed, agents []string) Accounts {
	a := Accounts{agents: map[string]bool{}, allowed: map[string]bool{}}
	for _, sa := range allowed {
		a.allowed[sa] = true
	}
	for _, sa := range agents {
		a.agents[sa] = true
		a.allowed[sa] = true
	}
	return a
}

// WithRelays returns a with relays (accounts whose pods forward other pods' data with
// their identities: the gateway's own) allowed, in that role.
func (a Accounts) WithRelays(relays []string) Accounts {
	if a.relays == nil {
		a.relays = map[string]bool{}
	}
	for _, sa := range relays {
		a.relays[sa] = true
		a.allowed[sa] = true
	}
	return a
}

// RoleOf is the role of a token of namespace/serviceAccount: RoleNone when not allowed.
func (a Accounts) RoleOf(namespace, serviceAccount string) Role {
	k := namespace + "/" + serviceAccount
	switch {
	case a.relays[k]:
		return RoleRelay
	case a.agents[k]:
		return RoleAgent
	case a.allowed[k]:
		return RoleSidecar
	}
	return RoleNone
}

// Identity is an authenticated pod.
type Identity struct {
	Namespace      string
	ServiceAccount string
	PodName        string
	PodUID         string
	NodeName       string
	NodeUID        string // may be empty
	CredentialID   string // may be empty
	Groups         []string
	Role           Role
}

// Complete reports whether the identity names a pod (namespace, name, UID), its node and
// its role: what binding an observation to its observer needs. A relay's node is not
// needed (it observes nothing; a gateway pod's token names it once the pod is scheduled).
func (id Identity) Complete() bool {
	return id.Namespace != "" && id.ServiceAccount != "" && id.PodName != "" && id.PodUID != "" && id.Role.valid() &&
		(id.NodeName != "" || id.Role == RoleRelay)
}

// Subject is the Kubernetes user name of the service account.
func (id Identity) Subject() string {
	return "system:serviceaccount:" + id.Namespace + ":" + id.ServiceAccount
}

// String renders the identity for logs: "namespace/pod(uid)@node".
func (id Identity) String() string {
	return id.Namespace + "/" + id.PodName + "(" + id.PodUID + ")@" + id.NodeName
}

// Source is the pod and node a Resource claims observed (k8s.namespace.name,
// k8s.pod.name, k8s.pod.uid, k8s.node.name).
type Source struct {
	Namespace, PodName, PodUID, NodeName string
}

// String renders the claim for logs, as Identity.String.
func (s Source) String() string {
	return s.Namespace + "/" + s.PodName + "(" + s.PodUID + ")@" + s.NodeName
}

// Refusal says why Match refused a claim (a skip or refusal reason of the components'
// metrics).
type Refusal string

// Refusals of Match.
const (
	// RefusedUnauthenticated: the request carries no complete authenticated identity.
	RefusedUnauthenticated Refusal = "unauthenticated_source"
	// RefusedMismatch: the Resource names another pod (namespace, name, UID) or node than
	// the caller.
	RefusedMismatch Refusal = "source_identity_mismatch"
	// RefusedNotAgent: the caller names its own pod but is not an agent (a sidecar), and
	// the data is agent work (observations, declared checks placed on a node's agent).
	RefusedNotAgent Refusal = "source_not_agent"
)

// Binding is Match's answer.
type Binding struct {
	Identity Identity // the caller (zero when unauthenticated)
	Via      Via
	// Role is the caller's role when the claim is its own; RoleNone when refused.
	Role    Role
	Refused Refusal // "" when the claim is the caller's
}

// Own reports whether the claim is the caller's own, whatever its role: all a pod's own
// declared-check results (sidecar vantage) need. Else it returns the refusal.
func (b Binding) Own() (Refusal, bool) {
	if b.Refused != "" {
		return b.Refused, false
	}
	return "", true
}

// Agent reports whether the claim is the caller's own and the caller an agent: what
// observations need to hold admission slots, count toward any quorum and get pair
// objects, and what results of a check placed on a node's agent need. Else it returns the
// refusal.
func (b Binding) Agent() (Refusal, bool) {
	switch {
	case b.Refused != "":
		return b.Refused, false
	case b.Role != RoleAgent:
		return RefusedNotAgent, false
	}
	return "", true
}

// Match is the one identity check of netpulse: the claim src is the caller of info when
// its namespace, pod name and node are the caller's, and its pod UID too (a claim without
// a UID names the pod by name alone, which the caller's token binds to the current pod).
// The binding then carries the caller's role; a component uses the data only for work of
// that role (Binding.Own, Binding.Agent). A relay's claims are refused here: what it
// forwards is matched per Resource (MatchResource).
func Match(info client.Info, src Source) Binding {
	id, via, ok := FromClientInfo(info)
	if !ok {
		return Binding{Refused: RefusedUnauthenticated}
	}
	return matchIdentity(id, via, src)
}

// MatchResource is Match for one Resource of a request: when the caller is a relay, the
// claim is matched against the identity the relay vouches for on that Resource (Relayed),
// and refused as unauthenticated without one; any other caller is matched as by Match
// (a Resource's relayed attributes count for nothing then).
func MatchResource(info client.Info, src Source, attrs pcommon.Map) Binding {
	id, via, ok := FromClientInfo(info)
	if !ok {
		return Binding{Refused: RefusedUnauthenticated}
	}
	if id.Role == RoleRelay {
		rid, ok := RelayedOf(attrs)
		if !ok {
			return Binding{Identity: id, Via: via, Refused: RefusedUnauthenticated}
		}
		return matchIdentity(rid, ViaRelay, src)
	}
	return matchIdentity(id, via, src)
}

// MatchResourceContext is MatchResource(client.FromContext(ctx), src, attrs).
func MatchResourceContext(ctx context.Context, src Source, attrs pcommon.Map) Binding {
	return MatchResource(client.FromContext(ctx), src, attrs)
}

func matchIdentity(id Identity, via Via, src Source) Binding {
	b := Binding{Identity: id, Via: via}
	if id.Role == RoleRelay {
		b.Refused = RefusedNotAgent // a relay observes nothing of its own
		return b
	}
	if src.Namespace != id.Namespace || src.PodName != id.PodName || src.NodeName != id.NodeName ||
		(src.PodUID != "" && src.PodUID != id.PodUID) {
		b.Refused = RefusedMismatch
		return b
	}
	b.Role = id.Role
	return b
}

// MatchContext is Match(client.FromContext(ctx), src).
func MatchContext(ctx context.Context, src Source) Binding {
	return Match(client.FromContext(ctx), src)
}

// AuthData is the client.AuthData the extension puts on authenticated requests.
type AuthData struct {
	id Identity
}

var _ client.AuthData = (*AuthData)(nil)

// NewAuthData wraps id.
func NewAuthData(id Identity) *AuthData { return &AuthData{id: id} }

// Identity returns the authenticated identity.
func (a *AuthData) Identity() Identity { return a.id }

var attrNames = []string{AttrSubject, AttrMembership, AttrNamespace, AttrServiceAccount, AttrPodName, AttrPodUID, AttrNodeName, AttrNodeUID, AttrCredentialID, AttrRole}

// GetAttribute implements client.AuthData: strings, except membership ([]string).
func (a *AuthData) GetAttribute(name string) any {
	switch name {
	case AttrSubject:
		return a.id.Subject()
	case AttrMembership:
		return append([]string(nil), a.id.Groups...)
	case AttrNamespace:
		return a.id.Namespace
	case AttrServiceAccount:
		return a.id.ServiceAccount
	case AttrPodName:
		return a.id.PodName
	case AttrPodUID:
		return a.id.PodUID
	case AttrNodeName:
		return a.id.NodeName
	case AttrNodeUID:
		return a.id.NodeUID
	case AttrCredentialID:
		return a.id.CredentialID
	case AttrRole:
		return string(a.id.Role)
	}
	return nil
}

// GetAttributeNames implements client.AuthData.
func (a *AuthData) GetAttributeNames() []string { return append([]string(nil), attrNames...) }

// WithIdentity returns md without any key under MetadataPrefix, plus id under the
// reserved keys.
func WithIdentity(md client.Metadata, id Identity) client.Metadata {
	out := map[string][]string{}
	for k := range md.Keys() {
		if strings.HasPrefix(strings.ToLower(k), MetadataPrefix) {
			continue
		}
		out[k] = md.Get(k)
	}
	out[MetadataNamespace] = []string{id.Namespace}
	out[MetadataServiceAccount] = []string{id.ServiceAccount}
	out[MetadataPodName] = []string{id.PodName}
	out[MetadataPodUID] = []string{id.PodUID}
	out[MetadataNodeName] = []string{id.NodeName}
	out[MetadataRole] = []string{string(id.Role)}
	return client.NewMetadata(out)
}

// Via says where FromClientInfo found the identity.
type Via string

// Where an identity was found.
const (
	ViaNone     Via = ""
	ViaAuth     Via = "auth"
	ViaMetadata Via = "metadata"
	// ViaRelay: on the Resource, vouched for by an authenticated relay (MatchResource).
	ViaRelay Via = "relay"
)

// Resource attributes of a relayed identity: a relay writes them on each Resource it
// forwards (SetRelayed), from the identity it authenticated; they are believed only from
// a caller authenticated as a relay (MatchResource).
const (
	RelayedPrefix         = "netpulse.relayed."
	RelayedNamespace      = RelayedPrefix + "namespace"
	RelayedServiceAccount = RelayedPrefix + "service_account"
	RelayedPodName        = RelayedPrefix + "pod.name"
	RelayedPodUID         = RelayedPrefix + "pod.uid"
	RelayedNodeName       = RelayedPrefix + "node.name"
	RelayedRole           = RelayedPrefix + "role"
)

// SetRelayed writes id on a Resource's attributes, replacing whatever relayed identity
// they carried (a sender's own attributes under the prefix count for nothing).
func SetRelayed(attrs pcommon.Map, id Identity) {
	StripRelayed(attrs)
	attrs.PutStr(RelayedNamespace, id.Namespace)
	attrs.PutStr(RelayedServiceAccount, id.ServiceAccount)
	attrs.PutStr(RelayedPodName, id.PodName)
	attrs.PutStr(RelayedPodUID, id.PodUID)
	attrs.PutStr(RelayedNodeName, id.NodeName)
	attrs.PutStr(RelayedRole, string(id.Role))
}

// StripRelayed removes every relayed attribute.
func StripRelayed(attrs pcommon.Map) {
	attrs.RemoveIf(func(k string, _ pcommon.Value) bool { return strings.HasPrefix(k, RelayedPrefix) })
}

// RelayedOf reads a relayed identity: complete, and of an agent or a sidecar (a relay
// never vouches for a relay).
func RelayedOf(attrs pcommon.Map) (Identity, bool) {
	str := func(k string) string {
		if v, ok := attrs.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
			return v.Str()
		}
		return ""
	}
	id := Identity{
		Namespace: str(RelayedNamespace), ServiceAccount: str(RelayedServiceAccount), PodName: str(RelayedPodName),
		PodUID: str(RelayedPodUID), NodeName: str(RelayedNodeName), Role: Role(str(RelayedRole)),
	}
	if !id.Complete() || id.Role == RoleRelay {
		return Identity{}, false
	}
	return id, true
}

// FromClientInfo returns the authenticated identity of a request: from info.Auth when it
// is the extension's AuthData, else from the reserved metadata keys (each with exactly
// one value). ok is false when neither holds a complete identity.
func FromClientInfo(info client.Info) (id Identity, via Via, ok bool) {
	if a, isOurs := info.Auth.(*AuthData); isOurs && a != nil && a.id.Complete() {
		return a.id, ViaAuth, true
	}
	one := func(k string) string {
		if v := info.Metadata.Get(k); len(v) == 1 {
			return v[0]
		}
		return ""
	}
	id = Identity{
		Namespace:      one(MetadataNamespace),
		ServiceAccount: one(MetadataServiceAccount),
		PodName:        one(MetadataPodName),
		PodUID:         one(MetadataPodUID),
		NodeName:       one(MetadataNodeName),
		Role:           Role(one(MetadataRole)),
	}
	if id.Complete() {
		return id, ViaMetadata, true
	}
	return Identity{}, ViaNone, false
}

// FromContext is FromClientInfo(client.FromContext(ctx)).
func FromContext(ctx context.Context) (Identity, Via, bool) {
	return FromClientInfo(client.FromContext(ctx))
}
