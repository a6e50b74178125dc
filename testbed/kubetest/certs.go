// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/netpulse/netpulse/testbed/testpki"
)

// pki is the throw-away PKI of one control plane: a CA (testbed/testpki) that signs the API
// server's serving certificate and the admin client certificate, and the service-account
// signing key.
type pki struct {
	ca           *testpki.CA
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
	ca, err := testpki.NewCA("netpulse-test-ca")
	if err != nil {
		return nil, err
	}
	p := &pki{ca: ca, caCertPEM: ca.CertPEM}
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

	// The service-account signing key stays RSA in PKCS#1 ("RSA PRIVATE KEY"):
	// k8stokenauthtest.Resign parses it so.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	saPubPEM := pem.EncodeToMemory(&pem.Block{Type: keyutil.PublicKeyBlockType, Bytes: saPubDER})

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
		p.saKeyFile:     saKeyPEM,
		p.saPubFile:     saPubPEM,
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

// issue signs a certificate for cn (organisations orgs) with the CA.
func (p *pki) issue(cn string, orgs []string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
	return p.ca.Issue(cert.Config{CommonName: cn, Organization: orgs, Usages: []x509.ExtKeyUsage{usage}, AltNames: cert.AltNames{IPs: ips, DNSNames: dns}})
}
