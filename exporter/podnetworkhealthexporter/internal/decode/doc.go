// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package decode is the first stage of the pod_network_health exporter, and the only code
// that touches pdata: pod_probe's OTLP metrics -> []observation.Observation (one per source
// pod x target x probe type x round), diffing cumulative sums and exponential histograms
// per stream, bounding streams per source and discarding implausible jumps. It does no I/O
// and never reads the clock: callers pass `now`.
package decode // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/decode"
