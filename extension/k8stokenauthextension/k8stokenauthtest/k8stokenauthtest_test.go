// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteTLS(t *testing.T) {
	p, err := WriteTLS(t.TempDir(), "198.18.0.1", "gateway.example")
	require.NoError(t, err)
	pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	for _, name := range []string{"127.0.0.1", "::1", "localhost", "netpulse-gateway.netpulse.svc", "198.18.0.1", "gateway.example"} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: p.CAPool, DNSName: name})
		assert.NoError(t, err, name)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: p.CAPool, DNSName: "other.example"})
	assert.Error(t, err)
}

// Resign changes exactly the claims mutate changes and signs with the key (RS256, the
// header kept): the signature verifies with the public key.
func TestResign(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "sa.key")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	enc := base64.RawURLEncoding.EncodeToString
	orig := enc([]byte(`{"alg":"RS256","kid":"k1"}`)) + "." + enc([]byte(`{"exp":2000000000,"sub":"system:serviceaccount:a:b"}`)) + ".c2ln"

	tok, err := Resign(orig, keyFile, func(c map[string]any) { c["exp"] = 1000 })
	require.NoError(t, err)
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	assert.Equal(t, strings.Split(orig, ".")[0], parts[0], "header kept")
	claims, err := Claims(tok)
	require.NoError(t, err)
	assert.EqualValues(t, 1000, claims["exp"])
	assert.Equal(t, "system:serviceaccount:a:b", claims["sub"])
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	require.NoError(t, rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, digest[:], sig))
}
