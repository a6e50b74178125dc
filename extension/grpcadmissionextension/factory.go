// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package grpcadmissionextension

import (
	"context"
	"fmt"
	"net"
	"sync"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/netpulse/netpulse/extension/grpcadmissionextension/internal/metadata"
	"github.com/netpulse/netpulse/internal/identity"
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
		slots:      make(chan struct{}, c.MaxInFlight),
		perSender:  c.MaxInFlightPerSender,
		bySender:   map[string]int{},
		tb:         tb,
		log:        set.Logger,
		full:       status.Error(codes.Unavailable, fmt.Sprintf("grpc_admission: %d requests in flight (max_in_flight); retry later", c.MaxInFlight)),
		senderFull: status.Error(codes.Unavailable, fmt.Sprintf("grpc_admission: %d requests of this sender in flight (max_in_flight_per_sender); retry later", c.MaxInFlightPerSender)),
	}, nil
}

// admission is a counting semaphore (a buffered channel: one slot a request in flight)
// shared by every server that lists the extension, and a count of each sender's requests
// in flight (its own mutex and map: the channel cannot be keyed; an entry lives only while
// its sender has a request in flight, so the map holds at most max_in_flight entries).
type admission struct {
	slots      chan struct{}
	perSender  int
	mu         sync.Mutex
	bySender   map[string]int
	tb         *metadata.TelemetryBuilder
	log        *zap.Logger
	full       error
	senderFull error
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
	if a.perSender > 0 {
		key := senderOf(ctx)
		if !a.enter(key) {
			a.tb.GrpcAdmissionRefusedPerSender.Add(ctx, 1)
			return nil, a.senderFull
		}
		defer a.leave(key)
	}
	select {
	case a.slots <- struct{}{}:
	default:
		a.tb.GrpcAdmissionRefused.Add(ctx, 1)
		return nil, a.full
	}
	defer func() { <-a.slots }()
	return handler(ctx, req)
}

// enter counts one more request of the sender in flight, unless it is at its bound.
func (a *admission) enter(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bySender[key] >= a.perSender {
		return false
	}
	a.bySender[key]++
	return true
}

func (a *admission) leave(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bySender[key]--; a.bySender[key] <= 0 {
		delete(a.bySender, key)
	}
}

// senderOf names the request's sender: the pod k8s_token_auth authenticated (a pod's
// token is bound to it, so one agent is one sender however many connections it opens),
// else the service account, else the peer's IP address (not its port: a new connection is
// not a new sender). Only the authenticator's own AuthData is read, never metadata, which
// a client of a server without authentication could set to pose as many senders.
func senderOf(ctx context.Context) string {
	info := client.FromContext(ctx)
	if a, ok := info.Auth.(*identity.AuthData); ok && a != nil {
		switch id := a.Identity(); {
		case id.PodUID != "":
			return "pod/" + id.PodUID
		case id.ServiceAccount != "":
			return "subject/" + id.Subject()
		}
	}
	if addr := info.Addr; addr != nil {
		if host, _, err := net.SplitHostPort(addr.String()); err == nil {
			return "addr/" + host
		}
		return "addr/" + addr.String()
	}
	return ""
}
