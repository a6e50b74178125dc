// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpulseviewextension

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/viewserver"
)

// Config of the netpulse_view extension.
type Config struct {
	// The HTTP server: endpoint (default localhost:8089: only the pod itself; set
	// ${env:POD_IP}:8089 or 0.0.0.0:8089 to reach it through a port-forward, a proxy or
	// a Service), and confighttp's tls and auth (an authenticator extension) when the
	// page is not behind the cluster's auth proxy.
	confighttp.ServerConfig `mapstructure:",squash"`

	// The extension's own API credentials (the gateway's service account: list and
	// watch podnetworkhealths, nodes and pods, which it already has). qps/burst bound it;
	// it makes one LIST per informer at start and then only watches.
	kubeclient.Config `mapstructure:",squash"`

	// Namespace restricts the PodNetworkHealth objects and agent pods to one namespace
	// (default: all namespaces).
	Namespace string `mapstructure:"namespace"`
	// NodeConditionType is the node condition shown on the axes: the exporter's
	// node_conditions.type (default netpulse.io/PodNetworkProblem).
	NodeConditionType string `mapstructure:"node_condition_type"`
	// PodSelector selects the agent pods whose node places pod targets (default
	// app.kubernetes.io/part-of=netpulse,app.kubernetes.io/component=agent); "-" watches
	// no pods (targets are then placed by the node they observe from).
	PodSelector string `mapstructure:"pod_selector"`
	// RefreshInterval is how often the page polls (default 2s; unchanged state costs a
	// 304 and no rebuild).
	RefreshInterval time.Duration `mapstructure:"refresh_interval"`
	// MaxMatrixNodes bounds one node x node matrix (default 150): larger clusters open on
	// the zone x zone view and drill down into zones.
	MaxMatrixNodes int `mapstructure:"max_matrix_nodes"`
	// AllowedHosts are the host names (no port; "*.domain" for any name under domain) the
	// page answers to besides IP literals and localhost: a request naming another Host gets
	// 421 (the DNS-rebinding defence). Add the name a proxy or an Ingress forwards with.
	AllowedHosts []string `mapstructure:"allowed_hosts"`
	// Live: the cells without an object show the newest probe result the gateway received
	// (rotating probes included), from the pod_network_health exporter in the same
	// collector while it holds the writer Lease (internal/livematrix).
	Live LiveConfig `mapstructure:"live"`
}

// LiveConfig bounds the live matrix: the view owns it (no view, no memory spent).
type LiveConfig struct {
	// Enabled (default true) keeps the live matrix.
	Enabled bool `mapstructure:"enabled"`
	// MaxCells bounds the (observer node, target node) cells held (default 1,000,000:
	// about 55 MB; a full 1,000-node matrix). Each observer's share is max_cells over the
	// observers.
	MaxCells int `mapstructure:"max_cells"`
	// MaxAge drops a cell whose newest round is older (default 10m, the exporter's
	// default target_ttl).
	MaxAge time.Duration `mapstructure:"max_age"`
}

// Validate names every offending field.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := c.Config.Check(); err != nil {
		errs = append(errs, err)
	}
	if c.NetAddr.Endpoint == "" {
		add("endpoint: required (host:port to serve the page on, e.g. localhost:8089)")
	}
	if c.Namespace != "" {
		if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
			add("namespace: %q: %s", c.Namespace, strings.Join(msgs, "; "))
		}
	}
	if c.NodeConditionType == "" {
		add("node_condition_type: required (the exporter's node_conditions.type)")
	} else if msgs := validation.IsQualifiedName(c.NodeConditionType); len(msgs) > 0 {
		add("node_condition_type: %q: %s", c.NodeConditionType, strings.Join(msgs, "; "))
	}
	if c.PodSelector != "-" {
		if _, err := labels.Parse(c.PodSelector); err != nil || c.PodSelector == "" {
			add("pod_selector: %q: want a label selector, or \"-\" for none", c.PodSelector)
		}
	}
	if c.RefreshInterval < 500*time.Millisecond || c.RefreshInterval > time.Minute {
		add("refresh_interval: %v out of range [500ms, 1m]", c.RefreshInterval)
	}
	if c.MaxMatrixNodes < 10 || c.MaxMatrixNodes > 1000 {
		add("max_matrix_nodes: %d out of range [10, 1000]", c.MaxMatrixNodes)
	}
	if c.Live.Enabled {
		if c.Live.MaxCells < 1000 || c.Live.MaxCells > 50_000_000 {
			add("live::max_cells: %d out of range [1000, 50000000]", c.Live.MaxCells)
		}
		if c.Live.MaxAge < time.Minute || c.Live.MaxAge > 24*time.Hour {
			add("live::max_age: %v out of range [1m, 24h]", c.Live.MaxAge)
		}
	}
	if err := viewserver.ValidateAllowedHosts(c.AllowedHosts); err != nil {
		add("allowed_hosts::%v", err)
	}
	return errors.Join(errs...)
}
