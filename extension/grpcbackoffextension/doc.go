// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package grpcbackoffextension implements the grpc_backoff extension: a gRPC client
// middleware (configgrpc's middlewares) that sets the client's reconnection backoff. See
// README.md.
//
//go:generate mdatagen metadata.yaml
package grpcbackoffextension // import "github.com/netpulse/netpulse/extension/grpcbackoffextension"
