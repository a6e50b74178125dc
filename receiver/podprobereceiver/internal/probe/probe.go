// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package probe runs the connection-level probes of pod_probe — TCP connect, HTTP(S) GET
// and DNS lookup — and classifies failures into the low-cardinality error.type values of
// the telemetry contract. ICMP lives in the icmpengine package (a shared-socket engine).
package probe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/netpulse/netpulse/internal/contract"
)

// Phase is one timed step of a probe (for spans): dns, connect, tls, first_byte.
type Phase struct {
	Name     string
	Start    time.Time
	Duration time.Duration
}

// Result is the outcome of one probe.
type Result struct {
	Success  bool
	Start    time.Time
	Duration time.Duration
	// ErrorType is a contract.ErrorType* value when !Success.
	ErrorType string
	// Message is a human-readable failure detail (bounded length).
	Message string
	Phases  []Phase
	// HTTPStatus is the response status of an HTTP probe (0 when none arrived).
	HTTPStatus int
	// Rcode is the DNS response code name of a DNS probe ("NOERROR", "NXDOMAIN", ...).
	Rcode string
	// LocalAddr is the address the probe's connection left from (TCP and HTTP probes that
	// connected), so a declared check can say which vantage it ran from.
	LocalAddr netip.Addr
}

const maxMessage = 256

func fail(r *Result, errType string, err error) {
	r.Success = false
	r.ErrorType = errType
	if err != nil {
		msg := err.Error()
		if len(msg) > maxMessage {
			msg = msg[:maxMessage]
		}
		r.Message = msg
	}
}

// PolicyError is an address refused by an AddressPolicy before any packet was sent.
type PolicyError struct{ Err error }

func (e *PolicyError) Error() string { return "refused by target policy: " + e.Err.Error() }
func (e *PolicyError) Unwrap() error { return e.Err }

// vet adapts an AddressPolicy to a net.Dialer Control function.
func vet(policy AddressPolicy) func(network, address string, c syscall.RawConn) error {
	if policy == nil {
		return nil
	}
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if err := policy(ap.Addr().Unmap()); err != nil {
			return &PolicyError{Err: err}
		}
		return nil
	}
}

// Classify maps a network error to an error.type value.
func Classify(err error) string {
	if err == nil {
		return ""
	}
	var netErr net.Error
	var policyErr *PolicyError
	switch {
	case errors.As(err, &policyErr):
		return contract.ErrorTypePermission
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return contract.ErrorTypeTimeout
	case errors.As(err, &netErr) && netErr.Timeout():
		return contract.ErrorTypeTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return contract.ErrorTypeRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ENETDOWN), errors.Is(err, syscall.EADDRNOTAVAIL):
		return contract.ErrorTypeUnreachable
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return contract.ErrorTypePermission
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return contract.ErrorTypeDNS
	}
	return contract.ErrorTypeOther
}
