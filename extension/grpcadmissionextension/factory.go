// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package grpcadmissionextension

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/netpulse/netpulse/extension/grpcadmissionextension/internal/metadata"
)

// NewFactory creates the grpc_admission extension factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, func() component.Config { return &Config{MaxInFlight: DefaultMaxInFlight} }, createExtension, metadata.ExtensionStability)
}

func createExtension(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	c := cfg.(*Config)
	return &admission{
		slots: make(chan struct{}, c.MaxInFlight),
		tb:    tb,
		log:   set.Logger,
		full:  status.Error(codes.Unavailable, fmt.Sprintf("grpc_admission: %d requests in flight (max_in_flight); retry later", c.MaxInFlight)),
	}, nil
}

// admission is a counting semaphore (a buffered channel: one slot a request in flight)
// shared by every server that lists the extension.
type admission struct {
	slots chan struct{}
	tb    *metadata.TelemetryBuilder
	log   *zap.Logger
	full  error
}

var _ extensionmiddleware.GRPCServer = (*admission)(nil)

func (*admission) Start(context.Context, component.Host) error { return nil }

func (a *admission) Shutdown(context.Context) error {
	a.tb.Shutdown()
	return nil
}

// GetGRPCServerOptions gives a server that lists the extension in its middlewares the
// bound, as a unary interceptor after configgrpc's own (client information, auth): a
// refused request has been read and authenticated, nothing more.
func (a *admission) GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error) {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(a.intercept)}, nil
}

func (a *admission) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	select {
	case a.slots <- struct{}{}:
	default:
		a.tb.GrpcAdmissionRefused.Add(ctx, 1)
		return nil, a.full
	}
	defer func() { <-a.slots }()
	return handler(ctx, req)
}
