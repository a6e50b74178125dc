// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpulseviewextension

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/zap"

	"github.com/netpulse/netpulse/internal/livematrix"
	"github.com/netpulse/netpulse/internal/ratelog"
	"github.com/netpulse/netpulse/internal/viewserver"
)

type view struct {
	cfg *Config
	set extension.Settings
	hub *livematrix.Hub

	mu      sync.Mutex
	src     *viewserver.Source
	server  *http.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
	detach  func() // lets the live matrix go
}

func newView(cfg *Config, set extension.Settings, hub *livematrix.Hub) *view {
	return &view{cfg: cfg, set: set, hub: hub}
}

// Start listens, starts the informers and returns at once: the API answers 503 until
// their first LIST completed.
func (v *view) Start(ctx context.Context, host component.Host) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stopped {
		return errors.New("netpulse_view: started after shutdown")
	}
	rc, err := v.cfg.RESTConfig("netpulse/netpulse_view")
	if err != nil {
		return err
	}
	src, err := viewserver.NewSource(rc, viewserver.SourceOptions{
		Namespace: v.cfg.Namespace, ConditionType: v.cfg.NodeConditionType, PodSelector: v.cfg.PodSelector,
		// The writers' summaries and Leases are in the gateway's own namespace (the
		// exporter's lease_namespace defaults to it too), where its Role lets it list them;
		// unset outside a pod: the objects' namespace, else all.
		SummaryNamespace: os.Getenv("POD_NAMESPACE"),
	})
	if err != nil {
		return err
	}
	misdirected := ratelog.New(v.set.Logger, time.Minute, 1)
	opts := viewserver.HandlerOptions{
		RefreshInterval: v.cfg.RefreshInterval, MaxMatrixNodes: v.cfg.MaxMatrixNodes,
		AllowedHosts: v.cfg.AllowedHosts,
		OnMisdirected: func(host string) {
			misdirected.Log(zap.WarnLevel, "netpulse_view: request for a Host name not in allowed_hosts answered 421 (a DNS-rebinding page, or a proxy's name to add to allowed_hosts)",
				zap.String("host", host))
		},
		NoLive: "no live data: live.enabled is false in this view's configuration",
	}
	var detach func()
	if v.cfg.Live.Enabled {
		var store *livematrix.Store
		store, detach = v.hub.Attach(livematrix.Config{MaxCells: v.cfg.Live.MaxCells, MaxAge: v.cfg.Live.MaxAge})
		opts.Live = v.hub.Reader(store)
	}
	h, err := viewserver.NewHandler(src, opts)
	if err != nil {
		if detach != nil {
			detach()
		}
		return err
	}
	srv, err := v.cfg.ToServer(ctx, host.GetExtensions(), v.set.TelemetrySettings, h)
	if err != nil {
		if detach != nil {
			detach()
		}
		return err
	}
	ln, err := v.cfg.ToListener(ctx)
	if err != nil {
		if detach != nil {
			detach()
		}
		return err
	}
	v.src, v.server, v.detach = src, srv, detach
	runCtx, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	logger := v.set.Logger
	logger.Info("netpulse_view: serving the connectivity view (read-only)", zap.String("address", ln.Addr().String()))
	src.Start()
	v.wg.Add(2)
	go func() {
		defer v.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	go func() {
		defer v.wg.Done()
		t0 := time.Now()
		if src.WaitForSync(runCtx) {
			logger.Info("netpulse_view: informers synced", zap.Duration("after", time.Since(t0)))
		}
	}()
	return nil
}

// Shutdown stops the server and the informers. Safe without Start and more than once.
func (v *view) Shutdown(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stopped = true
	var err error
	if v.server != nil {
		err = v.server.Shutdown(ctx)
		v.server = nil
	}
	if v.cancel != nil {
		v.cancel()
	}
	if v.src != nil {
		v.src.Shutdown()
		v.src = nil
	}
	v.wg.Wait()
	if v.detach != nil {
		v.detach()
		v.detach = nil
	}
	return err
}
