// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/util/keyutil"
)

// RotateServiceAccountKey restarts kube-apiserver so that it signs service-account tokens
// with a new RSA key while it still accepts - and publishes in its JWKS - the previous one:
// what an operator's signing-key rotation does. Tokens minted before stay valid; tokens
// minted after carry the new key's ID. The returned restore restarts kube-apiserver with the
// original key alone (tokens of the new key then stop working). Neither may run
// concurrently with StopAPIServer or StartAPIServer.
func (cp *ControlPlane) RotateServiceAccountKey(ctx context.Context) (restore func(context.Context) error, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	keyFile, pubFile := filepath.Join(cp.Dir, "sa-rotated.key"), filepath.Join(cp.Dir, "sa-rotated.pub")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: keyutil.PublicKeyBlockType, Bytes: pubDER}), 0o600); err != nil {
		return nil, err
	}
	restart := func(ctx context.Context, files []string) error {
		if err := cp.StopAPIServer(); err != nil {
			return fmt.Errorf("kubetest: stop kube-apiserver: %w", err)
		}
		cp.mu.Lock()
		cp.saRotated = files
		cp.mu.Unlock()
		return cp.StartAPIServer(ctx)
	}
	if err := restart(ctx, []string{keyFile, cp.pki.saPubFile, pubFile}); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return restart(ctx, nil) }, nil
}
