// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"github.com/netpulse/netpulse/internal/contract"
)

// AddressPolicy vets every address a probe is about to connect to, after name resolution,
// so a hostname or a redirect cannot lead a probe to a refused address (cloud metadata,
// loopback). It returns nil to allow.
type AddressPolicy func(netip.Addr) error

// HTTPOptions configure an HTTP(S) probe.
type HTTPOptions struct {
	Timeout time.Duration
	// ExpectedStatus lists the status codes that count as success (default 200-399 when empty).
	ExpectedStatus []int
	// Host overrides the Host header (and the TLS server name when ServerName is empty).
	Host string
	// MaxBodyBytes caps how much of the body is read (and discarded). Default 64 KiB.
	MaxBodyBytes int64
	// MaxRedirects bounds same-host redirects followed (default 0: none).
	MaxRedirects int
	// TLS is the client TLS configuration (nil: system roots, verification on).
	TLS *tls.Config
	// Policy vets each dialled address; nil allows all.
	Policy AddressPolicy
	// UserAgent sent with each request.
	UserAgent string
}

// HTTP GETs rawURL with phase timings (dns, connect, tls, first_byte). It never sends
// credentials (a URL with user info is refused), never follows a redirect to another host,
// and reads at most MaxBodyBytes of the body.
func HTTP(ctx context.Context, rawURL string, o HTTPOptions) Result {
	r := Result{Start: time.Now()}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fail(&r, contract.ErrorTypeOther, fmt.Errorf("invalid probe URL %q", rawURL))
		return r
	}
	if u.User != nil {
		fail(&r, contract.ErrorTypeOther, fmt.Errorf("probe URL %q carries credentials; refused", u.Redacted()))
		return r
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 10
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	dialer := &net.Dialer{Control: vet(o.Policy)}
	tlsCfg := o.TLS
	if tlsCfg == nil {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if o.Host != "" && tlsCfg.ServerName == "" {
		tlsCfg = tlsCfg.Clone()
		tlsCfg.ServerName = hostOnly(o.Host)
	}
	transport := &http.Transport{
		Proxy:                  nil, // probe the path to the target, not to a proxy
		DialContext:            dialer.DialContext,
		TLSClientConfig:        tlsCfg,
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 32 << 10,
	}
	defer transport.CloseIdleConnections()
	origHost := u.Host
	client := &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != origHost || len(via) > o.MaxRedirects {
				return http.ErrUseLastResponse // report the redirect itself
			}
			return nil
		},
	}

	var phases phaseRecorder
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, phases.trace()), http.MethodGet, u.String(), nil)
	if err != nil {
		fail(&r, contract.ErrorTypeOther, err)
		return r
	}
	if o.Host != "" {
		req.Host = o.Host
	}
	if o.UserAgent != "" {
		req.Header.Set("User-Agent", o.UserAgent)
	}
	resp, err := client.Do(req)
	if err != nil {
		r.Duration = time.Since(r.Start)
		r.Phases = phases.list()
		r.LocalAddr = phases.localAddr()
		et := Classify(err)
		var tlsErr *tls.CertificateVerificationError
		if asAny(err, &tlsErr) || phases.tlsFailed() {
			et = contract.ErrorTypeTLS
		}
		fail(&r, et, err)
		return r
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, o.MaxBodyBytes))
	_ = resp.Body.Close()
	r.Duration = time.Since(r.Start)
	r.Phases = phases.list()
	r.LocalAddr = phases.localAddr()
	r.HTTPStatus = resp.StatusCode
	if statusExpected(resp.StatusCode, o.ExpectedStatus) {
		r.Success = true
		return r
	}
	fail(&r, contract.ErrorTypeHTTPStatus, fmt.Errorf("HTTP status %d", resp.StatusCode))
	return r
}

func statusExpected(code int, expected []int) bool {
	if len(expected) == 0 {
		return code >= 200 && code < 400
	}
	return slices.Contains(expected, code)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}
