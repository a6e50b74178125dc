// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/cert"
)

func TestIssueVerifies(t *testing.T) {
	ca, err := NewCA("test-ca")
	require.NoError(t, err)
	require.True(t, ca.Cert.IsCA)
	other, err := NewCA("other-ca")
	require.NoError(t, err)

	certPEM, keyPEM, err := ca.Issue(cert.Config{CommonName: "admin", Organization: []string{"system:masters"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	leaf := pair.Leaf
	assert.Equal(t, "admin", leaf.Subject.CommonName)
	assert.Equal(t, []string{"system:masters"}, leaf.Subject.Organization)

	_, err = leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.Error(t, err, "a client certificate does not serve")
	_, err = leaf.Verify(x509.VerifyOptions{Roots: other.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.Error(t, err, "another CA does not vouch for it")

	again, _, err := ca.Issue(cert.Config{CommonName: "admin"})
	require.NoError(t, err)
	second, err := cert.ParseCertsPEM(again)
	require.NoError(t, err)
	assert.NotEqual(t, leaf.SerialNumber, second[0].SerialNumber, "serials are unique")
}

func TestWriteServingHandshake(t *testing.T) {
	s, err := WriteServing(t.TempDir(), "netpulse-gateway", "127.0.0.1", "localhost", "netpulse-gateway.netpulse.svc")
	require.NoError(t, err)
	pair, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	require.NoError(t, err)
	assert.Equal(t, []string{"localhost", "netpulse-gateway.netpulse.svc"}, pair.Leaf.DNSNames)
	assert.True(t, pair.Leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)))

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()

	pool, err := cert.NewPool(s.CAFile)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL)
	require.NoError(t, err, "the CA file verifies the serving certificate for 127.0.0.1")
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "ok", string(body))

	strict := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "example.invalid"}}}
	defer strict.CloseIdleConnections()
	_, err = strict.Get(srv.URL)
	require.Error(t, err, "not valid for a name it was not issued for")
}
