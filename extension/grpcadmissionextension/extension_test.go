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
	"go.opentelemetry.io/collector/client"
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
	"github.com/netpulse/netpulse/internal/identity"
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
	assert.Equal(t, &Config{MaxInFlight: 64, MaxInFlightPerSender: 8}, load(t, "custom"))
	err := confmap.Validate(load(t, "invalid"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_in_flight: 0 out of range [1, 1000000]")
	err = confmap.Validate(load(t, "invalid_per_sender"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_in_flight_per_sender: 20 out of range [0, max_in_flight=10] (0: off)")
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

// serve starts the extension with cfg and a real OTLP gRPC server built by configgrpc with
// it as its middleware, whose Exports block until released; both stop with the test.
func serve(t *testing.T, cfg *Config) (*componenttest.Telemetry, component.Component, *blockingServer, net.Listener) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := extensiontest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	ext, err := NewFactory().Create(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
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
	t.Cleanup(srv.Stop) // before the extension's Shutdown (cleanups run last first)
	return tel, ext, s, l
}

// A real OTLP gRPC server built by configgrpc with the extension as its middleware: with 3
// requests held, a 4th is refused with Unavailable at once (and counted), and once they are
// answered requests are admitted again.
func TestRequestsPastTheBoundAreRefusedAtOnce(t *testing.T) {
	tel, _, s, l := serve(t, &Config{MaxInFlight: 3})

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

// One sender (here a client address; an authenticated pod in the gateway) at
// max_in_flight_per_sender: its next request is refused at once (and counted) while another
// sender is admitted, over real sockets from two loopback addresses. The per-sender counts
// hold no entry once nothing is in flight.
func TestOneSenderCannotHoldTheSharedBound(t *testing.T) {
	tel, ext, s, l := serve(t, &Config{MaxInFlight: 10, MaxInFlightPerSender: 2})

	// Each export on a new connection from the sender's address: connections are not
	// senders.
	export := func(from string) error {
		conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
				return d.DialContext(ctx, "tcp", addr)
			}))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(pmetric.NewMetrics()))
		return err
	}
	var held sync.WaitGroup
	for range 2 {
		held.Add(1)
		go func() {
			defer held.Done()
			assert.NoError(t, export("127.0.0.1"))
		}()
	}
	for range 2 {
		<-s.entered
	}
	err := export("127.0.0.1")
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, err.Error(), "2 requests of this sender in flight")
	m, err := tel.GetMetric("otelcol_grpc_admission_refused_per_sender")
	require.NoError(t, err)
	assert.Equal(t, int64(1), m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)

	held.Add(1)
	go func() {
		defer held.Done()
		assert.NoError(t, export("127.0.0.2"), "another sender is admitted")
	}()
	<-s.entered
	close(s.release)
	held.Wait()
	a := ext.(*admission)
	a.mu.Lock()
	assert.Empty(t, a.bySender, "no entry without a request in flight")
	a.mu.Unlock()
}

// The sender is the pod k8s_token_auth authenticated, whatever connection it came on;
// without one, the peer's IP address; metadata is never read (a client could set it).
func TestSenderOf(t *testing.T) {
	addr := &net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 40123}
	pod := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-a", PodUID: "uid-a", NodeName: "node-a"}
	ctx := client.NewContext(context.Background(), client.Info{Addr: addr, Auth: identity.NewAuthData(pod)})
	assert.Equal(t, "pod/uid-a", senderOf(ctx))
	sa := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-gateway"}
	ctx = client.NewContext(context.Background(), client.Info{Addr: addr, Auth: identity.NewAuthData(sa)})
	assert.Equal(t, "subject/system:serviceaccount:netpulse:netpulse-gateway", senderOf(ctx))
	ctx = client.NewContext(context.Background(), client.Info{Addr: addr, Metadata: client.NewMetadata(map[string][]string{
		identity.MetadataNamespace: {"netpulse"}, identity.MetadataServiceAccount: {"x"}, identity.MetadataPodName: {"forged"},
		identity.MetadataPodUID: {"forged"}, identity.MetadataNodeName: {"n"}})})
	assert.Equal(t, "addr/10.0.0.7", senderOf(ctx), "metadata is not an identity here")
	assert.Empty(t, senderOf(context.Background()))
}

func TestShutdownWithoutStartAndTwice(t *testing.T) {
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), NewFactory().CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Shutdown(context.Background()))
	require.NoError(t, ext.Shutdown(context.Background()))
}
