// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/netpulse/netpulse/internal/identity"
)

// tokenKey is the SHA-256 of a token: the cache never holds a token itself.
type tokenKey [32]byte

// outcome is the answer for one token: an identity, or a rejection.
type outcome struct {
	id identity.Identity
	// reason is "" for an accepted token, else the rejection reason (a metric value).
	reason string
	// detail says why, for logs (never the token).
	detail string
	// local: accepted by local verification; every answer from the cache checks again that
	// the bound pod is still in the pod index (revocation follows pod deletion).
	local bool
}

type cacheEntry struct {
	outcome
	// fresh: answered from the cache until then. stale: an accepted outcome is kept until
	// then (never past the token's expiry) to answer while the API cannot (stale-if-error).
	fresh, stale time.Time
}

// tokenCache is a bounded LRU of review outcomes with per-entry expiry. Safe for
// concurrent use. The extension keeps two: accepted identities (cache.max_entries) and
// rejections (cache.max_negative_entries), so that no number of rejected tokens can evict an
// accepted identity or its stale-if-error entry.
type tokenCache struct {
	lru *lru.Cache[tokenKey, cacheEntry]
}

func newTokenCache(size int) *tokenCache {
	c, err := lru.New[tokenKey, cacheEntry](size)
	if err != nil {
		panic(err) // size is validated >= 1
	}
	return &tokenCache{lru: c}
}

// get returns the outcome for k: fresh (answer from the cache), or stale (an accepted
// outcome past its freshness, usable only when a new review cannot be made). Entries past
// both are dropped.
func (c *tokenCache) get(k tokenKey, now time.Time) (o outcome, fresh, stale bool) {
	e, ok := c.lru.Get(k)
	if !ok {
		return outcome{}, false, false
	}
	switch {
	case now.Before(e.fresh):
		return e.outcome, true, false
	case now.Before(e.stale):
		return e.outcome, false, true
	}
	c.lru.Remove(k)
	return outcome{}, false, false
}

// put stores o, fresh until fresh and usable as stale until stale (nothing when neither is
// after now).
func (c *tokenCache) put(k tokenKey, o outcome, fresh, stale, now time.Time) {
	if stale.Before(fresh) {
		stale = fresh
	}
	if !stale.After(now) {
		return
	}
	c.lru.Add(k, cacheEntry{outcome: o, fresh: fresh, stale: stale})
}

// remove drops k.
func (c *tokenCache) remove(k tokenKey) { c.lru.Remove(k) }

func (c *tokenCache) len() int { return c.lru.Len() }
