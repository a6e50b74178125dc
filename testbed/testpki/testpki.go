// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package testpki is the project's one throw-away PKI for tests: a CA made with client-go's
// cert.NewSelfSignedCACert and certificates it signs, PEM-encoded with client-go's cert and
// keyutil. The local control plane (testbed/kubetest) issues the API server's serving
// certificate and client certificates from it; the simulated cluster and the gateway tests
// take the OTLP hop's serving certificate from WriteServing.
//
// client-go has no function that signs a certificate with a given CA (kubeadm's pkiutil
// does, but it is not importable), so Issue calls x509.CreateCertificate itself.
package testpki // import "github.com/netpulse/netpulse/testbed/testpki"

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Validity of issued certificates; NotBefore is an hour back so that a clock a little behind
// does not reject them.
const (
	validity = 7 * 24 * time.Hour
	backdate = time.Hour
)

// CA is a throw-away certificate authority. Safe for concurrent use.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
}

// NewCA creates a CA named commonName (ECDSA P-256).
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	c, err := cert.NewSelfSignedCACert(cert.Config{CommonName: commonName, NotBefore: time.Now().Add(-backdate)}, key)
	if err != nil {
		return nil, err
	}
	certPEM, err := cert.EncodeCertificates(c)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: c, CertPEM: certPEM, key: key}, nil
}

// Pool is a certificate pool that trusts the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue signs a certificate for cfg (CommonName, Organization, AltNames, Usages; NotBefore
// is ignored) with a new ECDSA P-256 key and returns both PEM-encoded.
func (ca *CA) Issue(cfg cert.Config) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(math.MaxInt64))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial.Add(serial, big.NewInt(1)),
		Subject:      pkix.Name{CommonName: cfg.CommonName, Organization: cfg.Organization},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  cfg.Usages,
		IPAddresses:  cfg.AltNames.IPs,
		DNSNames:     cfg.AltNames.DNSNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if certPEM, err = cert.EncodeCertificates(leaf); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// AltNames sorts hosts into IP addresses and DNS names.
func AltNames(hosts ...string) cert.AltNames {
	var an cert.AltNames
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			an.IPs = append(an.IPs, ip)
		} else {
			an.DNSNames = append(an.DNSNames, h)
		}
	}
	return an
}

// Serving is a CA and a serving certificate written as PEM files (ca.crt, tls.crt,
// tls.key), the layout of a cert-manager TLS Secret.
type Serving struct {
	CAFile, CertFile, KeyFile string
	CAPool                    *x509.CertPool
}

// WriteServing creates a CA and a serving certificate for commonName valid for hosts (IP
// addresses or DNS names) and writes them into dir.
func WriteServing(dir, commonName string, hosts ...string) (*Serving, error) {
	ca, err := NewCA(commonName + "-ca")
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue(cert.Config{CommonName: commonName, AltNames: AltNames(hosts...), Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return nil, err
	}
	s := &Serving{CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), CAPool: ca.Pool()}
	for path, data := range map[string][]byte{s.CAFile: ca.CertPEM, s.CertFile: certPEM, s.KeyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return s, nil
}
