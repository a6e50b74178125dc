// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// peerLimiter bounds the TokenReviews each peer (the caller's IP address) may cause for
// tokens the gateway does not know yet: a token bucket (peer_reviews.rate, .burst) and one
// review in flight at a time. A peer sending distinct tokens can therefore hold at most one
// of the max_concurrent_reviews slots and spend at most its rate of the API budget;
// everyone else's reviews never queue behind its. Tokens with an accepted entry (fresh or
// stale) are not counted: an agent renewing its review is never limited by anyone.
// Peers are remembered in an LRU bounded like the cache (an evicted peer starts again
// with a full bucket). Safe for concurrent use.
type peerLimiter struct {
	rate  rate.Limit
	burst int

	mu    sync.Mutex
	peers *lru.Cache[string, *peerState]
}

type peerState struct {
	lim      *rate.Limiter
	inFlight int
}

func newPeerLimiter(r float64, burst, maxPeers int) *peerLimiter {
	c, err := lru.New[string, *peerState](maxPeers)
	if err != nil {
		panic(err) // maxPeers is validated >= 1
	}
	return &peerLimiter{rate: rate.Limit(r), burst: burst, peers: c}
}

// acquire takes one review for peer at now: false when its bucket is empty or it has a
// review in flight. Every true must be followed by release.
func (p *peerLimiter) acquire(peer string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.peers.Get(peer)
	if !ok {
		st = &peerState{lim: rate.NewLimiter(p.rate, p.burst)}
		p.peers.Add(peer, st)
	}
	if st.inFlight > 0 || !st.lim.AllowN(now, 1) {
		return false
	}
	st.inFlight++
	return true
}

// release ends a review acquire allowed.
func (p *peerLimiter) release(peer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.peers.Peek(peer); ok && st.inFlight > 0 {
		st.inFlight--
	}
}
