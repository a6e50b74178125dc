// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package grpcbackoffextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"google.golang.org/grpc"

	"github.com/netpulse/netpulse/extension/grpcbackoffextension/internal/metadata"
)

// NewFactory creates the grpc_backoff extension factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, func() component.Config { return defaultConfig() }, createExtension, metadata.ExtensionStability)
}

func createExtension(_ context.Context, _ extension.Settings, cfg component.Config) (extension.Extension, error) {
	return &backoffExtension{cfg: cfg.(*Config)}, nil
}

// backoffExtension holds no resources: it only answers configgrpc's question.
type backoffExtension struct {
	cfg *Config
}

var _ extensionmiddleware.GRPCClient = (*backoffExtension)(nil)

func (*backoffExtension) Start(context.Context, component.Host) error { return nil }

func (*backoffExtension) Shutdown(context.Context) error { return nil }

// GetGRPCClientOptions gives a client that lists the extension in its middlewares the
// configured reconnection backoff.
func (e *backoffExtension) GetGRPCClientOptions(context.Context) ([]grpc.DialOption, error) {
	return e.cfg.DialOptions(), nil
}
