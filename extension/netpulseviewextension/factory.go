// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpulseviewextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/extension"

	"github.com/netpulse/netpulse/extension/netpulseviewextension/internal/metadata"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/livematrix"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/viewserver"
)

// DefaultEndpoint is loopback only: exposing the page is a decision (docs/view.md).
const DefaultEndpoint = "localhost:8089"

// NewFactory creates the netpulse_view extension factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	srv := confighttp.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = DefaultEndpoint
	return &Config{
		ServerConfig:      srv,
		Config:            kubeclient.DefaultConfig(),
		NodeConditionType: matrix.DefaultConditionType,
		PodSelector:       viewserver.DefaultPodSelector,
		RefreshInterval:   viewserver.DefaultRefreshInterval,
		MaxMatrixNodes:    viewserver.DefaultMaxMatrixNodes,
		Live:              LiveConfig{Enabled: true, MaxCells: livematrix.DefaultMaxCells, MaxAge: livematrix.DefaultMaxAge},
	}
}

func createExtension(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newView(cfg.(*Config), set, livematrix.Default), nil
}
