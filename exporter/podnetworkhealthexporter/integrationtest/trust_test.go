// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/probetest"
	"github.com/netpulse/netpulse/extension/k8stokenauthextension"
	"github.com/netpulse/netpulse/extension/k8stokenauthextension/k8stokenauthtest"
	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/kubeclient"
)

const (
	trustNS       = "netpulse" // the agents' namespace and service account, as deployed
	trustSA       = "netpulse-agent"
	trustAudience = "netpulse-gateway"
)

func unmarshal(t *testing.T, cfg component.Config, m map[string]any) {
	t.Helper()
	require.NoError(t, confmap.NewFromStringMap(m).Unmarshal(cfg))
}

// startTrustedGateway runs the gateway's path in process: the OTLP gRPC receiver (TLS,
// auth: k8s_token_auth with the gateway's identity from deploy/rbac) -> batch (with the
// given metadata_keys; no batch processor with withBatch false) -> next. It returns the
// receiver's address.
func startTrustedGateway(t *testing.T, dir string, withBatch bool, metadataKeys []string, next consumer.Metrics) (addr string, pki *k8stokenauthtest.TLS) {
	t.Helper()
	ctx := context.Background()
	pki, err := k8stokenauthtest.WriteTLS(dir)
	require.NoError(t, err)

	af := k8stokenauthextension.NewFactory()
	acfg := af.CreateDefaultConfig().(*k8stokenauthextension.Config)
	acfg.Config = kubeclient.Config{AuthType: kubeclient.AuthKubeConfig, Kubeconfig: gatewayKC, QPS: 20, Burst: 40}
	acfg.Audience = trustAudience
	acfg.ServiceAccounts = []string{trustNS + "/" + trustSA}
	require.NoError(t, acfg.Validate())
	auth, err := af.Create(ctx, extensiontest.NewNopSettings(af.Type()), acfg)
	require.NoError(t, err)
	require.NoError(t, auth.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, auth.Shutdown(context.Background())) })
	host := &k8stokenauthtest.Host{Extensions: map[component.ID]component.Component{component.NewID(af.Type()): auth}}

	if withBatch {
		bf := batchprocessor.NewFactory()
		bcfg := bf.CreateDefaultConfig()
		unmarshal(t, bcfg, map[string]any{"timeout": "200ms", "metadata_keys": metadataKeys})
		batch, err := bf.CreateMetrics(ctx, processortest.NewNopSettings(bf.Type()), bcfg, next)
		require.NoError(t, err)
		require.NoError(t, batch.Start(ctx, host))
		t.Cleanup(func() { require.NoError(t, batch.Shutdown(context.Background())) })
		next = batch
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr = l.Addr().String()
	require.NoError(t, l.Close())
	rf := otlpreceiver.NewFactory()
	rcfg := rf.CreateDefaultConfig()
	unmarshal(t, rcfg, map[string]any{"protocols": map[string]any{"grpc": map[string]any{
		"endpoint": addr,
		"tls":      map[string]any{"cert_file": pki.CertFile, "key_file": pki.KeyFile},
		"auth":     map[string]any{"authenticator": af.Type().String()},
	}}})
	recv, err := rf.CreateMetrics(ctx, receivertest.NewNopSettings(rf.Type()), rcfg, next)
	require.NoError(t, err)
	require.NoError(t, recv.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, recv.Shutdown(context.Background())) })
	return addr, pki
}

// startAgentExporter is the agent's side: the OTLP gRPC exporter with TLS (trusting the
// gateway's CA) and the contrib bearertokenauth extension reading the token file (as from
// a projected serviceAccountToken volume). No queue or retry: errors come back at once.
func startAgentExporter(t *testing.T, addr string, pki *k8stokenauthtest.TLS, tokenFile string) exporter.Metrics {
	t.Helper()
	ctx := context.Background()
	bf := bearertokenauthextension.NewFactory()
	bcfg := bf.CreateDefaultConfig()
	unmarshal(t, bcfg, map[string]any{"filename": tokenFile})
	bearer, err := bf.Create(ctx, extensiontest.NewNopSettings(bf.Type()), bcfg)
	require.NoError(t, err)
	require.NoError(t, bearer.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, bearer.Shutdown(context.Background())) })
	host := &k8stokenauthtest.Host{Extensions: map[component.ID]component.Component{component.NewID(bf.Type()): bearer}}

	of := otlpexporter.NewFactory()
	ocfg := of.CreateDefaultConfig()
	unmarshal(t, ocfg, map[string]any{
		"endpoint":         addr,
		"tls":              map[string]any{"ca_file": pki.CAFile},
		"auth":             map[string]any{"authenticator": bf.Type().String()},
		"sending_queue":    map[string]any{"enabled": false},
		"retry_on_failure": map[string]any{"enabled": false},
	})
	exp, err := of.CreateMetrics(ctx, exportertest.NewNopSettings(of.Type()), ocfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	return exp
}

func writeToken(t *testing.T, path string, pod *corev1.Pod) {
	t.Helper()
	tok, err := k8stokenauthtest.PodToken(context.Background(), admin, pod, []string{trustAudience}, 600)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(tok), 0o600))
}

func trustPod(t *testing.T, name, node string) *corev1.Pod {
	t.Helper()
	p, err := k8stokenauthtest.CreateAgentPod(context.Background(), admin, trustNS, trustSA, name, node)
	require.NoError(t, err)
	return p
}

func nodeProblem(t *testing.T, node string) *corev1.NodeCondition {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range n.Status.Conditions {
		if string(n.Status.Conditions[i].Type) == "netpulse.io/PodNetworkProblem" {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// The whole trust path on the real control plane: an agent presents its projected token
// (bearertokenauth, TLS), the gateway authenticates it (k8s_token_auth + TokenReview), the
// identity crosses the batch processor as client metadata, and pod_network_health with
// require_authenticated_observers uses the agent's own observations and none it sends in
// another pod's or node's name: those are counted as source_identity_mismatch, and no
// object, Event or node condition comes from them. TestLiesMarkANodeWithoutBinding is the
// control: the same lies, believed, mark agent-b's node.
func TestAuthenticatedObserversEndToEnd(t *testing.T) {
	res := runLiar(t, "trust", true)
	t.Logf("skipped by reason: %v", res.skipped)
	// 5 data points per target and round, 2 targets per lie, 4 lies per round.
	assert.EqualValues(t, liarRounds*4*2*5, res.skipped[string(identity.RefusedMismatch)])
	assert.Zero(t, res.skipped[string(identity.RefusedUnauthenticated)])
	assert.Equal(t, []string{res.agent}, res.sources, "objects only from the authenticated agent")
	assert.Empty(t, res.marked, "no node marked from rejected observations")
	assert.Zero(t, res.outageEvents, "no outage Event from rejected observations")

	// A token the gateway does not accept (not bound to a pod): the agent's export fails
	// Unauthenticated and nothing more reaches the exporter.
	ctx := context.Background()
	unbound, err := k8stokenauthtest.UnboundToken(ctx, admin, trustNS, trustSA, []string{trustAudience}, 600)
	require.NoError(t, err)
	badFile := filepath.Join(res.dir, "bad-token")
	require.NoError(t, os.WriteFile(badFile, []byte(unbound), 0o600))
	bad := startAgentExporter(t, res.addr, res.pki, badFile)
	err = bad.ConsumeMetrics(ctx, pmetricRound(t))
	require.Error(t, err)
	assert.Equal(t, codes.Unauthenticated, status.Code(unwrapStatus(err)), "%v", err)
}

// The control: without binding, the very same requests make objects in the victims' names
// and a node condition against agent-b's node (three "observers" on three other nodes fail
// to reach it, and reach agent-a): what one agent's token could do before.
func TestLiesMarkANodeWithoutBinding(t *testing.T) {
	res := runLiar(t, "liar", false)
	assert.Empty(t, res.skipped[string(identity.RefusedMismatch)])
	assert.Greater(t, len(res.sources), 1, "objects in other pods' names: %v", res.sources)
	assert.Contains(t, res.marked, "liar-node-b", "the lies mark agent-b's node when believed")
}

const liarRounds = 8

type liarResult struct {
	skipped      map[string]int64
	sources      []string // source pods of the objects written, sorted, distinct
	marked       []string // nodes with the condition True
	outageEvents int
	agent        string
	dir, addr    string
	pki          *k8stokenauthtest.TLS
}

// runLiar runs one agent (prefix-agent-a on prefix-node-a) that reports, with its own valid
// token, its real observation of victim (reachable) and four lies per round: three other
// pods (on nodes c, d, e) and itself on node f, each failing to reach agent-b (node b) and
// reaching agent-a.
func runLiar(t *testing.T, prefix string, bind bool) liarResult {
	t.Helper()
	requireCluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	node := func(s string) string { return prefix + "-node-" + s }
	a := trustPod(t, prefix+"-agent-a", node("a"))
	b := trustPod(t, prefix+"-agent-b", node("b"))
	victim := trustPod(t, prefix+"-victim", node("c"))
	victim2 := trustPod(t, prefix+"-victim-2", node("d"))
	victim3 := trustPod(t, prefix+"-victim-3", node("e"))
	_, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node("f")}}, metav1.CreateOptions{})
	require.NoError(t, err)

	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	cfg := testConfig("pnh-" + prefix)
	cfg.LeaderElection.Enabled = false
	cfg.RequireAuthenticatedObservers = bind
	cfg.NodeConditions.Enabled = true
	cfg.NodeConditions.MaxFailingShare = 1 // a 4-node test cluster: judge every node
	exp := startExporter(t, cfg, "gw-"+prefix, tt)
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })

	addr, pki := startTrustedGateway(t, dir, true, identity.MetadataKeys, exp)
	tokenFile := filepath.Join(dir, "token")
	writeToken(t, tokenFile, a)
	agent := startAgentExporter(t, addr, pki, tokenFile)

	honest := probetest.NewAgent(trustNS, a.Name, string(a.UID), node("a"), "192.0.2.1")
	lies := []*probetest.Agent{
		probetest.NewAgent(trustNS, victim.Name, string(victim.UID), node("c"), "192.0.2.3"),   // another pod
		probetest.NewAgent(trustNS, victim2.Name, string(victim2.UID), node("d"), "192.0.2.4"), // another pod
		probetest.NewAgent(trustNS, victim3.Name, string(victim3.UID), node("e"), "192.0.2.5"), // another pod
		probetest.NewAgent(trustNS, a.Name, string(a.UID), node("f"), "192.0.2.1"),             // its own pod on another node
	}
	toVictim := []probetest.Target{{NS: trustNS, Pod: victim.Name, UID: string(victim.UID), Node: node("c"), IP: "192.0.2.3"}}
	toB := []probetest.Target{{NS: trustNS, Pod: b.Name, UID: string(b.UID), Node: node("b"), IP: "192.0.2.2"}}
	toA := []probetest.Target{{NS: trustNS, Pod: a.Name, UID: string(a.UID), Node: node("a"), IP: "192.0.2.1"}}
	okOut := []probetest.Outcome{{OK: true, RTT: time.Millisecond}}
	failOut := []probetest.Outcome{{OK: false}}

	honestName := v1alpha1.ObjectName(trustNS, a.Name, "Pod", trustNS, victim.Name, "")
	for i := range liarRounds {
		now := time.Now()
		require.NoError(t, agent.ConsumeMetrics(ctx, honest.Round(now, toVictim, okOut)), "round %d", i)
		for _, liar := range lies {
			md := liar.Round(now, toB, failOut)
			liar.Round(now, toA, okOut).ResourceMetrics().At(0).ScopeMetrics().MoveAndAppendTo(md.ResourceMetrics().At(0).ScopeMetrics())
			require.NoError(t, agent.ConsumeMetrics(ctx, md), "the gateway accepts the request; the exporter decides what to use")
		}
		time.Sleep(400 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return getPNH(t, trustNS, honestName) != nil }, 20*time.Second, 100*time.Millisecond,
		"the agent's own observations are used (identity through the batch processor's metadata)")
	res := liarResult{skipped: map[string]int64{}, agent: a.Name, dir: dir, addr: addr, pki: pki}
	// Node conditions are judged every 5 s at most (at once on a target verdict change).
	if bind {
		time.Sleep(6 * time.Second)
	} else {
		require.Eventually(t, func() bool { c := nodeProblem(t, node("b")); return c != nil && c.Status == corev1.ConditionTrue },
			20*time.Second, 200*time.Millisecond, "the control: believed lies mark agent-b's node")
	}

	if m, err := tt.GetMetric("otelcol_pod_network_health_datapoints_skipped"); err == nil {
		res.skipped = sumPointsByAttr(m, "reason")
	}
	list, err := pnhClient.NetpulseV1alpha1().PodNetworkHealths(trustNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, o := range list.Items {
		if src := o.Spec.SourcePodRef.Name; strings.HasPrefix(src, prefix+"-") && !seen[src] {
			seen[src] = true
			res.sources = append(res.sources, src)
		}
	}
	slices.Sort(res.sources)
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		if c := nodeProblem(t, node(n)); c != nil && c.Status == corev1.ConditionTrue {
			res.marked = append(res.marked, node(n))
		}
	}
	events, err := admin.CoreV1().Events(trustNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, ev := range events.Items {
		if ev.Reason == v1alpha1.EventOutageDetected && strings.Contains(ev.InvolvedObject.Name, prefix) {
			res.outageEvents++
		}
	}
	t.Logf("binding=%v: objects from %v, marked %v, outage events %d, skipped %v", bind, res.sources, res.marked, res.outageEvents, res.skipped)
	return res
}

func pmetricRound(t *testing.T) pmetric.Metrics {
	t.Helper()
	return probetest.NewAgent(trustNS, "someone", "uid-someone", "trust-node-z", "192.0.2.99").Round(time.Now(),
		[]probetest.Target{{NS: trustNS, Pod: "x", UID: "uid-x", Node: "n", IP: "192.0.2.98"}}, []probetest.Outcome{{OK: true, RTT: time.Millisecond}})
}

// A batch processor between the authenticated receiver and the exporter that does not keep
// the identity keys loses the identity: binding fails closed - every data point is counted
// as unauthenticated_source and nothing is written.
func TestBatchWithoutIdentityKeysFailsClosed(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	a := trustPod(t, "trust-agent-x", "trust-node-x")
	b := trustPod(t, "trust-agent-y", "trust-node-y")

	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(ctx)
	cfg := testConfig("pnh-trust-closed")
	cfg.LeaderElection.Enabled = false
	cfg.RequireAuthenticatedObservers = true
	exp := startExporter(t, cfg, "gw-trust-closed", tt)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()

	addr, pki := startTrustedGateway(t, dir, true, nil, exp)
	tokenFile := filepath.Join(dir, "token")
	writeToken(t, tokenFile, a)
	agent := startAgentExporter(t, addr, pki, tokenFile)
	honest := probetest.NewAgent(trustNS, a.Name, string(a.UID), "trust-node-x", "192.0.2.11")
	toB := []probetest.Target{{NS: trustNS, Pod: b.Name, UID: string(b.UID), Node: "trust-node-y", IP: "192.0.2.12"}}
	for range 4 {
		require.NoError(t, agent.ConsumeMetrics(ctx, honest.Round(time.Now(), toB, []probetest.Outcome{{OK: true, RTT: time.Millisecond}})))
		time.Sleep(300 * time.Millisecond)
	}
	require.Eventually(t, func() bool {
		m, err := tt.GetMetric("otelcol_pod_network_health_datapoints_skipped")
		return err == nil && sumPointsByAttr(m, "reason")[string(identity.RefusedUnauthenticated)] == 4*5
	}, 10*time.Second, 100*time.Millisecond)
	time.Sleep(1500 * time.Millisecond)
	assert.Nil(t, getPNH(t, trustNS, v1alpha1.ObjectName(trustNS, a.Name, "Pod", trustNS, b.Name, "")))
}

// unwrapStatus finds the gRPC status in an exporter error (the exporter helper wraps it).
func unwrapStatus(err error) error {
	for e := err; e != nil; {
		if _, ok := status.FromError(e); ok {
			return e
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return err
}

// Without a batch processor between the receiver and the exporter the identity arrives as
// the authenticator's auth data (pipeline shape A of docs/security.md): the agent's own
// observations are used.
func TestWithoutBatchIdentityIsAuthData(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	a := trustPod(t, "trust-agent-p", "trust-node-p")
	b := trustPod(t, "trust-agent-q", "trust-node-q")

	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(ctx)
	cfg := testConfig("pnh-trust-auth")
	cfg.LeaderElection.Enabled = false
	cfg.RequireAuthenticatedObservers = true
	exp := startExporter(t, cfg, "gw-trust-auth", tt)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()

	addr, pki := startTrustedGateway(t, dir, false, nil, exp)
	tokenFile := filepath.Join(dir, "token")
	writeToken(t, tokenFile, a)
	agent := startAgentExporter(t, addr, pki, tokenFile)
	honest := probetest.NewAgent(trustNS, a.Name, string(a.UID), "trust-node-p", "192.0.2.21")
	toB := []probetest.Target{{NS: trustNS, Pod: b.Name, UID: string(b.UID), Node: "trust-node-q", IP: "192.0.2.22"}}
	name := v1alpha1.ObjectName(trustNS, a.Name, "Pod", trustNS, b.Name, "")
	for i := 0; i < 10 && getPNH(t, trustNS, name) == nil; i++ {
		require.NoError(t, agent.ConsumeMetrics(ctx, honest.Round(time.Now(), toB, []probetest.Outcome{{OK: true, RTT: time.Millisecond}})))
		time.Sleep(300 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return getPNH(t, trustNS, name) != nil }, 20*time.Second, 100*time.Millisecond)
	m, err := tt.GetMetric("otelcol_pod_network_health_datapoints_skipped")
	if err == nil {
		assert.Empty(t, sumPointsByAttr(m, "reason"))
	}
}
