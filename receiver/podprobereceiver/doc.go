// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package podprobereceiver implements the pod_probe receiver: sampled pod-to-pod probes
// (ICMP, TCP, HTTP, DNS) emitted as OpenTelemetry metrics and optional spans.
package podprobereceiver // import "github.com/netpulse/netpulse/receiver/podprobereceiver"
