package k8stokenauthextension

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/netpulse/netpulse/extension/k8stokenauthextension/identity"
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
}

type cacheEntry struct {
	outcome
	expires time.Time
}

// tokenCache is a bounded LRU of review outcomes with per-entry expiry. Safe for
// concurrent use.
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

// get returns the outcome for k unless it has expired at now (then it is dropped).
func (c *tokenCache) get(k tokenKey, now time.Time) (outcome, bool) {
	e, ok := c.lru.Get(k)
	if !ok {
		return outcome{}, false
	}
	if !now.Before(e.expires) {
		c.lru.Remove(k)
		return outcome{}, false
	}
	return e.outcome, true
}

// put stores o until expires (nothing when that is not after now).
func (c *tokenCache) put(k tokenKey, o outcome, expires, now time.Time) {
	if !expires.After(now) {
		return
	}
	c.lru.Add(k, cacheEntry{outcome: o, expires: expires})
}

func (c *tokenCache) len() int { return c.lru.Len() }
