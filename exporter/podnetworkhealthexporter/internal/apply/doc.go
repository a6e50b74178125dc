// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package apply is the last stage of the pod_network_health exporter and its one writer:
// every API request (PodNetworkHealth objects, node and pod conditions, declared checks'
// status, Events) goes through Writer under one write budget, most urgent first, with
// per-key back-off, conflict re-reads and never a rewrite of an identical status
// (writer.go, over the queue of package writequeue); conditions.go holds the condition
// patches and leader.go the writer Lease. Everything before this stage is pure.
package apply // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
