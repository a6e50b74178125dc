// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package grpcadmissionextension implements the grpc_admission extension: a gRPC server
// middleware (configgrpc's middlewares) that refuses requests past max_in_flight at once.
// See README.md.
//
//go:generate mdatagen metadata.yaml
package grpcadmissionextension // import "github.com/netpulse/netpulse/extension/grpcadmissionextension"
