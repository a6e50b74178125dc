// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package integrationtest runs the k8s_token_auth extension behind the collector's real OTLP
// gRPC receiver (TLS, auth) against the project's real local control plane: tokens come
// from the TokenRequest API bound to pods on Node objects, reviews go to the real
// TokenReview API with the gateway's least-privilege identity from deploy/rbac.
package integrationtest

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/extension/k8stokenauthextension"
	"github.com/netpulse/netpulse/extension/k8stokenauthextension/internal/metadata"
	"github.com/netpulse/netpulse/extension/k8stokenauthextension/k8stokenauthtest"
	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

const (
	ns       = "netpulse"
	agentSA  = "netpulse-agent"
	audience = "netpulse-gateway"
)

var (
	cp        *kubetest.ControlPlane
	admin     *kubernetes.Clientset
	gatewayKC string // the gateway service account, bound to deploy/rbac only
	pki       *k8stokenauthtest.TLS
	tmpDir    string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	ctx := context.Background()
	var err error
	cp, err = kubetest.Start(ctx, kubetest.Options{})
	if err != nil {
		fmt.Println("FAIL: start local control plane:", err)
		os.Exit(1)
	}
	code := func() int {
		defer cp.Stop()
		admin, _ = cp.Clientset()
		if err := kubetest.Apply(ctx, cp.Config, kubetest.DeployPath("agent-gateway", "namespace.yaml"), kubetest.DeployPath("rbac")); err != nil {
			fmt.Println("FAIL: apply deploy/:", err)
			return 1
		}
		saCfg, err := cp.ServiceAccountConfig(ctx, ns, "netpulse-gateway")
		if err != nil {
			fmt.Println("FAIL:", err)
			return 1
		}
		tmpDir, _ = os.MkdirTemp("", "k8stokenauth-test-")
		defer os.RemoveAll(tmpDir)
		gatewayKC = filepath.Join(tmpDir, "gateway.kubeconfig")
		if err := kubetest.WriteKubeconfig(saCfg, gatewayKC); err != nil {
			fmt.Println("FAIL:", err)
			return 1
		}
		if pki, err = k8stokenauthtest.WriteTLS(tmpDir); err != nil {
			fmt.Println("FAIL:", err)
			return 1
		}
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("k8s.io/klog/v2.(*loggingT).flushDaemon"),
			goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start")); err != nil {
			fmt.Println("FAIL: goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func requireCluster(t *testing.T) {
	t.Helper()
	if cp == nil {
		t.Fatal("the local control plane did not start (see TestMain)")
	}
}

// infoSink records the client information each accepted request reached the pipeline with.
type infoSink struct {
	mu    sync.Mutex
	infos []client.Info
}

func (s *infoSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *infoSink) ConsumeMetrics(ctx context.Context, _ pmetric.Metrics) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.infos = append(s.infos, client.FromContext(ctx))
	return nil
}

func (s *infoSink) received() []client.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]client.Info(nil), s.infos...)
}

type gateway struct {
	addr string
	sink *infoSink
	tt   *componenttest.Telemetry
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// startGateway runs the OTLP gRPC receiver (TLS) into a sink; with auth, behind a
// k8s_token_auth extension configured as the gateway would be (mutate adjusts it).
func startGateway(t *testing.T, auth bool, mutate func(*k8stokenauthextension.Config)) *gateway {
	t.Helper()
	requireCluster(t)
	ctx := context.Background()
	g := &gateway{addr: freeAddr(t), sink: &infoSink{}, tt: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, g.tt.Shutdown(context.Background())) })
	host := &k8stokenauthtest.Host{Extensions: map[component.ID]component.Component{}}
	grpcCfg := map[string]any{
		"endpoint":         g.addr,
		"tls":              map[string]any{"cert_file": pki.CertFile, "key_file": pki.KeyFile},
		"include_metadata": true,
	}
	if auth {
		f := k8stokenauthextension.NewFactory()
		cfg := f.CreateDefaultConfig().(*k8stokenauthextension.Config)
		cfg.Config = kubeclient.Config{AuthType: kubeclient.AuthKubeConfig, Kubeconfig: gatewayKC, QPS: 20, Burst: 40}
		cfg.Audience = audience
		cfg.ServiceAccounts = []string{ns + "/" + agentSA}
		if mutate != nil {
			mutate(cfg)
		}
		require.NoError(t, cfg.Validate())
		set := extensiontest.NewNopSettings(metadata.Type)
		set.TelemetrySettings = g.tt.NewTelemetrySettings()
		ext, err := f.Create(ctx, set, cfg)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
		require.Less(t, time.Since(start), time.Second, "Start returns at once")
		t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
		host.Extensions[component.NewID(metadata.Type)] = ext
		grpcCfg["auth"] = map[string]any{"authenticator": "k8s_token_auth"}
	}
	rf := otlpreceiver.NewFactory()
	rcfg := rf.CreateDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"protocols": map[string]any{"grpc": grpcCfg}}).Unmarshal(rcfg))
	recv, err := rf.CreateMetrics(ctx, receivertest.NewNopSettings(rf.Type()), rcfg, g.sink)
	require.NoError(t, err)
	require.NoError(t, recv.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, recv.Shutdown(context.Background())) })
	return g
}

func sample() pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("netpulse.probe.status")
	m.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	return md
}

func tlsCreds() credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{RootCAs: pki.CAPool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
}

// export sends one OTLP metrics request, with "authorization: Bearer <token>" unless
// token is empty.
func export(addr string, creds credentials.TransportCredentials, token string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if token != "" {
		ctx = grpcmd.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	_, err = pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(sample()))
	return err
}

func counter(t *testing.T, tt *componenttest.Telemetry, name, key string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := tt.GetMetric(name)
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key(key))
		out[v.AsString()] += dp.Value
	}
	return out
}

func agentPod(t *testing.T, name, node string) *corev1.Pod {
	t.Helper()
	pod, err := k8stokenauthtest.CreateAgentPod(context.Background(), admin, ns, agentSA, name, node)
	require.NoError(t, err)
	return pod
}

func podToken(t *testing.T, pod *corev1.Pod, aud ...string) string {
	t.Helper()
	tok, err := k8stokenauthtest.PodToken(context.Background(), admin, pod, aud, 600)
	require.NoError(t, err)
	return tok
}

// An agent's projected token (bound to its pod, audience the gateway) is accepted, and the
// pipeline sees the identity the token carries: namespace, service account, pod name and
// UID, node - as auth data and as the reserved metadata keys.
func TestPodBoundTokenAccepted(t *testing.T) {
	g := startGateway(t, true, nil)
	pod := agentPod(t, "agent-ok", "node-ok")
	require.NoError(t, export(g.addr, tlsCreds(), podToken(t, pod, audience)))

	got := g.sink.received()
	require.Len(t, got, 1)
	id, via, ok := identity.FromClientInfo(got[0])
	require.True(t, ok)
	assert.Equal(t, identity.ViaAuth, via)
	assert.Equal(t, ns, id.Namespace)
	assert.Equal(t, agentSA, id.ServiceAccount)
	assert.Equal(t, "agent-ok", id.PodName)
	assert.Equal(t, string(pod.UID), id.PodUID)
	assert.Equal(t, "node-ok", id.NodeName)
	node, err := admin.CoreV1().Nodes().Get(context.Background(), "node-ok", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(node.UID), id.NodeUID)
	assert.NotEmpty(t, id.CredentialID, "the API reports the token's credential ID")
	assert.Equal(t, "system:serviceaccount:netpulse:netpulse-agent", got[0].Auth.GetAttribute(identity.AttrSubject))
	// What survives a batch processor with these metadata_keys.
	assert.Equal(t, []string{string(pod.UID)}, got[0].Metadata.Get(identity.MetadataPodUID))
	assert.Equal(t, []string{"node-ok"}, got[0].Metadata.Get(identity.MetadataNodeName))
	mid, via, ok := identity.FromClientInfo(client.Info{Metadata: got[0].Metadata})
	require.True(t, ok)
	assert.Equal(t, identity.ViaMetadata, via)
	assert.Equal(t, id.String(), mid.String())
}

// Every way a caller can fail to be an agent pod: gRPC Unauthenticated, and nothing
// reaches the pipeline. Each case also records what the API server itself says of the
// token (as the admin), so it is clear which check rejects it.
func TestRejected(t *testing.T) {
	for _, mode := range []string{k8stokenauthextension.VerificationReview, k8stokenauthextension.VerificationLocal} {
		t.Run(mode, func(t *testing.T) { testRejected(t, mode) })
	}
}

func testRejected(t *testing.T, mode string) {
	g := startGateway(t, true, func(c *k8stokenauthextension.Config) { c.Verification = mode })
	ctx := context.Background()
	agent := agentPod(t, "agent-1-"+mode, "node-1")
	good := podToken(t, agent, audience)
	keyFile := filepath.Join(cp.Dir, "sa.key")
	now := time.Now()

	// Another service account's pod-bound token for the right audience.
	intruder, err := k8stokenauthtest.CreateAgentPod(ctx, admin, ns, "intruder", "intruder-1-"+mode, "node-1")
	require.NoError(t, err)
	otherSA := podToken(t, intruder, audience)

	// A pod that has been deleted since its token was minted.
	gone := agentPod(t, "agent-gone-"+mode, "node-1")
	goneTok := podToken(t, gone, audience)
	zero := int64(0)
	require.NoError(t, admin.CoreV1().Pods(ns).Delete(ctx, gone.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	require.Eventually(t, func() bool {
		_, err := admin.CoreV1().Pods(ns).Get(ctx, gone.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond)

	// An expired token: the TokenRequest API will not mint one (600 s minimum), so the
	// agent's genuine token is re-signed with the cluster's service-account signing key
	// with exp in the past. Its control twin, re-signed the same way but unexpired, is
	// accepted (below): the signing is right and only the expiry differs.
	resign := func(exp time.Time) string {
		tok, err := k8stokenauthtest.Resign(good, keyFile, func(c map[string]any) {
			c["exp"] = exp.Unix()
			c["iat"] = exp.Add(-20 * time.Minute).Unix()
			c["nbf"] = exp.Add(-20 * time.Minute).Unix()
		})
		require.NoError(t, err)
		return tok
	}
	expired := resign(now.Add(-10 * time.Minute))
	unexpiredTwin := resign(now.Add(10 * time.Minute))

	unbound, err := k8stokenauthtest.UnboundToken(ctx, admin, ns, agentSA, []string{audience}, 600)
	require.NoError(t, err)

	for _, tc := range []struct {
		name, token string
		// apiAuthenticates: the API's own TokenReview for the gateway's audience.
		apiAuthenticates bool
		reason           string
	}{
		{"no token", "", false, "missing_token"},
		{"not a token", "not-a-jwt", false, "malformed_token"},
		{"another service account", otherSA, true, "service_account_not_allowed"},
		{"wrong audience", podToken(t, agent, "some-other-service"), false, "token_rejected"},
		{"the API server's audience", podToken(t, agent), false, "token_rejected"},
		{"expired", expired, false, "expired_token"},
		{"bound to a deleted pod", goneTok, false, "token_rejected"},
		{"not bound to a pod", unbound, true, "not_bound_to_pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.token != "" && tc.token != "not-a-jwt" {
				st, err := k8stokenauthtest.ReviewDirectly(ctx, admin, tc.token, []string{audience})
				require.NoError(t, err)
				assert.Equal(t, tc.apiAuthenticates, st.Authenticated, "the API's own verdict (error: %q)", st.Error)
				t.Logf("API: authenticated=%v audiences=%v error=%q", st.Authenticated, st.Audiences, st.Error)
			}
			err := export(g.addr, tlsCreds(), tc.token)
			require.Error(t, err)
			assert.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
			assert.Contains(t, err.Error(), tc.reason)
		})
	}
	assert.Empty(t, g.sink.received(), "nothing reached the pipeline")

	// The controls: the agent's genuine token and the unexpired re-signed twin are accepted.
	st, err := k8stokenauthtest.ReviewDirectly(ctx, admin, unexpiredTwin, []string{audience})
	require.NoError(t, err)
	require.True(t, st.Authenticated, "the re-signed unexpired twin: %q", st.Error)
	var probes int64
	if mode == k8stokenauthextension.VerificationLocal {
		probes = waitLocalReady(t, g, agent)
	}
	n0 := len(g.sink.received())
	require.NoError(t, export(g.addr, tlsCreds(), unexpiredTwin))
	require.NoError(t, export(g.addr, tlsCreds(), good))
	assert.Len(t, g.sink.received(), n0+2)

	// The API itself rejects the expired token too (the extension rejected it without
	// asking, from its exp claim).
	st, err = k8stokenauthtest.ReviewDirectly(ctx, admin, expired, []string{audience})
	require.NoError(t, err)
	assert.False(t, st.Authenticated)
	assert.Contains(t, st.Error, "expired")

	reasons := counter(t, g.tt, "otelcol_k8s_token_auth_requests", "reason")
	t.Logf("requests by reason: %v", reasons)
	assert.EqualValues(t, 1, reasons["expired_token"])
	if mode == k8stokenauthextension.VerificationLocal {
		assert.EqualValues(t, 2, reasons["verified"]-probes, "the controls verified locally")
	} else {
		assert.EqualValues(t, 2, reasons["reviewed"])
	}
}

// waitLocalReady waits until the gateway's local verification has the issuer's keys and
// its pod watch holds pod (requests made before may go to TokenReview). It returns the
// requests verified locally by then (its probes').
func waitLocalReady(t *testing.T, g *gateway, pod *corev1.Pod) int64 {
	t.Helper()
	require.Eventually(t, func() bool {
		return counter(t, g.tt, "otelcol_k8s_token_auth_key_fetches", "fetch_result")["ok"] > 0 && boundPods(t, g.tt) > 0
	}, 30*time.Second, 50*time.Millisecond, "keys fetched and pods listed")
	// The watch sees pods created after its list a moment later: wait until a token of
	// pod is verified locally (each probe a new token: one reviewed meanwhile is cached).
	before := counter(t, g.tt, "otelcol_k8s_token_auth_requests", "reason")["verified"]
	require.Eventually(t, func() bool {
		_ = export(g.addr, tlsCreds(), podToken(t, pod, audience))
		return counter(t, g.tt, "otelcol_k8s_token_auth_requests", "reason")["verified"] > before
	}, 30*time.Second, 100*time.Millisecond, "a token of the pod verified locally")
	return counter(t, g.tt, "otelcol_k8s_token_auth_requests", "reason")["verified"]
}

func boundPods(t *testing.T, tt *componenttest.Telemetry) int64 {
	t.Helper()
	m, err := tt.GetMetric("otelcol_k8s_token_auth_bound_pods")
	if err != nil {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
		n += dp.Value
	}
	return n
}

// The OTLP hop is TLS only: a plaintext client gets no answer from the pipeline.
func TestPlaintextRefused(t *testing.T) {
	g := startGateway(t, true, nil)
	err := export(g.addr, insecure.NewCredentials(), "")
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	// A client that does not trust the gateway's CA refuses the server.
	err = export(g.addr, credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12}), "")
	require.Error(t, err)
	assert.Empty(t, g.sink.received())
}

// TokenReview calls per agent are bounded by the cache: N requests with one token cost one
// review (counted by the extension and, independently, by the API server itself) until
// max_ttl; then one more.
func TestTokenReviewsAreCached(t *testing.T) {
	ctx := context.Background()
	// max_ttl long enough that 100 requests fit in it on a loaded machine (the counts below
	// mean something only then), short enough to see the re-review.
	const maxTTL = 10 * time.Second
	g := startGateway(t, true, func(c *k8stokenauthextension.Config) {
		c.Cache.MaxTTL = maxTTL
		c.Verification = k8stokenauthextension.VerificationReview
	})
	a := agentPod(t, "agent-cache-a", "node-cache-a")
	b := agentPod(t, "agent-cache-b", "node-cache-b")
	ta, tb := podToken(t, a, audience), podToken(t, b, audience)

	served := func() int {
		n, err := k8stokenauthtest.TokenReviewsServed(ctx, admin)
		require.NoError(t, err)
		return n
	}
	before := served()
	const n = 100
	start := time.Now()
	var reviewed time.Time // both tokens reviewed (and cached) by then
	for i := range n {
		tok := ta
		if i%2 == 1 {
			tok = tb
		}
		require.NoError(t, export(g.addr, tlsCreds(), tok))
		if i == 1 {
			reviewed = time.Now()
		}
	}
	elapsed := time.Since(start)
	require.Less(t, elapsed, maxTTL, "the loop must finish within max_ttl for the count to mean anything; took %v", elapsed)
	require.Eventually(t, func() bool { return served()-before >= 2 }, 10*time.Second, 50*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 2, served()-before, "API server: TokenReview POSTs for %d requests of 2 agents", n)
	assert.Equal(t, map[string]int64{"authenticated": 2}, counter(t, g.tt, "otelcol_k8s_token_auth_token_reviews", "outcome"))
	assert.Equal(t, map[string]int64{"reviewed": 2, "cached": n - 2}, counter(t, g.tt, "otelcol_k8s_token_auth_requests", "reason"))
	assert.Len(t, g.sink.received(), n)

	// After max_ttl each token is reviewed once more. Its cache entry dates from its review,
	// which a loaded machine may finish well after start: wait from the review.
	time.Sleep(time.Until(reviewed.Add(maxTTL + 100*time.Millisecond)))
	require.NoError(t, export(g.addr, tlsCreds(), ta))
	require.NoError(t, export(g.addr, tlsCreds(), ta))
	assert.Equal(t, map[string]int64{"authenticated": 3}, counter(t, g.tt, "otelcol_k8s_token_auth_token_reviews", "outcome"))
	t.Logf("%d requests in %v: %d TokenReviews by the API server's count", n, elapsed, served()-before)
}

// A gateway without the RBAC grant cannot review: requests are answered Unavailable (the
// agent's exporter retries), never accepted.
func TestWithoutRBACGrantUnavailable(t *testing.T) {
	ctx := context.Background()
	saCfg, err := cp.ServiceAccountConfig(ctx, ns, "no-grant")
	require.NoError(t, err)
	kc := filepath.Join(t.TempDir(), "no-grant.kubeconfig")
	require.NoError(t, kubetest.WriteKubeconfig(saCfg, kc))
	g := startGateway(t, true, func(c *k8stokenauthextension.Config) { c.Kubeconfig = kc })
	pod := agentPod(t, "agent-nogrant", "node-1")
	err = export(g.addr, tlsCreds(), podToken(t, pod, audience))
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	assert.Equal(t, map[string]int64{"error": 1}, counter(t, g.tt, "otelcol_k8s_token_auth_token_reviews", "outcome"))
	assert.Empty(t, g.sink.received())
}

// The lifecycle against a real API server: Shutdown without Start, twice, and with the
// extension never used.
func TestLifecycle(t *testing.T) {
	requireCluster(t)
	f := k8stokenauthextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*k8stokenauthextension.Config)
	cfg.Config = kubeclient.Config{AuthType: kubeclient.AuthKubeConfig, Kubeconfig: gatewayKC, QPS: 5, Burst: 10}
	cfg.Audience, cfg.ServiceAccounts = audience, []string{ns + "/" + agentSA}
	for _, start := range []bool{false, true} {
		var ext extension.Extension
		ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
		require.NoError(t, err)
		if start {
			require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
		}
		require.NoError(t, ext.Shutdown(context.Background()))
		require.NoError(t, ext.Shutdown(context.Background()))
	}
}

// While the API server is down, an agent reviewed before keeps being accepted past max_ttl
// (stale_if_error); an agent never reviewed is answered Unavailable (its exporter retries)
// and accepted once the API server is back.
func TestAPIServerOutage(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, true, func(c *k8stokenauthextension.Config) {
		c.Cache.MaxTTL = time.Second
		c.ReviewTimeout = 2 * time.Second
		c.Verification = k8stokenauthextension.VerificationReview
	})
	known := podToken(t, agentPod(t, "agent-outage-known", "node-outage"), audience)
	unknown := podToken(t, agentPod(t, "agent-outage-new", "node-outage"), audience)
	require.NoError(t, export(g.addr, tlsCreds(), known))

	require.NoError(t, cp.StopAPIServer())
	restarted := false
	defer func() {
		if !restarted {
			require.NoError(t, cp.StartAPIServer(ctx))
		}
	}()
	time.Sleep(1500 * time.Millisecond) // past max_ttl
	require.NoError(t, export(g.addr, tlsCreds(), known), "reviewed before: accepted while the API is down")
	err := export(g.addr, tlsCreds(), unknown)
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	require.NoError(t, cp.StartAPIServer(ctx))
	restarted = true
	require.Eventually(t, func() bool { return export(g.addr, tlsCreds(), unknown) == nil }, 30*time.Second, 200*time.Millisecond)
	reasons := counter(t, g.tt, "otelcol_k8s_token_auth_requests", "reason")
	t.Logf("requests by reason: %v", reasons)
	assert.EqualValues(t, 1, reasons["stale"])
	assert.Positive(t, reasons["review_error"])
}

// Local verification (the default) against the real API server: a real pod-bound token
// from the TokenRequest API is accepted with no TokenReview at all - counted by the
// extension and, independently, by the API server - and refused once its pod is deleted
// (the watch sees the deletion; the cached acceptance is dropped), still without a review;
// the API, asked directly, agrees.
func TestLocalVerificationRealTokens(t *testing.T) {
	ctx := context.Background()
	pod := agentPod(t, "agent-local", "node-local")
	tok := podToken(t, pod, audience)
	g := startGateway(t, true, nil)
	require.Eventually(t, func() bool {
		return counter(t, g.tt, "otelcol_k8s_token_auth_key_fetches", "fetch_result")["ok"] > 0 && boundPods(t, g.tt) > 0
	}, 30*time.Second, 50*time.Millisecond, "keys fetched and pods listed")

	served := func() int {
		n, err := k8stokenauthtest.TokenReviewsServed(ctx, admin)
		require.NoError(t, err)
		return n
	}
	before := served()
	const n = 50
	for range n {
		require.NoError(t, export(g.addr, tlsCreds(), tok))
	}
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 0, served()-before, "API server: TokenReview POSTs for %d requests", n)
	assert.Empty(t, counter(t, g.tt, "otelcol_k8s_token_auth_token_reviews", "outcome"))
	assert.Equal(t, map[string]int64{"verified": 1, "cached": n - 1}, counter(t, g.tt, "otelcol_k8s_token_auth_requests", "reason"))
	got := g.sink.received()
	require.Len(t, got, n)
	id, _, ok := identity.FromClientInfo(got[0])
	require.True(t, ok)
	assert.Equal(t, string(pod.UID), id.PodUID)
	assert.Equal(t, "agent-local", id.PodName)
	assert.Equal(t, "node-local", id.NodeName)
	node, err := admin.CoreV1().Nodes().Get(ctx, "node-local", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(node.UID), id.NodeUID)
	assert.NotEmpty(t, id.CredentialID)

	zero := int64(0)
	require.NoError(t, admin.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	require.Eventually(t, func() bool {
		_, err := admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond)
	deleted := time.Now()
	require.Eventually(t, func() bool {
		return status.Code(export(g.addr, tlsCreds(), tok)) == codes.Unauthenticated
	}, 10*time.Second, 20*time.Millisecond, "refused once the pod is deleted")
	t.Logf("refused %v after the API server confirmed the deletion", time.Since(deleted))
	for range 5 {
		err := export(g.addr, tlsCreds(), tok)
		assert.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	}
	assert.Equal(t, 0, served()-before, "API server: TokenReview POSTs, before and after the deletion")
	st, err := k8stokenauthtest.ReviewDirectly(ctx, admin, tok, []string{audience})
	require.NoError(t, err)
	assert.False(t, st.Authenticated, "the API's own verdict")
	local := counter(t, g.tt, "otelcol_k8s_token_auth_local_verifications", "verdict")
	t.Logf("local verifications by verdict: %v", local)
	assert.Equal(t, map[string]int64{"accepted": 1, "rejected": 1}, local, "refused locally once, then from the negative cache")
	assert.Empty(t, counter(t, g.tt, "otelcol_k8s_token_auth_token_reviews", "outcome"), "no review, before or after the deletion")
}

// With local verification an API server outage costs nothing: an agent seen before and
// one whose token the gateway has never seen (its pod already in the watch) are both
// accepted while the API server is down, without a review.
func TestAPIServerOutageLocal(t *testing.T) {
	ctx := context.Background()
	known := agentPod(t, "agent-outage-local-known", "node-outage")
	fresh := agentPod(t, "agent-outage-local-new", "node-outage")
	g := startGateway(t, true, nil)
	waitLocalReady(t, g, fresh)
	knownTok, freshTok := podToken(t, known, audience), podToken(t, fresh, audience)
	require.NoError(t, export(g.addr, tlsCreds(), knownTok))

	require.NoError(t, cp.StopAPIServer())
	restarted := false
	defer func() {
		if !restarted {
			require.NoError(t, cp.StartAPIServer(ctx))
		}
	}()
	require.NoError(t, export(g.addr, tlsCreds(), knownTok))
	require.NoError(t, export(g.addr, tlsCreds(), freshTok), "never seen, verified without the API")
	require.NoError(t, cp.StartAPIServer(ctx))
	restarted = true
	assert.Empty(t, counter(t, g.tt, "otelcol_k8s_token_auth_token_reviews", "outcome"))
}

// The cluster's signing key is rotated - kube-apiserver restarted with a new signing key,
// the previous one still accepted and published - while the gateway runs: a token of the new
// key is verified locally after one key fetch, and an old key's token still is; no restart
// of the gateway and no TokenReview.
func TestLocalFollowsRealKeyRotation(t *testing.T) {
	ctx := context.Background()
	pod := agentPod(t, "agent-rotation", "node-rotation")
	// A refetch at most once a second (default 10 s): the rotation below comes within 10 s
	// of the gateway's first fetch, which would send the new key's first token to review.
	g := startGateway(t, true, func(c *k8stokenauthextension.Config) { c.Keys.MinRefetchInterval = time.Second })
	waitLocalReady(t, g, pod)
	oldTok, oldTok2 := podToken(t, pod, audience), podToken(t, pod, audience)
	require.NoError(t, export(g.addr, tlsCreds(), oldTok))
	fetches := counter(t, g.tt, "otelcol_k8s_token_auth_key_fetches", "fetch_result")["ok"]

	restore, err := cp.RotateServiceAccountKey(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, restore(context.Background())) })
	newTok := podToken(t, pod, audience)
	require.NotEqual(t, keyID(t, oldTok), keyID(t, newTok), "the API server signs with the new key")
	time.Sleep(1100 * time.Millisecond) // past min_refetch_interval since any fetch

	served := func() int {
		n, err := k8stokenauthtest.TokenReviewsServed(ctx, admin)
		require.NoError(t, err)
		return n
	}
	before := served() // the API server's counters began again with its restart
	verified := counter(t, g.tt, "otelcol_k8s_token_auth_requests", "reason")["verified"]
	require.NoError(t, export(g.addr, tlsCreds(), newTok), "the new key's token")
	require.NoError(t, export(g.addr, tlsCreds(), oldTok2), "the old key's token, never seen before")
	require.NoError(t, export(g.addr, tlsCreds(), oldTok), "the old key's token from the cache")
	assert.EqualValues(t, 2, counter(t, g.tt, "otelcol_k8s_token_auth_requests", "reason")["verified"]-verified, "both verified locally")
	assert.Equal(t, 0, served()-before, "API server: TokenReview POSTs")
	assert.Empty(t, counter(t, g.tt, "otelcol_k8s_token_auth_token_reviews", "outcome"))
	assert.Greater(t, counter(t, g.tt, "otelcol_k8s_token_auth_key_fetches", "fetch_result")["ok"], fetches, "the keys fetched again for the new key ID")
	assert.Empty(t, counter(t, g.tt, "otelcol_k8s_token_auth_local_verifications", "reason")["unknown_key"], "no fallback for the new key")
}

// keyID is the kid of a JWS's protected header.
func keyID(t *testing.T, token string) string {
	t.Helper()
	h, _, ok := strings.Cut(token, ".")
	require.True(t, ok)
	raw, err := base64.RawURLEncoding.DecodeString(h)
	require.NoError(t, err)
	var hdr struct {
		Kid string `json:"kid"`
	}
	require.NoError(t, json.Unmarshal(raw, &hdr))
	require.NotEmpty(t, hdr.Kid)
	return hdr.Kid
}
