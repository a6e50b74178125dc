// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/netpulse/netpulse/internal/kubeclient"
)

// Config of the k8s_token_auth extension.
type Config struct {
	// The gateway's own API credentials: TokenReview calls (RBAC: create on
	// authentication.k8s.io tokenreviews), and with local verification the issuer's keys
	// (system:service-account-issuer-discovery) and a watch of the allowed accounts' pods
	// (list, watch pods). qps/burst bound the request rate.
	kubeclient.Config `mapstructure:",squash"`

	// Verification is how a token not in the cache is verified: "local" (the default)
	// checks its signature against the issuer's keys (the API server's OIDC discovery and
	// JWKS endpoints), its claims, and its bound pod against a watch of the allowed
	// accounts' pods, and sends a TokenReview only when it cannot decide (keys not fetched,
	// an unknown key after a refetch, a pod the watch has not seen); "review" sends a
	// TokenReview for every such token.
	Verification string `mapstructure:"verification"`
	// Keys: how the issuer's keys are kept (local verification).
	Keys KeysConfig `mapstructure:"keys"`

	// Audience the tokens must be issued for (the projected token's audience). It is passed
	// as the TokenReview's spec.audiences, so the API server checks it, and must come back
	// in status.audiences. Dedicate it to the gateway: never the API server's own audience.
	Audience string `mapstructure:"audience"`
	// ServiceAccounts allowed to authenticate, as "namespace/name": the agents' service
	// account, and the workload service accounts of pods running the netpulse sidecar. A
	// token of any other service account is rejected.
	ServiceAccounts []string `mapstructure:"service_accounts"`
	// AgentServiceAccounts are those of ServiceAccounts that the agents' DaemonSet runs
	// under: their pods are agents (observe pairs, count toward quorums). Every other
	// allowed account is a sidecar, which may vouch only for its own pod's declared checks
	// (internal/identity). Default: ServiceAccounts when it names exactly one account;
	// required when it names more.
	AgentServiceAccounts []string `mapstructure:"agent_service_accounts"`
	// RelayServiceAccounts are those of ServiceAccounts whose pods relay other pods' data
	// with their identities: the gateway's own, when a sharded gateway's shards forward
	// each agent's points to the shard that owns their targets (pod_network_health's
	// relay). A relay vouches for the identity on each Resource it forwards; it is never an
	// agent. Default: none.
	RelayServiceAccounts []string `mapstructure:"relay_service_accounts"`
	// Issuer is the cluster's service-account token issuer (the API server's
	// --service-account-issuer, e.g. https://kubernetes.default.svc.cluster.local). When set,
	// a token with another iss claim is rejected before any review, and local verification
	// requires it instead of the discovery document's issuer. Default: not checked before
	// review; local verification takes the discovery document's (and sends a token of
	// another issuer to review: the API server may accept several).
	Issuer string `mapstructure:"issuer"`

	Cache CacheConfig `mapstructure:"cache"`
	// MaxConcurrentReviews bounds the TokenReview calls in flight; requests beyond it wait
	// (within their own deadline) and are answered Unavailable when it passes.
	MaxConcurrentReviews int `mapstructure:"max_concurrent_reviews"`
	// ReviewTimeout bounds one TokenReview call.
	ReviewTimeout time.Duration `mapstructure:"review_timeout"`
	// PeerReviews bounds the reviews one peer (caller IP address) may cause for tokens the
	// gateway has not accepted before.
	PeerReviews PeerReviewsConfig `mapstructure:"peer_reviews"`
}

// KeysConfig: the issuer's keys are fetched when the extension starts (in the background),
// every refresh_interval, and when a token names a key ID not in the set - at most once per
// min_refetch_interval, whatever the number of such tokens (a rotation is followed without a
// restart; unknown keys fall back to TokenReview meanwhile).
type KeysConfig struct {
	RefreshInterval    time.Duration `mapstructure:"refresh_interval"`
	MinRefetchInterval time.Duration `mapstructure:"min_refetch_interval"`
}

// Validate names every offending field.
func (c KeysConfig) Validate() error {
	var errs []error
	if c.RefreshInterval < time.Minute || c.RefreshInterval > 24*time.Hour {
		errs = append(errs, fmt.Errorf("refresh_interval: %v out of range [1m, 24h]", c.RefreshInterval))
	}
	if c.MinRefetchInterval < time.Second || c.MinRefetchInterval > 10*time.Minute {
		errs = append(errs, fmt.Errorf("min_refetch_interval: %v out of range [1s, 10m]", c.MinRefetchInterval))
	}
	return kubeclient.JoinErrors(errs...)
}

// PeerReviewsConfig is a token bucket per peer; a peer also has at most one review in
// flight. Requests beyond it are answered Unavailable (reason peer_limited) and cost no
// review.
type PeerReviewsConfig struct {
	// Rate: reviews per second a peer's bucket refills with.
	Rate float64 `mapstructure:"rate"`
	// Burst: the bucket's size.
	Burst int `mapstructure:"burst"`
}

// Validate names every offending field.
func (c PeerReviewsConfig) Validate() error {
	var errs []error
	if c.Rate <= 0 || c.Rate > 100 {
		errs = append(errs, fmt.Errorf("rate: %v out of range (0, 100]", c.Rate))
	}
	if c.Burst < 1 || c.Burst > 1000 {
		errs = append(errs, fmt.Errorf("burst: %d out of range [1, 1000]", c.Burst))
	}
	return kubeclient.JoinErrors(errs...)
}

// agentAccounts are AgentServiceAccounts, defaulted.
func (c *Config) agentAccounts() []string {
	if len(c.AgentServiceAccounts) == 0 && len(c.ServiceAccounts) == 1 {
		return c.ServiceAccounts
	}
	return c.AgentServiceAccounts
}

// CacheConfig bounds the cache of review outcomes, keyed by the SHA-256 of the token.
type CacheConfig struct {
	// MaxEntries bounds the accepted identities: least recently used ones are evicted
	// beyond it. Rejections never evict them (they have their own cache).
	MaxEntries int `mapstructure:"max_entries"`
	// MaxNegativeEntries bounds the rejected tokens answered from the cache (negative_ttl),
	// least recently used evicted beyond it.
	MaxNegativeEntries int `mapstructure:"max_negative_entries"`
	// MaxTTL: an accepted token is reviewed again after this long at the latest (and never
	// trusted past its own expiry). It is also how long a revoked token (its pod deleted)
	// may still be accepted.
	MaxTTL time.Duration `mapstructure:"max_ttl"`
	// NegativeTTL: how long a rejected token is answered from the cache (0: not cached).
	NegativeTTL time.Duration `mapstructure:"negative_ttl"`
	// StaleIfError: for this long after max_ttl (and never past the token's expiry) an
	// accepted token is still accepted when it cannot be reviewed again because the API
	// does not answer (an API server restart or upgrade); 0 disables. A token is never
	// accepted against an answer of the API.
	StaleIfError time.Duration `mapstructure:"stale_if_error"`
}

// Validate names every offending top-level field; the collector's configuration walk
// (confmap.Validate) calls CacheConfig.Validate and puts "cache: " in front of what it
// returns.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	errs = append(errs, c.Config.Check())
	switch {
	case c.Audience == "":
		add("audience: required (the audience of the agents' projected tokens, e.g. netpulse-gateway)")
	case strings.ContainsAny(c.Audience, " \t\r\n"):
		add("audience: %q contains white space", c.Audience)
	}
	if c.Verification != VerificationLocal && c.Verification != VerificationReview {
		add("verification: %q: want %q (the issuer's keys, TokenReview when undecided) or %q (a TokenReview per token)", c.Verification, VerificationLocal, VerificationReview)
	}
	if strings.ContainsAny(c.Issuer, " \t\r\n") {
		add("issuer: %q contains white space", c.Issuer)
	}
	if len(c.ServiceAccounts) == 0 {
		add("service_accounts: required (\"namespace/name\" of the agents' service account)")
	}
	for i, sa := range c.ServiceAccounts {
		ns, name, ok := strings.Cut(sa, "/")
		if !ok {
			add("service_accounts::%d: %q: want \"namespace/name\"", i, sa)
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			add("service_accounts::%d: namespace %q: %s", i, ns, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			add("service_accounts::%d: name %q: %s", i, name, strings.Join(msgs, "; "))
		}
	}
	allowed := map[string]bool{}
	for _, sa := range c.ServiceAccounts {
		allowed[sa] = true
	}
	if len(c.AgentServiceAccounts) == 0 && len(c.ServiceAccounts) > 1 {
		add("agent_service_accounts: required when service_accounts names more than one account: which of %q is the agents' DaemonSet's (the others are sidecars, docs/security.md)", c.ServiceAccounts)
	}
	agents := map[string]bool{}
	for i, sa := range c.AgentServiceAccounts {
		agents[sa] = true
		if !allowed[sa] {
			add("agent_service_accounts::%d: %q is not in service_accounts", i, sa)
		}
	}
	for i, sa := range c.RelayServiceAccounts {
		switch {
		case !allowed[sa]:
			add("relay_service_accounts::%d: %q is not in service_accounts", i, sa)
		case agents[sa] || len(c.AgentServiceAccounts) == 0 && len(c.ServiceAccounts) == 1:
			add("relay_service_accounts::%d: %q is an agents' account: a relay observes nothing itself", i, sa)
		}
	}
	if c.MaxConcurrentReviews < 1 || c.MaxConcurrentReviews > 64 {
		add("max_concurrent_reviews: %d out of range [1, 64]", c.MaxConcurrentReviews)
	}
	if c.ReviewTimeout < 100*time.Millisecond || c.ReviewTimeout > time.Minute {
		add("review_timeout: %v out of range [100ms, 1m]", c.ReviewTimeout)
	}
	return kubeclient.JoinErrors(errs...)
}

// Validate names every offending cache field.
func (c CacheConfig) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MaxEntries < 1 || c.MaxEntries > 1_000_000 {
		add("max_entries: %d out of range [1, 1000000]", c.MaxEntries)
	}
	if c.MaxNegativeEntries < 1 || c.MaxNegativeEntries > 1_000_000 {
		add("max_negative_entries: %d out of range [1, 1000000]", c.MaxNegativeEntries)
	}
	if c.MaxTTL < time.Second || c.MaxTTL > time.Hour {
		add("max_ttl: %v out of range [1s, 1h]", c.MaxTTL)
	}
	if c.NegativeTTL < 0 || c.NegativeTTL > 5*time.Minute {
		add("negative_ttl: %v out of range [0, 5m]", c.NegativeTTL)
	}
	if c.StaleIfError < 0 || c.StaleIfError > time.Hour {
		add("stale_if_error: %v out of range [0, 1h]", c.StaleIfError)
	}
	return kubeclient.JoinErrors(errs...)
}
