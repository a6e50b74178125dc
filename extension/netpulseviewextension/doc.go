// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package netpulseviewextension implements the netpulse_view extension: the gateway
// serves netpulse's connectivity matrix as a read-only web page and JSON API (package
// viewserver), from its own informers on what the pod_network_health exporter writes.
// Off unless listed in the service's extensions. See README.md and docs/view.md.
//
//go:generate mdatagen metadata.yaml
package netpulseviewextension // import "github.com/netpulse/netpulse/extension/netpulseviewextension"
