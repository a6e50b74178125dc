// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"crypto/tls"
	"errors"
	"net/http/httptrace"
	"net/netip"
	"sync"
	"time"
)

// phaseRecorder collects httptrace callbacks; they may arrive on other goroutines.
type phaseRecorder struct {
	mu                                  sync.Mutex
	dnsStart, connStart, tlsStart, sent time.Time
	phases                              []Phase
	tlsErr                              bool
	local                               netip.Addr
}

func (p *phaseRecorder) add(name string, start time.Time) {
	if start.IsZero() {
		return
	}
	p.phases = append(p.phases, Phase{Name: name, Start: start, Duration: time.Since(start)})
}

func (p *phaseRecorder) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) { p.mu.Lock(); p.dnsStart = time.Now(); p.mu.Unlock() },
		DNSDone:  func(httptrace.DNSDoneInfo) { p.mu.Lock(); p.add("dns", p.dnsStart); p.mu.Unlock() },
		ConnectStart: func(string, string) {
			p.mu.Lock()
			p.connStart = time.Now()
			p.mu.Unlock()
		},
		ConnectDone: func(string, string, error) { p.mu.Lock(); p.add("connect", p.connStart); p.mu.Unlock() },
		TLSHandshakeStart: func() {
			p.mu.Lock()
			p.tlsStart = time.Now()
			p.mu.Unlock()
		},
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			p.mu.Lock()
			p.add("tls", p.tlsStart)
			p.tlsErr = err != nil
			p.mu.Unlock()
		},
		GotConn: func(info httptrace.GotConnInfo) {
			p.mu.Lock()
			p.local = localAddr(info.Conn)
			p.mu.Unlock()
		},
		WroteRequest: func(httptrace.WroteRequestInfo) { p.mu.Lock(); p.sent = time.Now(); p.mu.Unlock() },
		GotFirstResponseByte: func() {
			p.mu.Lock()
			p.add("first_byte", p.sent)
			p.mu.Unlock()
		},
	}
}

func (p *phaseRecorder) list() []Phase {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Phase(nil), p.phases...)
}

func (p *phaseRecorder) tlsFailed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tlsErr
}

func asAny[T error](err error, target *T) bool { return errors.As(err, target) }

func (p *phaseRecorder) localAddr() netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.local
}
