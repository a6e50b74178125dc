// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// The API server's service-account issuer discovery endpoints (KEP-1393). The gateway reads
// them with its own API client (the API server's CA, its own credentials; RBAC:
// system:service-account-issuer-discovery): the keys are trusted because that connection
// is, never because of where the discovery document's jwks_uri points.
const (
	discoveryPath = "/.well-known/openid-configuration"
	jwksPath      = "/openid/v1/jwks"
	// maxDocumentBytes bounds what is parsed from either endpoint.
	maxDocumentBytes = 1 << 20
)

// getter fetches an absolute API path (client-go's REST client; a fake in tests).
type getter func(ctx context.Context, path string) ([]byte, error)

// keySet is one fetched JWKS with the issuer the discovery document named.
type keySet struct {
	issuer  string
	byKID   map[string][]jose.JSONWebKey
	all     []jose.JSONWebKey
	fetched time.Time
}

// issuerKeys holds the cluster's service-account signing keys: fetched in the background
// at start, refreshed every refreshInterval, and fetched again (at most once per
// minRefetch, concurrent callers sharing one fetch) when a token names a key it does not
// know - how a key rotation is followed without a restart.
type issuerKeys struct {
	refreshInterval time.Duration
	minRefetch      time.Duration
	now             func() time.Time
	// onFetch counts fetches by result ("ok", "error").
	onFetch func(result string)

	set    atomic.Pointer[keySet]
	flight singleflight.Group

	mu        sync.Mutex
	get       getter          // nil until the extension starts
	base      context.Context // fetches end with it (Shutdown)
	closed    bool
	wg        sync.WaitGroup // fetches in flight
	lastFetch time.Time      // last attempt, successful or not
	lastErr   error
}

func newIssuerKeys(base context.Context, refreshInterval, minRefetch time.Duration, now func() time.Time, onFetch func(string)) *issuerKeys {
	if onFetch == nil {
		onFetch = func(string) {}
	}
	return &issuerKeys{base: base, refreshInterval: refreshInterval, minRefetch: minRefetch, now: now, onFetch: onFetch}
}

// setGetter installs the API client (Start).
func (k *issuerKeys) setGetter(g getter) {
	k.mu.Lock()
	k.get = g
	k.mu.Unlock()
}

// close waits for fetches in flight (their base context is cancelled first) and makes
// every later refetch a no-op.
func (k *issuerKeys) close() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.wg.Wait()
}

// current is the last key set fetched (nil before the first success).
func (k *issuerKeys) current() *keySet { return k.set.Load() }

// refetch fetches the keys again unless a fetch was attempted less than minRefetch ago
// (then it returns at once, false). Concurrent callers share one fetch. It reports whether
// a fetch was made and succeeded.
func (k *issuerKeys) refetch(ctx context.Context) bool {
	k.mu.Lock()
	if !k.lastFetch.IsZero() && k.now().Sub(k.lastFetch) < k.minRefetch {
		k.mu.Unlock()
		return false
	}
	k.mu.Unlock()
	ch := k.flight.DoChan("fetch", func() (any, error) {
		k.mu.Lock()
		get := k.get
		if k.closed || get == nil || (!k.lastFetch.IsZero() && k.now().Sub(k.lastFetch) < k.minRefetch) {
			k.mu.Unlock()
			return false, nil
		}
		k.lastFetch = k.now()
		k.wg.Add(1)
		k.mu.Unlock()
		defer k.wg.Done()
		// Not the caller's context: a fetch shared by many requests outlives the first.
		fctx, cancel := context.WithTimeout(k.base, 10*time.Second)
		defer cancel()
		err := k.fetch(fctx, get)
		k.mu.Lock()
		k.lastErr = err
		k.mu.Unlock()
		return err == nil, nil
	})
	select {
	case r := <-ch:
		return r.Val.(bool)
	case <-ctx.Done():
		return false
	}
}

// lastError is the error of the last fetch (nil after a success).
func (k *issuerKeys) lastError() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastErr
}

// fetch reads the discovery document and the JWKS and installs them.
func (k *issuerKeys) fetch(ctx context.Context, get getter) error {
	err := func() error {
		raw, err := get(ctx, discoveryPath)
		if err != nil {
			return fmt.Errorf("GET %s: %w", discoveryPath, err)
		}
		if len(raw) > maxDocumentBytes {
			return fmt.Errorf("GET %s: document larger than %d bytes", discoveryPath, maxDocumentBytes)
		}
		var disc struct {
			Issuer string   `json:"issuer"`
			Algs   []string `json:"id_token_signing_alg_values_supported"`
		}
		if err := json.Unmarshal(raw, &disc); err != nil {
			return fmt.Errorf("GET %s: %w", discoveryPath, err)
		}
		if disc.Issuer == "" {
			return fmt.Errorf("GET %s: no issuer", discoveryPath)
		}
		raw, err = get(ctx, jwksPath)
		if err != nil {
			return fmt.Errorf("GET %s: %w", jwksPath, err)
		}
		if len(raw) > maxDocumentBytes {
			return fmt.Errorf("GET %s: document larger than %d bytes", jwksPath, maxDocumentBytes)
		}
		var jwks jose.JSONWebKeySet
		if err := json.Unmarshal(raw, &jwks); err != nil {
			return fmt.Errorf("GET %s: %w", jwksPath, err)
		}
		set := &keySet{issuer: disc.Issuer, byKID: map[string][]jose.JSONWebKey{}, fetched: k.now()}
		for _, key := range jwks.Keys {
			// Public signing keys only (the API server publishes nothing else).
			if !key.Valid() || !key.IsPublic() || (key.Use != "" && key.Use != "sig") {
				continue
			}
			set.all = append(set.all, key)
			set.byKID[key.KeyID] = append(set.byKID[key.KeyID], key)
		}
		if len(set.all) == 0 {
			return fmt.Errorf("GET %s: no public signing key", jwksPath)
		}
		k.set.Store(set)
		return nil
	}()
	if err != nil {
		k.onFetch("error")
		return err
	}
	k.onFetch("ok")
	return nil
}

// run fetches at once, then every refreshInterval (retrying every minRefetch while
// fetches fail), until ctx ends.
func (k *issuerKeys) run(ctx context.Context, onError func(error)) {
	for {
		wait := k.refreshInterval
		k.mu.Lock()
		k.lastFetch = time.Time{} // a scheduled refresh is never rate-limited
		k.mu.Unlock()
		k.refetch(ctx)
		if err := k.lastError(); err != nil {
			onError(err)
			wait = k.minRefetch
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// errNoKey: the key set has no key the token may be verified with.
var errNoKey = errors.New("no key for the token's kid")

// keysFor returns the keys a token with kid may be verified with: those with that key ID
// (every key when the token names none).
func (s *keySet) keysFor(kid string) ([]jose.JSONWebKey, error) {
	if kid == "" {
		return s.all, nil
	}
	if ks := s.byKID[kid]; len(ks) > 0 {
		return ks, nil
	}
	return nil, errNoKey
}
