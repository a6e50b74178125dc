// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"google.golang.org/grpc/codes"
)

// from is a request context from peer ip (what the OTLP receivers put in client.Info).
func from(ip string) context.Context {
	return client.NewContext(context.Background(), client.Info{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
}

// garbage is a well-formed token (shape, audience, expiry and subject all pass the
// structural checks) that the API does not authenticate.
func (f *fixture) garbage(t *testing.T, i int) string {
	return fakeJWT(t, map[string]any{"exp": f.now.Add(time.Hour).Unix(), "aud": audience,
		"sub": "system:serviceaccount:netpulse:netpulse-agent", "jti": fmt.Sprint("garbage-", i)})
}

// #28 item 7: one peer sending distinct garbage tokens neither evicts the agents' accepted
// identities (nor their stale-if-error entries) nor gets its reviews ahead of theirs.
func TestGarbageTokensFromOnePeer(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Cache.MaxEntries = 8
		c.Cache.MaxNegativeEntries = 16
		c.Cache.MaxTTL = 5 * time.Minute
		c.Cache.StaleIfError = 10 * time.Minute
		c.MaxConcurrentReviews = 2
		c.PeerReviews = PeerReviewsConfig{Rate: 1, Burst: 3}
	})
	const agents = 5
	var toks []string
	for i := range agents {
		tok := f.token(t, fmt.Sprint("agent-", i), time.Hour, podStatus("netpulse", "netpulse-agent", fmt.Sprint("agent-", i), fmt.Sprint("uid-", i), "node-1"))
		toks = append(toks, tok)
		_, err := f.a.Authenticate(from(fmt.Sprint("10.0.0.", i+1)), bearer(tok))
		require.NoError(t, err)
	}
	require.EqualValues(t, agents, f.rv.calls.Load())

	attacker := from("10.0.9.9")
	limited := 0
	for i := range 1000 {
		_, err := f.a.Authenticate(attacker, bearer(f.garbage(t, i)))
		require.Error(t, err)
		if code(err) == codes.Unavailable {
			assert.Contains(t, err.Error(), reasonPeerLimited)
			limited++
		} else {
			assert.Equal(t, codes.Unauthenticated, code(err))
		}
		if i%100 == 99 {
			f.advance(time.Second) // 10 s in all: its bucket refills 10 times
		}
	}
	attackerReviews := f.rv.calls.Load() - agents
	assert.LessOrEqual(t, attackerReviews, int64(3+10), "burst, then the peer's rate")
	assert.Equal(t, 1000-int(attackerReviews), limited)
	assert.Equal(t, agents, f.a.cache.len(), "no accepted identity evicted")
	assert.LessOrEqual(t, f.a.neg.len(), 16, "rejections in their own bounded cache")

	// The agents are answered from the cache: no review, whatever the attacker did.
	for i, tok := range toks {
		_, err := f.a.Authenticate(from(fmt.Sprint("10.0.0.", i+1)), bearer(tok))
		require.NoError(t, err)
	}
	assert.EqualValues(t, agents+attackerReviews, f.rv.calls.Load())

	// Their stale-if-error entries survive too: past max_ttl, with the API down, every agent
	// is still accepted from what was reviewed before.
	f.advance(6 * time.Minute)
	f.rv.mu.Lock()
	f.rv.err = fmt.Errorf("connection refused")
	f.rv.mu.Unlock()
	for i, tok := range toks {
		_, err := f.a.Authenticate(from(fmt.Sprint("10.0.0.", i+1)), bearer(tok))
		require.NoError(t, err, "agent %d stale-if-error", i)
	}
	assert.EqualValues(t, agents, f.requests(t)["accepted/stale"])
}

// The attacker's reviews do not queue ahead of an agent's: while one of its reviews hangs it
// holds one review slot, and its next tokens are refused at once (peer_limited) instead of
// waiting for a slot, so a new agent's review finds one free.
func TestGarbageTokensDoNotQueueAheadOfAgents(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.MaxConcurrentReviews = 2
		c.PeerReviews = PeerReviewsConfig{Rate: 100, Burst: 100}
	})
	garbage := map[string]bool{}
	var toks []string
	for i := range 51 {
		tok := f.garbage(t, i)
		garbage[tok] = true
		toks = append(toks, tok)
	}
	f.rv.block = make(chan struct{})
	f.rv.blockIf = func(tok string) bool { return garbage[tok] } // the attacker's reviews hang
	attacker := from("10.0.9.9")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = f.a.Authenticate(attacker, bearer(toks[0]))
	}()
	require.Eventually(t, func() bool { return f.rv.inFlight.Load() == 1 }, 5*time.Second, time.Millisecond)
	for _, tok := range toks[1:] {
		ctx, cancel := context.WithTimeout(attacker, time.Second)
		start := time.Now()
		_, err := f.a.Authenticate(ctx, bearer(tok))
		cancel()
		require.Equal(t, codes.Unavailable, code(err))
		assert.Contains(t, err.Error(), reasonPeerLimited)
		assert.Less(t, time.Since(start), 500*time.Millisecond, "refused at once, not queued")
	}
	assert.EqualValues(t, 1, f.rv.inFlight.Load(), "one review slot held by the attacker, not both")

	// Two new agents, each its own peer, are reviewed at once: a slot is free.
	for i := range 2 {
		tok := f.token(t, fmt.Sprint("agent-new-", i), time.Hour, podStatus("netpulse", "netpulse-agent", fmt.Sprint("agent-new-", i), fmt.Sprint("uid-new-", i), "node-2"))
		ctx, cancel := context.WithTimeout(from(fmt.Sprint("10.0.1.", i+1)), time.Second)
		_, err := f.a.Authenticate(ctx, bearer(tok))
		cancel()
		require.NoError(t, err)
	}
	close(f.rv.block)
	<-done
}

// The structural checks reject, without a review, what the API would: no signing
// algorithm, another audience, another issuer (when known), a subject that is not an
// allowed service account. They never accept anything.
func TestStructuralChecksBeforeReview(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Issuer = "https://kubernetes.default.svc" })
	exp := f.now.Add(time.Hour).Unix()
	good := map[string]any{"exp": exp, "aud": []string{"other", audience}, "iss": "https://kubernetes.default.svc",
		"sub": "system:serviceaccount:netpulse:netpulse-agent"}
	with := func(k string, v any) string {
		c := map[string]any{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return fakeJWT(t, c)
	}
	enc := base64URL
	for name, tc := range map[string]struct {
		tok, reason string
	}{
		"alg none":          {enc(`{"alg":"none"}`) + "." + enc(`{"exp":`+fmt.Sprint(exp)+`}`) + ".c2ln", reasonMalformedToken},
		"no alg":            {enc(`{}`) + "." + enc(`{"exp":`+fmt.Sprint(exp)+`}`) + ".c2ln", reasonMalformedToken},
		"bad signature":     {enc(`{"alg":"RS256"}`) + "." + enc(`{"exp":`+fmt.Sprint(exp)+`}`) + ".!!", reasonMalformedToken},
		"no audience":       {with("aud", nil), reasonTokenRejected},
		"another audience":  {with("aud", "https://kubernetes.default.svc"), reasonTokenRejected},
		"aud not a string":  {with("aud", 7), reasonMalformedToken},
		"another issuer":    {with("iss", "https://evil.example"), reasonTokenRejected},
		"not an SA":         {with("sub", "alice"), reasonServiceAccount},
		"SA not allowed":    {with("sub", "system:serviceaccount:shop:web"), reasonServiceAccount},
		"no subject":        {with("sub", nil), reasonServiceAccount},
		"malformed subject": {with("sub", "system:serviceaccount:netpulse"), reasonServiceAccount},
	} {
		_, err := f.a.Authenticate(from("10.0.0.1"), bearer(tc.tok))
		require.Error(t, err, name)
		assert.Equal(t, codes.Unauthenticated, code(err), "%s: %v", name, err)
		assert.Contains(t, err.Error(), tc.reason, name)
	}
	assert.EqualValues(t, 0, f.rv.calls.Load(), "no review spent")
	assert.Equal(t, 0, f.a.neg.len(), "nothing cached for them")
	// The same claims with the right values get their review.
	_, err := f.a.Authenticate(from("10.0.0.1"), bearer(with("jti", "x")))
	require.Error(t, err)
	assert.EqualValues(t, 1, f.rv.calls.Load())
}

func base64URL(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
