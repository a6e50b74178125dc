// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/testbed/netnstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func addrPort(t *testing.T, a net.Addr) netip.AddrPort {
	ap, err := netip.ParseAddrPort(a.String())
	require.NoError(t, err)
	return ap
}

func TestTCPOpenAndClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	open := addrPort(t, l.Addr())
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	r := TCP(context.Background(), open, time.Second)
	require.True(t, r.Success, "%+v", r)
	require.Positive(t, r.Duration)
	require.Equal(t, "connect", r.Phases[0].Name)

	require.NoError(t, l.Close()) // nothing listens there now
	r = TCP(context.Background(), open, time.Second)
	require.False(t, r.Success)
	require.Equal(t, contract.ErrorTypeRefused, r.ErrorType, r.Message)
}

// A SYN dropped by nftables inside a network namespace is a timeout, not a refusal.
func TestTCPTimeoutInNamespace(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	var r Result
	ns.Run(t, func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		port := addrPort(t, l.Addr()).Port()
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(fmt.Sprintf(`table inet probetest {
  chain in { type filter hook input priority 0; tcp dport %d drop; }
}`, port))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "nft: %s", out)
		r = TCP(context.Background(), addrPort(t, l.Addr()), 300*time.Millisecond)
	})
	require.False(t, r.Success)
	require.Equal(t, contract.ErrorTypeTimeout, r.ErrorType, r.Message)
	require.GreaterOrEqual(t, r.Duration, 250*time.Millisecond)
}

func TestHTTPPhasesAndSlowFirstByte(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond)
		fmt.Fprint(w, strings.Repeat("x", 1<<20))
	}))
	defer srv.Close()
	r := HTTP(context.Background(), srv.URL+"/healthz", HTTPOptions{Timeout: 2 * time.Second, MaxBodyBytes: 1024})
	require.True(t, r.Success, "%+v", r)
	require.Equal(t, 200, r.HTTPStatus)
	phases := map[string]time.Duration{}
	for _, p := range r.Phases {
		phases[p.Name] = p.Duration
	}
	require.Contains(t, phases, "connect")
	require.GreaterOrEqual(t, phases["first_byte"], 150*time.Millisecond, "first byte phase should include the server's delay: %+v", r.Phases)

	r = HTTP(context.Background(), srv.URL, HTTPOptions{Timeout: 50 * time.Millisecond})
	require.False(t, r.Success)
	require.Equal(t, contract.ErrorTypeTimeout, r.ErrorType, r.Message)
}

func TestHTTPStatusAndExpectations(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	r := HTTP(context.Background(), srv.URL, HTTPOptions{Timeout: time.Second})
	require.False(t, r.Success)
	require.Equal(t, contract.ErrorTypeHTTPStatus, r.ErrorType)
	require.Equal(t, 503, r.HTTPStatus)
	r = HTTP(context.Background(), srv.URL, HTTPOptions{Timeout: time.Second, ExpectedStatus: []int{503}})
	require.True(t, r.Success)
}

func TestHTTPNoCrossHostRedirectNoCredentials(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	l, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	other.Listener = l
	other.Start()
	defer other.Close()

	var sawAuth atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "" {
			sawAuth.Store(true)
		}
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/ok":
			w.WriteHeader(http.StatusOK)
		default:
			http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
		}
	}))
	defer srv.Close()

	r := HTTP(context.Background(), srv.URL+"/away", HTTPOptions{Timeout: time.Second, MaxRedirects: 5})
	require.Equal(t, http.StatusFound, r.HTTPStatus, "the cross-host redirect itself is the result")
	require.Zero(t, otherHits.Load(), "a redirect to another host was followed")

	r = HTTP(context.Background(), srv.URL+"/same", HTTPOptions{Timeout: time.Second, MaxRedirects: 1})
	require.True(t, r.Success)
	require.Equal(t, 200, r.HTTPStatus, "same-host redirects are followed up to MaxRedirects")
	r = HTTP(context.Background(), srv.URL+"/same", HTTPOptions{Timeout: time.Second})
	require.Equal(t, http.StatusFound, r.HTTPStatus, "no redirects are followed by default")

	u := strings.Replace(srv.URL, "http://", "http://user:secret@", 1)
	r = HTTP(context.Background(), u, HTTPOptions{Timeout: time.Second})
	require.False(t, r.Success)
	require.Contains(t, r.Message, "credentials")
	require.NotContains(t, r.Message, "secret")
	require.False(t, sawAuth.Load())
}

func TestHTTPPolicyVetsResolvedAddress(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	deny := func(a netip.Addr) error {
		if a.IsLoopback() {
			return fmt.Errorf("loopback address %s refused", a)
		}
		return nil
	}
	// "localhost" resolves to loopback: the policy sees the resolved address.
	r := HTTP(context.Background(), "http://localhost:"+port+"/", HTTPOptions{Timeout: time.Second, Policy: deny})
	require.False(t, r.Success)
	require.Contains(t, r.Message, "refused")
	require.Zero(t, hits.Load())
}

func TestHTTPTLSError(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	r := HTTP(context.Background(), srv.URL, HTTPOptions{Timeout: time.Second})
	require.False(t, r.Success)
	require.Equal(t, contract.ErrorTypeTLS, r.ErrorType, r.Message)
}

func startDNS(t *testing.T, handler dns.HandlerFunc) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: handler, NotifyStartedFunc: func() { close(started) }}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

func TestDNS(t *testing.T) {
	server := startDNS(t, func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if req.Question[0].Name == "svc.cluster.local." {
			rr, _ := dns.NewRR("svc.cluster.local. 5 IN A 192.0.2.7")
			m.Answer = append(m.Answer, rr)
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	r := DNS(context.Background(), DNSOptions{Server: server, Name: "svc.cluster.local", Timeout: time.Second})
	require.True(t, r.Success, "%+v", r)
	require.Equal(t, "NOERROR", r.Rcode)
	require.Positive(t, r.Duration)

	r = DNS(context.Background(), DNSOptions{Server: server, Name: "missing.cluster.local", Timeout: time.Second})
	require.False(t, r.Success)
	require.Equal(t, contract.ErrorTypeDNS, r.ErrorType)
	require.Equal(t, "NXDOMAIN", r.Rcode)
	r = DNS(context.Background(), DNSOptions{Server: server, Name: "missing.cluster.local", Timeout: time.Second, AcceptNXDOMAIN: true})
	require.True(t, r.Success)
}

func TestDNSTimeout(t *testing.T) {
	// A socket that never answers.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	r := DNS(context.Background(), DNSOptions{Server: pc.LocalAddr().String(), Name: "x.local", Timeout: 200 * time.Millisecond})
	require.False(t, r.Success)
	require.Equal(t, contract.ErrorTypeTimeout, r.ErrorType, r.Message)
}

func TestDefaultDNSServer(t *testing.T) {
	path := t.TempDir() + "/resolv.conf"
	require.NoError(t, writeFile(path, "search ns.svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"))
	s, err := DefaultDNSServer(path)
	require.NoError(t, err)
	require.Equal(t, "10.96.0.10:53", s)
	require.NoError(t, writeFile(path, "search x\n"))
	_, err = DefaultDNSServer(path)
	require.ErrorContains(t, err, "no nameserver")
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
