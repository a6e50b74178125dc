// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// Changing gateway.shards keeps the generated CA (issue #40): `helm upgrade` from 1 to 3
// shards on a real API server (the chart's lookup reads the Secrets there) reissues only
// the serving certificate, for every shard's Service, signed by the CA the release already
// had. So an agent that has not rolled yet, holding the ca.crt of 1 shard, trusts every
// shard's certificate. Going back to fewer shards keeps everything. A release from before
// the CA Secret existed (its CA key never kept) gets a new CA once, at its first reissue,
// and keeps that one afterwards.
func TestShardCountChangeKeepsTheCA(t *testing.T) {
	bin, chart := helm(t)
	cp := kubetest.StartForTest(t, kubetest.Options{})
	cs, err := cp.Clientset()
	require.NoError(t, err)
	ctx := context.Background()
	home := t.TempDir()
	helmOK := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "helm %v:\n%s", args, out)
	}
	secret := func(name string) map[string][]byte {
		t.Helper()
		s, err := cs.CoreV1().Secrets("netpulse").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, name)
		return s.Data
	}
	hostsOf := func(shards int) []string {
		hosts := []string{"netpulse-gateway.netpulse.svc", "netpulse-gateway.netpulse.svc.cluster.local"}
		for i := range shards {
			hosts = append(hosts, fmt.Sprintf("netpulse-gateway-%d.netpulse.svc", i), fmt.Sprintf("netpulse-gateway-%d.netpulse.svc.cluster.local", i))
		}
		if shards > 1 { // gateway.relay, the default
			hosts = append(hosts, "netpulse-gateway-relay.netpulse.svc", "netpulse-gateway-relay.netpulse.svc.cluster.local")
		}
		return hosts
	}

	helmOK("install", "netpulse", chart, "-n", "netpulse", "--create-namespace")
	one, oneCA := secret("netpulse-gateway-tls"), secret("netpulse-gateway-tls-ca")
	require.Equal(t, one["ca.crt"], oneCA["tls.crt"], "the serving Secret's ca.crt is the kept CA's")
	verifyServingCert(t, one, "netpulse-gateway.netpulse.svc")
	requireNotCovered(t, one, "netpulse-gateway-0.netpulse.svc")

	helmOK("upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values", "--set", "gateway.shards=3")
	three := secret("netpulse-gateway-tls")
	require.Equal(t, oneCA, secret("netpulse-gateway-tls-ca"), "the CA Secret is kept")
	require.Equal(t, one["ca.crt"], three["ca.crt"], "the agents' CA is kept")
	require.NotEqual(t, one["tls.crt"], three["tls.crt"], "the serving certificate is reissued")
	require.NotEqual(t, one["tls.key"], three["tls.key"], "with a new key")
	// What an agent of 1 shard holds (the old ca.crt) verifies every name of 3 shards.
	asOldAgent := map[string][]byte{"ca.crt": one["ca.crt"], "tls.crt": three["tls.crt"], "tls.key": three["tls.key"]}
	for _, h := range hostsOf(3) {
		verifyServingCert(t, asOldAgent, h)
	}
	requireNotCovered(t, three, "netpulse-gateway-3.netpulse.svc")

	helmOK("upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values", "--set", "gateway.shards=2")
	require.Equal(t, three, secret("netpulse-gateway-tls"), "fewer shards keep the certificate")
	require.Equal(t, oneCA, secret("netpulse-gateway-tls-ca"))

	// A release from before the CA Secret: no CA key to reuse. The certificate that covers
	// the names is kept (and no CA Secret made); the first reissue makes a CA, once.
	require.NoError(t, cs.CoreV1().Secrets("netpulse").Delete(ctx, "netpulse-gateway-tls-ca", metav1.DeleteOptions{}))
	helmOK("upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values", "--set", "probe.interval=7s")
	require.Equal(t, three, secret("netpulse-gateway-tls"), "a covering certificate without a kept CA is kept")
	_, err = cs.CoreV1().Secrets("netpulse").Get(ctx, "netpulse-gateway-tls-ca", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a CA Secret whose CA did not sign the certificate: %v", err)
	helmOK("upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values", "--set", "gateway.shards=4")
	four, fourCA := secret("netpulse-gateway-tls"), secret("netpulse-gateway-tls-ca")
	require.NotEqual(t, three["ca.crt"], four["ca.crt"], "no CA key was kept: a new CA")
	require.Equal(t, four["ca.crt"], fourCA["tls.crt"])
	for _, h := range hostsOf(4) {
		verifyServingCert(t, four, h)
	}
	helmOK("upgrade", "netpulse", chart, "-n", "netpulse", "--reuse-values", "--set", "gateway.shards=6")
	require.Equal(t, fourCA, secret("netpulse-gateway-tls-ca"))
	require.Equal(t, four["ca.crt"], secret("netpulse-gateway-tls")["ca.crt"], "and keeps it from then on")
	verifyServingCert(t, secret("netpulse-gateway-tls"), "netpulse-gateway-5.netpulse.svc")
}

// requireNotCovered: the serving certificate is not valid for host (the test could fail).
func requireNotCovered(t *testing.T, data map[string][]byte, host string) {
	t.Helper()
	block, _ := pem.Decode(data["tls.crt"])
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.Error(t, cert.VerifyHostname(host))
}
