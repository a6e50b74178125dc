// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package grpcadmissionextension

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configmiddleware"
	"go.opentelemetry.io/collector/config/confignet"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/netpulse/netpulse/extension/grpcadmissionextension/internal/metadata"
)

func load(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config)
}

func TestConfig(t *testing.T) {
	assert.Equal(t, &Config{MaxInFlight: 1000}, load(t, ""))
	assert.Equal(t, &Config{MaxInFlight: 64}, load(t, "custom"))
	err := confmap.Validate(load(t, "invalid"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_in_flight: 0 out of range [1, 1000000]")
}

// blockingServer holds each Export until release is closed.
type blockingServer struct {
	pmetricotlp.UnimplementedGRPCServer
	entered chan struct{}
	release chan struct{}
}

func (s *blockingServer) Export(ctx context.Context, _ pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return pmetricotlp.NewExportResponse(), nil
}

// A real OTLP gRPC server built by configgrpc with the extension as its middleware: with 3
// requests held, a 4th is refused with Unavailable at once (and counted), and once they are
// answered requests are admitted again.
func TestRequestsPastTheBoundAreRefusedAtOnce(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := extensiontest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	ext, err := NewFactory().Create(context.Background(), set, &Config{MaxInFlight: 3})
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()
	id := component.NewID(metadata.Type)

	sc := configgrpc.NewDefaultServerConfig()
	sc.NetAddr = confignet.AddrConfig{Endpoint: "127.0.0.1:0", Transport: confignet.TransportTypeTCP}
	sc.Middlewares = []configmiddleware.Config{{ID: id}}
	srv, err := sc.ToServer(context.Background(), map[component.ID]component.Component{id: ext}, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	s := &blockingServer{entered: make(chan struct{}, 10), release: make(chan struct{})}
	pmetricotlp.RegisterGRPCServer(srv, s)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := pmetricotlp.NewGRPCClient(conn)
	export := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(pmetric.NewMetrics()))
		return err
	}
	var held sync.WaitGroup
	for range 3 {
		held.Add(1)
		go func() {
			defer held.Done()
			assert.NoError(t, export())
		}()
	}
	for range 3 {
		<-s.entered
	}
	err = export()
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err), "retryable by the OTLP exporters")
	assert.Contains(t, err.Error(), "3 requests in flight")
	m, err := tel.GetMetric("otelcol_grpc_admission_refused")
	require.NoError(t, err)
	assert.Equal(t, int64(1), m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)

	close(s.release)
	held.Wait()
	require.NoError(t, export(), "admitted again once the held requests were answered")
	<-s.entered
}

func TestShutdownWithoutStartAndTwice(t *testing.T) {
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), NewFactory().CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Shutdown(context.Background()))
	require.NoError(t, ext.Shutdown(context.Background()))
}
