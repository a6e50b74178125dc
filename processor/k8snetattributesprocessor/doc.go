// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package k8snetattributesprocessor implements the k8s_net_attributes processor: it maps
// addresses found in telemetry (Resource, data point, span and log record attributes) to
// the Kubernetes pod, node, workload, zone and region they belong to, using the shared,
// memory-lean pod/node index of internal/k8sindex.
//
//go:generate mdatagen metadata.yaml
package k8snetattributesprocessor // import "github.com/netpulse/netpulse/processor/k8snetattributesprocessor"
