// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package icmpengine

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"time"
)

// Engine is only implemented on Linux.
type Engine struct{}

// New returns an error: the engine needs Linux.
func New(Config) (*Engine, error) {
	return nil, fmt.Errorf("%w: the ICMP engine needs Linux (running on %s)", ErrUnsupported, runtime.GOOS)
}

// Start returns ErrUnsupported.
func (*Engine) Start(context.Context) error { return ErrUnsupported }

// Close does nothing.
func (*Engine) Close() error { return nil }

// Info returns nil.
func (*Engine) Info() []SocketInfo { return nil }

// Stats returns zero counters.
func (*Engine) Stats() Stats { return Stats{} }

// Ping returns ErrUnsupported.
func (*Engine) Ping(_ context.Context, addr netip.Addr, _ int, _, _ time.Duration) (Result, error) {
	return Result{Addr: addr}, ErrUnsupported
}

// Submit returns ErrUnsupported.
func (*Engine) Submit(context.Context, Request, func(Result, error)) error { return ErrUnsupported }
