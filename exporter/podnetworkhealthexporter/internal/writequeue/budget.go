// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package writequeue

import (
	"math"
	"sync"
	"time"
)

// Budget is the exporter's one API write budget: a token bucket over the caller's clock.
//
// It counts API requests, not objects: a create followed by an update of the status
// subresource takes 2 tokens, a spec fix-up one more, a retry after a conflict takes its
// tokens again; reads served from an informer cache take none. Every writer of the exporter
// (objects, Events, node and pod conditions) takes its tokens from the same Budget.
//
// Budget is safe for concurrent use. Time going backwards adds no tokens.
type Budget struct {
	mu     sync.Mutex
	rate   float64 // tokens per second; <= 0: unlimited
	burst  float64
	tokens float64
	last   time.Time
}

// NewBudget allows perSecond requests per second on average and burst at once (at least 1).
// The bucket starts full. perSecond <= 0 or +Inf means unlimited.
func NewBudget(perSecond float64, burst int) *Budget {
	b := max(float64(burst), 1)
	if math.IsInf(perSecond, 1) || math.IsNaN(perSecond) {
		perSecond = 0
	}
	return &Budget{rate: perSecond, burst: b, tokens: b}
}

// Rate is the average requests per second (0: unlimited).
func (b *Budget) Rate() float64 { return b.rate }

// Burst is the bucket size.
func (b *Budget) Burst() int { return int(b.burst) }

// Take takes one token if one is available at now; otherwise it takes nothing and says how
// long to wait before one is.
func (b *Budget) Take(now time.Time) (ok bool, wait time.Duration) {
	if b.rate <= 0 {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, b.waitLocked()
}

// Delay is how long from now until Take would succeed, without taking anything (0: now).
// A worker waits for it before it picks the next item, so the item it picks is the most
// urgent one at the time the budget allows a write.
func (b *Budget) Delay(now time.Time) time.Duration {
	if b.rate <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	if b.tokens >= 1 {
		return 0
	}
	return b.waitLocked()
}

func (b *Budget) advance(now time.Time) {
	if b.last.IsZero() {
		b.last = now
		return
	}
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+b.rate*now.Sub(b.last).Seconds())
		b.last = now
	}
}

func (b *Budget) waitLocked() time.Duration {
	return max(time.Duration(math.Ceil((1-b.tokens)/b.rate*float64(time.Second))), 1)
}

// HeartbeatInterval stretches the configured heartbeat so the heartbeats of all objects
// use at most share (0..1] of a budget of budgetPerSecond requests: the result is
// max(configured, objects / (budgetPerSecond*share) seconds), rounded up to a second. A
// heartbeat costs one request (a status update), so at 5 requests/s and share 0.5, 2,000
// objects (N=1,000 nodes) need 13m20s and 10,000 objects (N=5,000) 1h6m40s. Without a
// usable budget or share it returns configured.
func HeartbeatInterval(configured time.Duration, objects int, budgetPerSecond, share float64) time.Duration {
	if objects <= 0 || !(budgetPerSecond > 0) || !(share > 0) || math.IsInf(budgetPerSecond, 1) {
		return configured
	}
	share = min(share, 1)
	secs := math.Ceil(float64(objects) / (budgetPerSecond * share))
	if secs >= float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return max(configured, time.Duration(secs)*time.Second)
}
