// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/netpulse/netpulse/internal/identity"
)

// Verification modes.
const (
	// VerificationLocal verifies tokens against the issuer's keys and the pod index, and
	// falls back to a TokenReview whenever it cannot decide.
	VerificationLocal = "local"
	// VerificationReview sends a TokenReview for every token not in the cache.
	VerificationReview = "review"
)

// signingAlgorithms are those the API server signs service-account tokens with (an RSA
// key signs RS256, an ECDSA key ES256/384/512 by its curve). Anything else - none, HS256
// with the public key as the secret, PS256 - is refused before any key is looked at.
var signingAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// clockLeeway is allowed on nbf and iat (the API server's own: go-jose's DefaultLeeway);
// exp is checked without leeway (precheck).
const clockLeeway = jwt.DefaultLeeway

// Why local verification handed a token to the TokenReview path (the reason attribute
// of otelcol_k8s_token_auth_local_verifications{verdict="fallback"}).
const (
	fallbackNoKeys       = "no_keys"           // no key set fetched yet (or the endpoints are refused)
	fallbackUnknownKey   = "unknown_key"       // kid not in the key set, even after a refetch (or one was made < min_refetch_interval ago)
	fallbackIssuer       = "other_issuer"      // iss is not the discovery issuer (the API server may accept several)
	fallbackNotYetValid  = "not_yet_valid"     // nbf or iat beyond the leeway (clock skew with the API server)
	fallbackPodsNotReady = "pods_not_synced"   // the pod index has not listed the account's pods yet
	fallbackPodNotFound  = "pod_not_found"     // no pod with the token's UID, none seen deleted: not seen yet, or deleted before the watch began (or forgotten)
	fallbackPodDeleted   = "pod_being_deleted" // its deletionTimestamp passed more than the leeway ago
)

type localVerdict uint8

const (
	localAccepted localVerdict = iota
	localRejected
	localFallback
)

func (v localVerdict) String() string {
	switch v {
	case localAccepted:
		return "accepted"
	case localRejected:
		return "rejected"
	default:
		return "fallback"
	}
}

// k8sClaims is the kubernetes.io private claim of a service-account token.
type k8sClaims struct {
	Kubernetes *kubernetesClaims `json:"kubernetes.io"`
}

// kubernetesClaims is what the kubernetes.io claim names.
type kubernetesClaims struct {
	Namespace string     `json:"namespace"`
	Svcacct   *objectRef `json:"serviceaccount"`
	Pod       *objectRef `json:"pod"`
	Node      *objectRef `json:"node"`
}

type objectRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// verifier verifies projected service-account tokens without the API: signature against
// the issuer's keys, the registered claims, the kubernetes.io claim, and the bound pod
// against boundPods.
type verifier struct {
	keys     *issuerKeys
	pods     *boundPods
	audience string
	issuer   string // configured; "" to take the discovery document's
	accounts identity.Accounts
}

// verify decides a token the structural checks (parseClaims, precheck) have let through.
// Fallback means "ask the API": it is never a rejection.
func (v *verifier) verify(ctx context.Context, token string, now time.Time) (localVerdict, outcome, string) {
	reject := func(reason, format string, args ...any) (localVerdict, outcome, string) {
		return localRejected, outcome{reason: reason, detail: fmt.Sprintf(format, args...) + " (verified locally)"}, ""
	}
	fallback := func(why string) (localVerdict, outcome, string) { return localFallback, outcome{}, why }

	tok, err := jwt.ParseSigned(token, signingAlgorithms)
	if err != nil {
		return reject(reasonMalformedToken, "not a JWS signed with %v: %v", signingAlgorithms, err)
	}
	if len(tok.Headers) != 1 {
		return reject(reasonMalformedToken, "want one signature, got %d", len(tok.Headers))
	}
	kid := tok.Headers[0].KeyID
	set := v.keys.current()
	if set == nil {
		v.keys.refetch(ctx)
		if set = v.keys.current(); set == nil {
			return fallback(fallbackNoKeys)
		}
	}
	keys, err := set.keysFor(kid)
	if err != nil {
		// A key the gateway has not seen: the issuer may have rotated. One refetch per
		// min_refetch_interval, shared by every request that asks.
		v.keys.refetch(ctx)
		if set = v.keys.current(); set != nil {
			keys, err = set.keysFor(kid)
		}
		if err != nil {
			return fallback(fallbackUnknownKey)
		}
	}
	var pub jwt.Claims
	var priv k8sClaims
	verified := false
	for _, k := range keys {
		if k.Algorithm != "" && k.Algorithm != tok.Headers[0].Algorithm {
			continue
		}
		if err = tok.Claims(k.Key, &pub, &priv); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return reject(reasonTokenRejected, "signature does not verify with the issuer's key %q (%v)", kid, err)
	}

	issuer := v.issuer
	if issuer == "" {
		issuer = set.issuer
	}
	if pub.Issuer != issuer {
		if v.issuer != "" {
			return reject(reasonTokenRejected, "issuer %q is not %q", pub.Issuer, v.issuer)
		}
		return fallback(fallbackIssuer)
	}
	if !slices.Contains([]string(pub.Audience), v.audience) {
		return reject(reasonTokenRejected, "audiences %q do not include %q", []string(pub.Audience), v.audience)
	}
	if pub.Expiry == nil || !pub.Expiry.Time().After(now) {
		return reject(reasonExpiredToken, "expired or no exp")
	}
	if (pub.NotBefore != nil && pub.NotBefore.Time().After(now.Add(clockLeeway))) ||
		(pub.IssuedAt != nil && pub.IssuedAt.Time().After(now.Add(clockLeeway))) {
		return fallback(fallbackNotYetValid)
	}
	k := priv.Kubernetes
	if k == nil || k.Namespace == "" || k.Svcacct == nil || k.Svcacct.Name == "" {
		return reject(reasonServiceAccount, "no kubernetes.io namespace and service account claims")
	}
	if pub.Subject != serviceAccountPrefix+k.Namespace+":"+k.Svcacct.Name {
		return reject(reasonServiceAccount, "subject %q does not match the kubernetes.io claim %s/%s", pub.Subject, k.Namespace, k.Svcacct.Name)
	}
	role := v.accounts.RoleOf(k.Namespace, k.Svcacct.Name)
	if role == identity.RoleNone {
		return reject(reasonServiceAccount, "service account %s/%s is not allowed", k.Namespace, k.Svcacct.Name)
	}
	id, bound := boundIdentity(k, role)
	if !bound {
		return reject(reasonNotBoundToPod, "token of %s/%s carries no pod name, pod UID and node name (a projected token bound to the pod, Kubernetes >= 1.30)",
			k.Namespace, k.Svcacct.Name)
	}
	if pub.ID != "" {
		// What the API server reports (k8s.io/apiserver: "JTI=" + jti).
		id.CredentialID = "JTI=" + pub.ID
	}
	if verdict, o, why := v.checkPod(id, now); verdict != localAccepted {
		return verdict, o, why
	}
	return localAccepted, outcome{id: id, local: true}, ""
}

// boundIdentity is the identity of a token's kubernetes.io claims; bound is false when they
// name no pod, or no node (a relay, the gateway's own pod, observes nothing: its node is
// not needed).
func boundIdentity(k *kubernetesClaims, role identity.Role) (id identity.Identity, bound bool) {
	noNode := k.Node == nil || k.Node.Name == ""
	if k.Pod == nil || k.Pod.Name == "" || k.Pod.UID == "" || noNode && role != identity.RoleRelay {
		return identity.Identity{}, false
	}
	id = identity.Identity{
		Namespace: k.Namespace, ServiceAccount: k.Svcacct.Name,
		PodName: k.Pod.Name, PodUID: k.Pod.UID,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + k.Namespace, "system:authenticated"},
		Role:   role,
	}
	if !noNode {
		id.NodeName, id.NodeUID = k.Node.Name, k.Node.UID
	}
	return id, true
}

// checkPod: the pod the identity is bound to must be in the index with its UID, name and
// node, and not deleted more than the leeway ago (the API server's own rule). A UID the
// watch saw deleted is refused (UIDs are never reused). What the index cannot confirm goes
// to the API (fallback): a pod created a moment ago may not have reached the watch yet.
func (v *verifier) checkPod(id identity.Identity, now time.Time) (localVerdict, outcome, string) {
	p, found, deleted, synced := v.pods.lookup(id.Namespace, id.ServiceAccount, id.PodUID)
	switch {
	case !synced:
		return localFallback, outcome{}, fallbackPodsNotReady
	case deleted:
		return localRejected, outcome{reason: reasonTokenRejected, detail: fmt.Sprintf(
			"the pod %s/%s (UID %s) the token is bound to was deleted (verified locally: seen by the pod watch)", id.Namespace, id.PodName, id.PodUID)}, ""
	case !found:
		return localFallback, outcome{}, fallbackPodNotFound
	case p.name != id.PodName || (p.node != "" && p.node != id.NodeName):
		// A pod's UID, name and node never change: a token saying otherwise is not this pod's.
		return localRejected, outcome{reason: reasonTokenRejected, detail: fmt.Sprintf(
			"token names pod %s on %s, the pod with its UID is %s on %s (verified locally)", id.PodName, id.NodeName, p.name, p.node)}, ""
	case !p.deleted.IsZero() && p.deleted.Before(now.Add(-clockLeeway)):
		return localFallback, outcome{}, fallbackPodDeleted
	}
	return localAccepted, outcome{}, ""
}
