// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func podUID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// benchPods lists agent-0..n-1 (on node-<i/1>) in the fixture's pod watch.
func benchPods(tb testing.TB, lf *localFixture, n int) {
	tb.Helper()
	list := make([]any, 0, n)
	for i := range n {
		list = append(list, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-" + strconv.Itoa(i), Namespace: "netpulse", UID: types.UID(podUID(i))},
			Spec: corev1.PodSpec{ServiceAccountName: "netpulse-agent", NodeName: "node-" + strconv.Itoa(i)}})
	}
	st := &accountStore{ap: lf.a.verifier.pods.accounts["netpulse/netpulse-agent"]}
	require.NoError(tb, st.Replace(list, "1"))
}

func benchToken(tb testing.TB, lf *localFixture, k issuerKey, i int) string {
	return sign(tb, k, podClaims(lf.now, time.Hour, "agent-"+strconv.Itoa(i), podUID(i), "node-"+strconv.Itoa(i)))
}

// benchAuth authenticates tokens round-robin; with cache.max_entries 1 and two or more
// tokens every request misses the cache.
func benchAuth(b *testing.B, lf *localFixture, tokens []string) {
	headers := make([]map[string][]string, len(tokens))
	for i, tok := range tokens {
		headers[i] = bearer(tok)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := lf.a.Authenticate(ctx, headers[i%len(headers)]); err != nil {
			b.Fatal(err)
		}
	}
}

// A token in the cache: a hash, an LRU hit and the pod check.
func BenchmarkAuthenticateCached(b *testing.B) {
	lf := newLocalFixture(b, nil)
	benchPods(b, lf, 1)
	benchAuth(b, lf, []string{benchToken(b, lf, lf.key, 0)})
	require.Zero(b, lf.rv.calls.Load())
}

// A token not in the cache, verified locally: the JWS signature (RSA-2048 as the API
// server's default key, or ECDSA P-256), the claims and the pod check.
func BenchmarkAuthenticateLocal(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256"} {
		b.Run(alg, func(b *testing.B) {
			lf := newLocalFixture(b, func(c *Config) { c.Cache.MaxEntries = 1 })
			if alg == "ES256" {
				lf.key = newECKey(b, "key-ec")
				lf.iss.publish(lf.key)
				lf.advance(time.Minute)
				require.True(b, lf.a.verifier.keys.refetch(context.Background()))
			}
			benchPods(b, lf, 2)
			benchAuth(b, lf, []string{benchToken(b, lf, lf.key, 0), benchToken(b, lf, lf.key, 1)})
			require.Zero(b, lf.rv.calls.Load())
		})
	}
}

// The review path with an in-process reviewer that answers at once: only the extension's
// own cost of a review (the API round trip and the API server's verification come on top;
// integrationtest's BenchmarkRealAPI measures those).
func BenchmarkAuthenticateReviewInProcess(b *testing.B) {
	f := newFixture(b, func(c *Config) { c.Cache.MaxEntries = 1 })
	var tokens []string
	for i := range 2 {
		st := podStatus("netpulse", "netpulse-agent", "agent-"+strconv.Itoa(i), podUID(i), "node-1")
		tok := fakeJWT(b, map[string]any{"exp": f.now.Add(time.Hour).Unix(), "sub": st.User.Username, "aud": []string{audience}, "jti": strconv.Itoa(i)})
		f.rv.statuses[tok] = st
		tokens = append(tokens, tok)
	}
	benchAuth(b, &localFixture{fixture: f}, tokens)
}

// TestBenchLocalVerification prints BENCH lines (opt-in: NETPULSE_BENCH=1): the costs of
// the three paths against each other, and 65,000 distinct identities verified for the
// first time (a gateway failover or rollout: every agent reconnects) with the issuer's key
// rotated half-way, then again from the cache.
//
//	NETPULSE_BENCH=1 go test -run TestBenchLocalVerification -v ./extension/k8stokenauthextension/
func TestBenchLocalVerification(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") != "1" {
		t.Skip("opt-in benchmark: set NETPULSE_BENCH=1")
	}
	per := func(r testing.BenchmarkResult) float64 { return float64(r.T.Nanoseconds()) / float64(r.N) }
	cached := testing.Benchmark(BenchmarkAuthenticateCached)
	var rs, es testing.BenchmarkResult
	rs = testing.Benchmark(func(b *testing.B) {
		lf := newLocalFixture(b, func(c *Config) { c.Cache.MaxEntries = 1 })
		benchPods(b, lf, 2)
		benchAuth(b, lf, []string{benchToken(b, lf, lf.key, 0), benchToken(b, lf, lf.key, 1)})
	})
	es = testing.Benchmark(func(b *testing.B) {
		lf := newLocalFixture(b, func(c *Config) { c.Cache.MaxEntries = 1 })
		lf.key = newECKey(b, "key-ec")
		lf.iss.publish(lf.key)
		lf.advance(time.Minute)
		require.True(b, lf.a.verifier.keys.refetch(context.Background()))
		benchPods(b, lf, 2)
		benchAuth(b, lf, []string{benchToken(b, lf, lf.key, 0), benchToken(b, lf, lf.key, 1)})
	})
	review := testing.Benchmark(BenchmarkAuthenticateReviewInProcess)
	fmt.Printf("BENCH k8s_token_auth_cached ns/op=%.0f allocs/op=%d\n", per(cached), cached.AllocsPerOp())
	fmt.Printf("BENCH k8s_token_auth_local_rs256 ns/op=%.0f allocs/op=%d ratio_to_cached=%.1fx\n", per(rs), rs.AllocsPerOp(), per(rs)/per(cached))
	fmt.Printf("BENCH k8s_token_auth_local_es256 ns/op=%.0f allocs/op=%d ratio_to_cached=%.1fx\n", per(es), es.AllocsPerOp(), per(es)/per(cached))
	fmt.Printf("BENCH k8s_token_auth_review_in_process ns/op=%.0f allocs/op=%d ratio_local_rs256_to_it=%.2fx (no API round trip in it)\n",
		per(review), review.AllocsPerOp(), per(rs)/per(review))

	// 65,000 identities. ES256: signing 65,000 RS256 tokens here would take a minute, and
	// an ES256 verification costs more than an RS256 one (above), so this is the dearer case.
	const n = 65_000
	lf := newLocalFixture(t, func(c *Config) { c.Cache.MaxEntries = 100_000 })
	k1, k2 := newECKey(t, "key-1"), newECKey(t, "key-2")
	lf.iss.publish(k1)
	lf.advance(time.Minute)
	require.True(t, lf.a.verifier.keys.refetch(context.Background()))
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	headers := make([]map[string][]string, n)
	for i := range n {
		k := k1
		if i >= n/2 {
			k = k2 // signed with the new key: the issuer rotated half-way
		}
		headers[i] = bearer(benchToken(t, lf, k, i))
	}
	h0 := heap()
	benchPods(t, lf, n)
	h1 := heap()
	fetches := lf.iss.fetches.Load()
	ctx := context.Background()
	var rotateAt time.Duration
	start := time.Now()
	for i := range n {
		if i == n/2 {
			lf.iss.publish(k1, k2)
			lf.advance(11 * time.Second) // past min_refetch_interval
			rotateAt = time.Since(start)
		}
		if _, err := lf.a.Authenticate(ctx, headers[i]); err != nil {
			t.Fatal(i, err)
		}
	}
	first := time.Since(start)
	h2 := heap()
	start = time.Now()
	for i := range n {
		if _, err := lf.a.Authenticate(ctx, headers[i]); err != nil {
			t.Fatal(i, err)
		}
	}
	again := time.Since(start)
	require.Zero(t, lf.rv.calls.Load(), "no TokenReview")
	reasons := lf.requests(t)
	require.EqualValues(t, n, reasons["accepted/verified"])
	require.EqualValues(t, n, reasons["accepted/cached"])
	fmt.Printf("BENCH k8s_token_auth_65000_first_contact total=%.2fs per_identity=%.0fus rotation_at=%.2fs key_fetches=%d token_reviews=%d\n",
		first.Seconds(), float64(first.Microseconds())/n, rotateAt.Seconds(), lf.iss.fetches.Load()-fetches, lf.rv.calls.Load())
	fmt.Printf("BENCH k8s_token_auth_65000_cached total=%.3fs per_request=%.0fns ratio_first_to_cached=%.0fx\n",
		again.Seconds(), float64(again.Nanoseconds())/n, first.Seconds()/again.Seconds())
	fmt.Printf("BENCH k8s_token_auth_65000_memory pod_watch=%.1fMB (%.0fB/pod) cache=%.1fMB (%.0fB/identity, cache.max_entries 100000)\n",
		float64(h1-h0)/1e6, float64(h1-h0)/n, float64(h2-h1)/1e6, float64(h2-h1)/n)
	runtime.KeepAlive(headers)
}
