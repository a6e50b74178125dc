// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/netpulse/netpulse/extension/k8stokenauthextension/internal/metadata"
	"github.com/netpulse/netpulse/internal/kubeclient"
)

// Defaults.
const (
	// Sized to the cluster (65,000 nodes, each agent's token in the cache): ~730 B an
	// identity (47 MB at 65,000, README Cost); a miss costs a local verification (~50-75
	// µs), or a review with verification: review.
	DefaultMaxEntries           = 100_000
	DefaultMaxTTL               = 5 * time.Minute
	DefaultNegativeTTL          = 10 * time.Second
	DefaultStaleIfError         = 10 * time.Minute
	DefaultMaxConcurrentReviews = 8
	DefaultReviewTimeout        = 5 * time.Second
	DefaultMaxNegativeEntries   = 1000
	// A peer (one agent or sidecar pod) needs one review per max_ttl; 10 at once and one a
	// second after that is far above it and far below the API budget (qps 20).
	DefaultPeerReviewRate  = 1.0
	DefaultPeerReviewBurst = 10
	// The API server's keys change when its signing key is rotated (rare; a token naming a
	// new key triggers a refetch at once): the refresh only drops keys the issuer dropped.
	DefaultKeysRefreshInterval    = 10 * time.Minute
	DefaultKeysMinRefetchInterval = 10 * time.Second
)

// NewFactory creates the k8s_token_auth extension factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	kc := kubeclient.DefaultConfig()
	// After a gateway restart every agent is reviewed once within a probe interval or two.
	kc.QPS, kc.Burst = 20, 40
	return &Config{
		Config:       kc,
		Verification: VerificationLocal,
		Keys:         KeysConfig{RefreshInterval: DefaultKeysRefreshInterval, MinRefetchInterval: DefaultKeysMinRefetchInterval},
		Cache: CacheConfig{
			MaxEntries:         DefaultMaxEntries,
			MaxNegativeEntries: DefaultMaxNegativeEntries,
			MaxTTL:             DefaultMaxTTL,
			NegativeTTL:        DefaultNegativeTTL,
			StaleIfError:       DefaultStaleIfError,
		},
		MaxConcurrentReviews: DefaultMaxConcurrentReviews,
		ReviewTimeout:        DefaultReviewTimeout,
		PeerReviews:          PeerReviewsConfig{Rate: DefaultPeerReviewRate, Burst: DefaultPeerReviewBurst},
	}
}

func createExtension(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newAuthenticator(cfg.(*Config), set)
}
