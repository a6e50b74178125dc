// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package identity is the authenticated identity of an agent pod as the k8s_token_auth
// extension establishes it (from a TokenReview of the pod's projected ServiceAccount token),
// and how it travels through a collector pipeline with the collector's own client
// information (go.opentelemetry.io/collector/client):
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
package identity // import "github.com/netpulse/netpulse/extension/k8stokenauthextension/identity"

import (
	"context"
	"strings"

	"go.opentelemetry.io/collector/client"
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
)

// MetadataKeys are the keys to list in the batch processor's metadata_keys so that the
// identity survives batching (one batch per agent pod).
var MetadataKeys = []string{MetadataNamespace, MetadataServiceAccount, MetadataPodName, MetadataPodUID, MetadataNodeName}

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
)

// Identity is an authenticated agent pod.
type Identity struct {
	Namespace      string
	ServiceAccount string
	PodName        string
	PodUID         string
	NodeName       string
	NodeUID        string // may be empty
	CredentialID   string // may be empty
	Groups         []string
}

// Complete reports whether the identity names a pod (namespace, name, UID) and its node:
// what binding an observation to its observer needs.
func (id Identity) Complete() bool {
	return id.Namespace != "" && id.ServiceAccount != "" && id.PodName != "" && id.PodUID != "" && id.NodeName != ""
}

// Subject is the Kubernetes user name of the service account.
func (id Identity) Subject() string {
	return "system:serviceaccount:" + id.Namespace + ":" + id.ServiceAccount
}

// String renders the identity for logs: "namespace/pod(uid)@node".
func (id Identity) String() string {
	return id.Namespace + "/" + id.PodName + "(" + id.PodUID + ")@" + id.NodeName
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

var attrNames = []string{AttrSubject, AttrMembership, AttrNamespace, AttrServiceAccount, AttrPodName, AttrPodUID, AttrNodeName, AttrNodeUID, AttrCredentialID}

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
	return client.NewMetadata(out)
}

// Via says where FromClientInfo found the identity.
type Via string

// Where an identity was found.
const (
	ViaNone     Via = ""
	ViaAuth     Via = "auth"
	ViaMetadata Via = "metadata"
)

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
