// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

import (
	"fmt"
	"os"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/pprofextension"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/nopexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/netpulse/netpulse/testbed/syntheticagent"
)

// envReferenceConfig, set in a child's environment, makes the test binary run the
// reference collector with that configuration file instead of the tests: the same
// collector core and OTLP receiver as otelcol-netpulse (same module versions), with
// nothing but the nop exporter behind it. Re-executing the test binary spares a second
// build and keeps the reference a process of its own, measured like the gateway.
const envReferenceConfig = "NETPULSE_INGESTBENCH_REFERENCE_CONFIG"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envReferenceConfig); cfg != "" {
		os.Exit(runReference(cfg))
	}
	os.Exit(m.Run())
}

func referenceFactories() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](nopexporter.NewFactory()); err != nil {
		return f, err
	}
	f.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](pprofextension.NewFactory())
	return f, err
}

func runReference(configFile string) int {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "ingestbench-reference", Description: "otlp -> nop", Version: syntheticagent.AgentVersion},
		Factories: referenceFactories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{envprovider.NewFactory(), fileprovider.NewFactory()},
		}},
	}
	cmd := otelcol.NewCommand(set)
	cmd.SetArgs([]string{"--config", configFile})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
