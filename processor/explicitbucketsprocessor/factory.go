// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package explicitbucketsprocessor // import "github.com/netpulse/netpulse/processor/explicitbucketsprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/netpulse/netpulse/processor/explicitbucketsprocessor/internal/metadata"
)

var capabilities = consumer.Capabilities{MutatesData: true}

// NewFactory returns the explicit_buckets processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		processor.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	c := newConverter(cfg.(*Config))
	return processorhelper.NewMetrics(ctx, set, cfg, next, c.processMetrics,
		processorhelper.WithCapabilities(capabilities))
}
