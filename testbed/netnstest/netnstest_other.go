// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package netnstest

import (
	"errors"
	"testing"
)

// AllowSkipEnv is the environment variable that turns "must run as root"
// failures into skips: NETPULSE_ALLOW_SKIP_PRIVILEGED=1.
const AllowSkipEnv = "NETPULSE_ALLOW_SKIP_PRIVILEGED"

var errUnsupported = errors.New("netnstest: network namespaces need Linux")

// RequireRoot skips t: network namespaces need Linux.
func RequireRoot(t testing.TB) { t.Helper(); t.Skip(errUnsupported.Error()) }

// NS is a network namespace (Linux only).
type NS struct{}

// Option configures Create / New.
type Option func()

// WithSysctl is a no-op outside Linux.
func WithSysctl(string, string) Option { return func() {} }

// WithoutLoopback is a no-op outside Linux.
func WithoutLoopback() Option { return func() {} }

// New skips t: network namespaces need Linux.
func New(t testing.TB, _ ...Option) *NS { t.Helper(); RequireRoot(t); return nil }

// Create returns an error: network namespaces need Linux.
func Create(...Option) (*NS, error) { return nil, errUnsupported }

// Do returns an error: network namespaces need Linux.
func (*NS) Do(func() error) error { return errUnsupported }

// Run fails t: network namespaces need Linux.
func (*NS) Run(t testing.TB, _ func()) { t.Helper(); t.Fatal(errUnsupported) }

// SetSysctl returns an error: network namespaces need Linux.
func (*NS) SetSysctl(string, string) error { return errUnsupported }

// Path returns "".
func (*NS) Path() string { return "" }

// Close does nothing.
func (*NS) Close() error { return nil }

// SetSysctl returns an error outside Linux.
func SetSysctl(string, string) error { return errUnsupported }

// Sysctl returns an error outside Linux.
func Sysctl(string) (string, error) { return "", errUnsupported }

// LinkUp returns an error outside Linux.
func LinkUp(string) error { return errUnsupported }

// MTUPath skips t: network namespaces need Linux.
func MTUPath(t testing.TB, _ bool) *NS { t.Helper(); RequireRoot(t); return nil }
