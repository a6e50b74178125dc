// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the throw-away PKI of one control plane: a CA that signs the API server's serving
// certificate and the admin client certificate, and the service-account signing key.
type pki struct {
	caCert       *x509.Certificate
	caKey        *ecdsa.PrivateKey
	serial       int64
	caCertPEM    []byte
	adminCertPEM []byte
	adminKeyPEM  []byte

	caCertFile    string
	servingCert   string
	servingKey    string
	saKeyFile     string
	saPubFile     string
	adminCertFile string
	adminKeyFile  string
}

func newPKI(dir string, serveIPs []net.IP) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "netpulse-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	p := &pki{caCert: caCert, caKey: caKey, serial: 1, caCertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	ips := append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, serveIPs...)
	servingCert, servingKey, err := p.issue("kube-apiserver", nil, x509.ExtKeyUsageServerAuth, ips,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, err
	}
	// system:masters is the built-in superuser group: the admin identity bypasses RBAC.
	p.adminCertPEM, p.adminKeyPEM, err = p.issue("netpulse-admin", []string{"system:masters"}, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}

	p.caCertFile = filepath.Join(dir, "ca.crt")
	p.servingCert = filepath.Join(dir, "apiserver.crt")
	p.servingKey = filepath.Join(dir, "apiserver.key")
	p.saKeyFile = filepath.Join(dir, "sa.key")
	p.saPubFile = filepath.Join(dir, "sa.pub")
	p.adminCertFile = filepath.Join(dir, "admin.crt")
	p.adminKeyFile = filepath.Join(dir, "admin.key")
	files := map[string][]byte{
		p.caCertFile:    p.caCertPEM,
		p.servingCert:   servingCert,
		p.servingKey:    servingKey,
		p.saKeyFile:     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		p.saPubFile:     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
		p.adminCertFile: p.adminCertPEM,
		p.adminKeyFile:  p.adminKeyPEM,
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return p, nil
}

// issue signs a certificate for cn (organisations orgs) with the CA; serials are unique
// per PKI. Not safe for concurrent use (ControlPlane.IssueClientCert holds the lock).
func (p *pki) issue(cn string, orgs []string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	p.serial++
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
