// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package writequeue

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// Budget is the exporter's one API write budget: a token bucket over the caller's clock
// (golang.org/x/time/rate's Limiter; Budget adds only the "how long until a token" the
// writer's workers wait for before they pick an item).
//
// It counts API requests, not objects: a create followed by an update of the status
// subresource takes 2 tokens, a spec fix-up one more, a retry after a conflict takes its
// tokens again; reads served from an informer cache take none. Every writer of the exporter
// (objects, Events, node and pod conditions) takes its tokens from the same Budget.
//
// Budget is safe for concurrent use.
type Budget struct {
	lim *rate.Limiter
}

// NewBudget allows perSecond requests per second on average and burst at once (at least 1).
// The bucket starts full. perSecond <= 0 or +Inf means unlimited.
func NewBudget(perSecond float64, burst int) *Budget {
	limit := rate.Limit(perSecond)
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		limit = rate.Inf
	}
	return &Budget{lim: rate.NewLimiter(limit, max(burst, 1))}
}

// Rate is the average requests per second (0: unlimited).
func (b *Budget) Rate() float64 {
	if b.lim.Limit() == rate.Inf {
		return 0
	}
	return float64(b.lim.Limit())
}

// Burst is the bucket size.
func (b *Budget) Burst() int { return b.lim.Burst() }

// Take takes one token if one is available at now; otherwise it takes nothing and says how
// long to wait before one is.
func (b *Budget) Take(now time.Time) (ok bool, wait time.Duration) {
	if b.lim.AllowN(now, 1) {
		return true, 0
	}
	return false, b.Delay(now)
}

// Delay is how long from now until Take would succeed, without taking anything (0: now).
// A worker waits for it before it picks the next item, so the item it picks is the most
// urgent one at the time the budget allows a write.
func (b *Budget) Delay(now time.Time) time.Duration {
	if b.lim.Limit() == rate.Inf {
		return 0
	}
	tokens := b.lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return max(time.Duration(math.Ceil((1-tokens)/float64(b.lim.Limit())*float64(time.Second))), 1)
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
