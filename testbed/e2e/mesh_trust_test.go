// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

// Trust (issue 12) end to end, with the unchanged deploy/ configs: agents reach the gateway
// over TLS with their projected, pod-bound ServiceAccount token; the gateway verifies it
// with TokenReview and believes a data point only from the pod and node the token names.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netpulse/netpulse/testbed/simcluster"
)

const (
	metricSkipped          = "otelcol_pod_network_health_datapoints_skipped"
	metricTokenReviews     = "otelcol_k8s_token_auth_token_reviews"
	metricAdmissionRefused = "otelcol_k8s_net_attributes_admission_refused"
)

// TestAgentAuthentication: the healthy baseline was built from authenticated agents only
// (nothing skipped as unauthenticated or mismatched); a push without a token, or in
// plaintext, is refused; an agent's own valid token carrying another agent's identity in
// the Resource is accepted on the wire but every data point is counted as
// source_identity_mismatch and nothing is written from it.
func TestAgentAuthentication(t *testing.T) {
	e := requireEnv(t)
	e.requireHealthy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	skipped := func() map[string]float64 {
		all, err := scrape(ctx, gatewayTelemetryURL)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, s := range family(all, metricSkipped) {
			out[s.labels["reason"]] += s.value
		}
		return out
	}
	// The gateway's admission (k8s_net_attributes, require_authenticated_source) refuses
	// them first; the exporter's binding counts what would get past it.
	refused := func() float64 {
		all, err := scrape(ctx, gatewayTelemetryURL)
		if err != nil {
			t.Fatal(err)
		}
		n := 0.0
		for _, s := range family(all, metricAdmissionRefused) {
			if s.labels["reason"] == "source_identity_mismatch" {
				n += s.value
			}
		}
		return n
	}
	refusedBefore := refused()
	before := skipped()
	for _, r := range []string{"source_identity_mismatch", "unauthenticated_source"} {
		if before[r] != 0 {
			t.Errorf("healthy cluster: %v data points skipped as %s", before[r], r)
		}
	}
	all, err := scrape(ctx, gatewayTelemetryURL)
	if err != nil {
		t.Fatal(err)
	}
	agents := e.cl.Agents()
	t.Logf("E2E auth: %.0f TokenReviews for %d agents since the gateway started (%s)",
		sum(family(all, metricTokenReviews)), len(agents), byLabel(family(all, metricTokenReviews), "outcome"))

	dial := func(creds credentials.TransportCredentials) pmetricotlp.GRPCClient { return e.dialGateway(t, creds) }
	secure := dial(e.gatewayTLS(t))
	liar, victim := agents[0], agents[1]
	req := forgedRound(victim, agents[2])

	// No token.
	if _, err := secure.Export(ctx, req); status.Code(err) != codes.Unauthenticated {
		t.Errorf("push without a token: %v, want Unauthenticated", err)
	}
	// Plaintext: the gateway speaks TLS only.
	if _, err := dial(insecure.NewCredentials()).Export(ctx, req); err == nil {
		t.Error("a plaintext push was accepted")
	}
	// The liar's own token (as its kubelet projects it), the victim's identity.
	authed := e.agentContext(ctx, t, liar)
	const rounds = 5
	for range rounds {
		if _, err := secure.Export(authed, req); err != nil {
			t.Fatalf("push with a valid token: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	points := float64(rounds * req.Metrics().DataPointCount())
	deadline := time.Now().Add(30 * time.Second)
	for {
		after := skipped()
		got := after["source_identity_mismatch"] - before["source_identity_mismatch"] + refused() - refusedBefore
		if got == points {
			t.Logf("E2E auth: %.0f forged data points (another agent's identity under a valid token) refused or skipped as source_identity_mismatch", got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("source_identity_mismatch grew by %.0f, want %.0f (all the forged points)", got, points)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Nothing was decided from them: the victim's path still reads Reachable.
	exp := e.healthy("after forged rounds", time.Now(), pathExpect{stable: true})
	e.hold(t, "after forged rounds", exp, 5*time.Second)
}

// forgedRound is one pod_probe round in the shape of the receiver's (a rotating pair),
// claiming that src failed every echo towards dst.
func forgedRound(src, dst simcluster.Agent) pmetricotlp.ExportRequest {
	return roundFrom(src, []string{dst.IPs[0].String()}, time.Now(), 3, 3, false)
}

func byLabel(samples []promSample, label string) string {
	var parts []string
	for _, s := range samples {
		parts = append(parts, fmt.Sprintf("%s=%.0f", s.labels[label], s.value))
	}
	return strings.Join(parts, " ")
}

// gatewayTLS trusts the gateway's serving certificate (the simulated cert-manager's CA).
func (e *env) gatewayTLS(t *testing.T) credentials.TransportCredentials {
	t.Helper()
	ca, err := os.ReadFile(e.cl.GatewayCAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
}

// dialGateway is an OTLP client of the gateway's OTLP port.
func (e *env) dialGateway(t *testing.T, creds credentials.TransportCredentials) pmetricotlp.GRPCClient {
	t.Helper()
	conn, err := grpc.NewClient(e.gw.Endpoint, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pmetricotlp.NewGRPCClient(conn)
}

// agentContext carries a token of a's own (pod-bound, the gateway's audience), as its
// kubelet projects it: what a compromised agent has.
func (e *env) agentContext(ctx context.Context, t *testing.T, a simcluster.Agent) context.Context {
	t.Helper()
	tokenSeconds := int64(600)
	tr, err := e.cl.Client.CoreV1().ServiceAccounts(simcluster.Namespace).CreateToken(ctx, simcluster.AgentServiceAccount, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			Audiences:         []string{"netpulse-gateway"},
			ExpirationSeconds: &tokenSeconds,
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: a.Pod, UID: types.UID(a.UID)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tr.Status.Token)
}
