// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package writequeue

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupOfKey: "g/<group>/<n>" is in <group>, anything else ungrouped.
func groupOfKey(key string, _ int) string {
	if rest, ok := strings.CutPrefix(key, "g/"); ok {
		g, _, _ := strings.Cut(rest, "/")
		return g
	}
	return ""
}

// fairnessRun drives q as the writer does (Pop, write, Done) while group "flood" keeps 16
// verdict keys pending at all times and groups a..e and ungrouped keys bring a verdict
// now and then, plus Events. It returns the most flood writes a group with a ready verdict
// waited through before it was served, the flood's verdict writes, and the Events written.
func fairnessRun(t *testing.T, q *Queue[int], seed uint64, pops int) (worst, flood, events int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed*3+1))
	now := t0
	pending := map[string]bool{} // verdict keys of groups a..e
	waiting := map[string]int{}  // group -> flood writes since it was last served while it had a ready verdict
	ready := func(g string) bool {
		for k := range pending {
			if groupOfKey(k, 0) == g {
				return true
			}
		}
		return false
	}
	for i := range 16 {
		q.Set(fmt.Sprintf("g/flood/%d", i), Verdict, 0, now)
	}
	n := 0
	for range pops {
		switch r := rng.IntN(10); {
		case r < 2:
			k := fmt.Sprintf("g/%c/%d", 'a'+rng.IntN(5), rng.IntN(3))
			if g := groupOfKey(k, 0); !ready(g) {
				waiting[g] = 0
			}
			pending[k] = true
			q.Set(k, Verdict, 0, now)
		case r < 3:
			q.Set(fmt.Sprintf("u/%d", rng.IntN(4)), Verdict, 0, now)
		case r < 4:
			n++
			q.Set(fmt.Sprintf("event/%d", n), Event, 0, now)
		}
		now = now.Add(200 * time.Millisecond) // the budget: 5 writes a second
		key, p, _, ok := q.Pop(now)
		if !ok {
			continue
		}
		q.Done(key)
		if p == Event {
			events++
			continue
		}
		switch g := groupOfKey(key, 0); g {
		case "flood":
			flood++
			for g := range waiting {
				if ready(g) {
					waiting[g]++
				}
			}
			q.Set(key, Verdict, 0, now) // it flips again at once
		case "":
		default:
			worst = max(worst, waiting[g])
			waiting[g] = 0
			delete(pending, key)
		}
	}
	return worst, flood, events
}

// One group flooding the Verdict lane (one compromised agent flipping its 16 pairs as fast
// as it can) delays another group's ready verdict by at most one of its writes, takes at
// most its share of the lane, and the Events lane flows. The control, the queue without
// Fair (strict FIFO within the lane, as before issue 40), fails each bound.
func TestVerdictLaneIsFairAmongSources(t *testing.T) {
	const pops = 3000 // 10 minutes at 5 writes a second
	for seed := range uint64(20) {
		worst, flood, events := fairnessRun(t, New[int](Fair(groupOfKey, NewShare(1, 16))), seed, pops)
		require.LessOrEqual(t, worst, 1, "seed %d: another source's verdict waited through %d flood writes", seed, worst)
		// 10 minutes: the burst and one a second.
		require.LessOrEqual(t, flood, 16+pops/5+1, "seed %d: the flood's writes", seed)
		require.Positive(t, events, "seed %d: no Event was written", seed)
	}
	worst, flood, events := fairnessRun(t, New[int](), 1, pops)
	t.Logf("without Fair: another source waited through %d flood writes; flood %d of %d writes; %d Events", worst, flood, pops, events)
	assert.Greater(t, worst, 1, "control")
	assert.Greater(t, flood, 16+pops/5+1, "control")
}

// Ungrouped verdicts (node and pod conditions) alternate with the groups' turns.
func TestUngroupedVerdictsAlternateWithGroups(t *testing.T) {
	q := New[int](Fair(groupOfKey, nil))
	for i := range 3 {
		q.Set(fmt.Sprintf("g/a/%d", i), Verdict, 0, t0)
		q.Set(fmt.Sprintf("g/b/%d", i), Verdict, 0, t0)
		q.Set(fmt.Sprintf("u/%d", i), Verdict, 0, t0)
	}
	q.Set("h", Heartbeat, 0, t0)
	var got []string
	for {
		k, _, _, ok := q.Pop(t0)
		if !ok {
			break
		}
		got = append(got, k)
		q.Done(k)
	}
	assert.Equal(t, []string{"u/0", "g/a/0", "u/1", "g/b/0", "u/2", "g/a/1", "g/b/1", "g/a/2", "g/b/2", "h"}, got)
}

// A group past its share waits, the less urgent lanes pass it, and NextReadyAt tells when
// it refills; nothing is dropped.
func TestShareHoldsAGroupAndLetsOtherLanesPass(t *testing.T) {
	q := New[int](Fair(groupOfKey, NewShare(1, 2)))
	for i := range 4 {
		q.Set(fmt.Sprintf("g/x/%d", i), Verdict, i, t0)
	}
	q.Set("e", Event, 0, t0)
	var got []string
	for range 3 {
		k, _, _, ok := q.Pop(t0)
		require.True(t, ok)
		got = append(got, k)
		q.Done(k)
	}
	assert.Equal(t, []string{"g/x/0", "g/x/1", "e"}, got)
	_, _, _, ok := q.Pop(t0)
	assert.False(t, ok, "x is past its share: its share holds it")
	next, ok := q.NextReadyAt(t0, nil)
	require.True(t, ok)
	assert.Equal(t, t0.Add(time.Second), next, "one token a second")
	k, _, _, ok := q.Pop(next)
	require.True(t, ok)
	assert.Equal(t, "g/x/2", k)
	assert.Equal(t, 1, q.Len()+q.InFlight()-1, "g/x/3 still pending")
}

// The share's state is the groups below a full bucket: swept as it grows, it holds the
// groups that wrote within the last burst/rate seconds.
func TestShareStateIsBounded(t *testing.T) {
	s := NewShare(1, 16)
	now := t0
	for i := range 100_000 {
		s.Take(fmt.Sprint("src-", i), now)
		now = now.Add(10 * time.Millisecond)
	}
	// 16 s of groups at 100 a second, at most twice that before a sweep.
	assert.LessOrEqual(t, s.Groups(), 2*1600+64)
	assert.False(t, s.Allow("src-99999", now) && s.tokens("src-99999", now) >= 16, "a recent writer keeps its state")
}

// TestFairQueueKeepsTheQueueRules drives a Fair queue (groups and a share) and the model
// with the same random operations. The order differs within the Verdict lane by design;
// everything else must agree: what is pending, in flight, by priority, dropped, and every
// Pop hands out a ready key with its newest value and the most urgent priority it may (a
// more urgent ready item is only ever a grouped verdict past its share). Nothing is lost:
// draining at the end pops every pending key once.
func TestFairQueueKeepsTheQueueRules(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, seed*11+3))
		maxItems := 0
		if seed%2 == 1 {
			maxItems = 1 + rng.IntN(10)
		}
		share := NewShare(2, 1+rng.IntN(3))
		q := New[int](MaxItems(maxItems), Fair(groupOfKey, share))
		m := newModel(maxItems)
		now := t0
		v := 0
		keyOf := func() string {
			n := rng.IntN(12)
			if n < 8 {
				return fmt.Sprintf("g/%d/%d", n%3, n)
			}
			return fmt.Sprintf("u/%d", n)
		}
		checkPop := func(step string) {
			k, p, got, ok := q.Pop(now)
			for _, it := range m.pending {
				if !it.parked && !it.retryAt.IsZero() && !it.retryAt.After(now) {
					it.retryAt = time.Time{}
				}
			}
			if !ok {
				for mk, it := range m.pending {
					if it.parked || !it.retryAt.IsZero() {
						continue
					}
					g := groupOfKey(mk, 0)
					require.True(t, it.p == Verdict && g != "" && !share.Allow(g, now), "%s: %s was ready", step, mk)
				}
				return
			}
			it := m.pending[k]
			require.NotNil(t, it, "%s: %s popped but not pending", step, k)
			require.False(t, it.parked || !it.retryAt.IsZero(), "%s: %s not ready", step, k)
			require.Equal(t, it.p, p, step)
			require.Equal(t, it.v, got, step)
			for mk, o := range m.pending {
				if o.parked || !o.retryAt.IsZero() || o.p >= p {
					continue
				}
				g := groupOfKey(mk, 0)
				require.True(t, o.p == Verdict && g != "" && !share.Allow(g, now) || (p == Verdict && o.p == Verdict),
					"%s: %s (%v) was ready before %s (%v)", step, mk, o.p, k, p)
			}
			delete(m.pending, k)
			m.inflight[k] = it
		}
		for op := range 600 {
			v++
			key := keyOf()
			p := Priority(rng.IntN(NumPriorities))
			if rng.IntN(2) == 0 {
				p = Verdict
			}
			step := fmt.Sprintf("seed %d op %d", seed, op)
			switch r := rng.IntN(100); {
			case r < 40:
				gd, gdrop := q.Set(key, p, v, now)
				wd, wdrop := m.set(key, p, v)
				require.Equal(t, wdrop, gdrop, step)
				require.Equal(t, wd, gd, step)
			case r < 70:
				now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
				checkPop(step)
			case r < 82:
				for k := range m.inflight {
					q.Done(k)
					m.done(k)
					break
				}
			default:
				k := key
				for ik := range m.inflight {
					if rng.IntN(5) > 0 {
						k = ik
					}
					break
				}
				var nb time.Time
				if rng.IntN(3) > 0 {
					nb = now.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
				}
				gd, gdrop := q.Retry(k, p, v, nb)
				wd, wdrop := m.retry(k, p, v, nb)
				require.Equal(t, wdrop, gdrop, step)
				require.Equal(t, wd, gd, step)
			}
			require.Equal(t, len(m.pending), q.Len(), step)
			require.Equal(t, len(m.inflight), q.InFlight(), step)
			var byP [NumPriorities]int
			for _, it := range m.pending {
				byP[it.p]++
			}
			require.Equal(t, byP, q.LenByPriority(), step)
			require.Equal(t, m.dropped, q.DroppedByPriority(), step)
		}
		for k := range m.inflight {
			q.Done(k)
			m.done(k)
		}
		for i := 0; len(m.pending) > 0; i++ {
			require.Less(t, i, 10_000, "seed %d: the queue does not drain", seed)
			next, ok := q.NextReadyAt(now, nil)
			require.True(t, ok, "seed %d: pending but nothing will be ready", seed)
			if next.After(now) {
				now = next
			}
			before := len(m.pending)
			checkPop(fmt.Sprintf("seed %d drain %d", seed, i))
			for k := range m.inflight {
				q.Done(k)
				m.done(k)
			}
			require.LessOrEqual(t, len(m.pending), before)
		}
		require.Zero(t, q.Len())
	}
}
