// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package podnetworkhealthexporter implements the pod_network_health exporter: summarised
// pod-network health written back into Kubernetes as PodNetworkHealth status, Events, and
// opt-in node and pod conditions.
package podnetworkhealthexporter // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter"
