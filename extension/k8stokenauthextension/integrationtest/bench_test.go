// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/netpulse/netpulse/extension/k8stokenauthextension"
	"github.com/netpulse/netpulse/extension/k8stokenauthextension/internal/metadata"
	"github.com/netpulse/netpulse/extension/k8stokenauthextension/k8stokenauthtest"
	"github.com/netpulse/netpulse/internal/kubeclient"
)

// benchRealAPI authenticates two real pod-bound tokens round-robin with cache.max_entries
// 1, so every request misses the cache: in review mode each is a TokenReview on the real
// API server (client rate limit lifted), in local mode a local verification.
func benchRealAPI(b *testing.B, mode string) {
	if cp == nil {
		b.Skip("needs the local control plane (not -short)")
	}
	ctx := context.Background()
	f := k8stokenauthextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*k8stokenauthextension.Config)
	cfg.Config = kubeclient.Config{AuthType: kubeclient.AuthKubeConfig, Kubeconfig: gatewayKC, QPS: 10_000, Burst: 10_000}
	cfg.Audience, cfg.ServiceAccounts = audience, []string{ns + "/" + agentSA}
	cfg.Verification = mode
	cfg.Cache.MaxEntries = 1
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(b, err)
	require.NoError(b, ext.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(b, ext.Shutdown(ctx)) }()
	auth := ext.(extensionauth.Server)
	var headers []map[string][]string
	for i := range 2 {
		pod, err := k8stokenauthtest.CreateAgentPod(ctx, admin, ns, agentSA, fmt.Sprintf("agent-bench-%s-%d-%d", mode, i, time.Now().UnixNano()), "node-bench")
		require.NoError(b, err)
		tok, err := k8stokenauthtest.PodToken(ctx, admin, pod, []string{audience}, 600)
		require.NoError(b, err)
		headers = append(headers, map[string][]string{"authorization": {"Bearer " + tok}})
	}
	// Warm: keys fetched and both pods in the watch (local), connections open (both).
	require.Eventually(b, func() bool {
		for _, h := range headers {
			if _, err := auth.Authenticate(ctx, h); err != nil {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond)
	time.Sleep(time.Second) // the watch has both pods (local verification, not fallback)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := auth.Authenticate(ctx, headers[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRealAPIReview(b *testing.B) { benchRealAPI(b, k8stokenauthextension.VerificationReview) }
func BenchmarkRealAPILocal(b *testing.B)  { benchRealAPI(b, k8stokenauthextension.VerificationLocal) }

// TestBenchRealAPI prints the BENCH line (opt-in: NETPULSE_BENCH=1): a token not in the
// cache verified locally against one reviewed by the real kube-apiserver, in the same run.
//
//	NETPULSE_BENCH=1 go test -run TestBenchRealAPI -v ./extension/k8stokenauthextension/integrationtest/
func TestBenchRealAPI(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") != "1" {
		t.Skip("opt-in benchmark: set NETPULSE_BENCH=1")
	}
	served := func() int {
		n, err := k8stokenauthtest.TokenReviewsServed(context.Background(), admin)
		require.NoError(t, err)
		return n
	}
	per := func(r testing.BenchmarkResult) float64 { return float64(r.T.Nanoseconds()) / float64(r.N) }
	before := served()
	review := testing.Benchmark(BenchmarkRealAPIReview)
	mid := served()
	local := testing.Benchmark(BenchmarkRealAPILocal)
	after := served()
	fmt.Printf("BENCH k8s_token_auth_real_api review=%.0fus/token (%d TokenReviews served) local=%.0fus/token (%d TokenReviews served) ratio=%.1fx\n",
		per(review)/1e3, mid-before, per(local)/1e3, after-mid, per(review)/per(local))
}
