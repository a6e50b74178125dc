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
