// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/netpulse/netpulse/internal/contract"
)

// DNSOptions configure a DNS probe.
type DNSOptions struct {
	// Server is host:port of the DNS server to ask.
	Server string
	// Name is the name to look up (made fully qualified).
	Name string
	// QType is the query type name: A, AAAA, SRV, ... (default A).
	QType string
	// Protocol is udp (default) or tcp.
	Protocol string
	Timeout  time.Duration
	// AcceptNXDOMAIN counts NXDOMAIN as success (the server answered authoritatively).
	AcceptNXDOMAIN bool
}

// DNS sends one query to Server and reports the lookup time and the response code. Any
// rcode other than NOERROR (and NXDOMAIN when accepted) is a dns_error.
func DNS(ctx context.Context, o DNSOptions) Result {
	r := Result{Start: time.Now()}
	qtype, ok := dns.StringToType[strings.ToUpper(orDefault(o.QType, "A"))]
	if !ok {
		fail(&r, contract.ErrorTypeOther, fmt.Errorf("unknown DNS query type %q", o.QType))
		return r
	}
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(o.Name), qtype)
	client := &dns.Client{Net: orDefault(o.Protocol, "udp"), Timeout: o.Timeout}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, rtt, err := client.ExchangeContext(ctx, msg, o.Server)
	r.Duration = time.Since(r.Start)
	if err != nil {
		fail(&r, classifyDNS(err), err)
		return r
	}
	r.Phases = []Phase{{Name: "lookup", Start: r.Start, Duration: rtt}}
	r.Rcode = dns.RcodeToString[resp.Rcode]
	if resp.Rcode == dns.RcodeSuccess || (o.AcceptNXDOMAIN && resp.Rcode == dns.RcodeNameError) {
		r.Success = true
		return r
	}
	fail(&r, contract.ErrorTypeDNS, fmt.Errorf("DNS %s for %s: %s", dns.TypeToString[qtype], o.Name, r.Rcode))
	return r
}

func classifyDNS(err error) string {
	var opErr *net.OpError
	if et := Classify(err); et != contract.ErrorTypeOther {
		return et
	}
	if errors.As(err, &opErr) {
		return contract.ErrorTypeUnreachable
	}
	return contract.ErrorTypeDNS
}

// DefaultDNSServer returns the first nameserver of resolvConf (host:53), which inside a pod
// is the cluster DNS service.
func DefaultDNSServer(resolvConf string) (string, error) {
	cfg, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", resolvConf, err)
	}
	if len(cfg.Servers) == 0 {
		return "", fmt.Errorf("%s lists no nameserver", resolvConf)
	}
	return net.JoinHostPort(cfg.Servers[0], cfg.Port), nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
