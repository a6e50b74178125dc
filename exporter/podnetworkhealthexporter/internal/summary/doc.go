// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package summary is the pure core of the pod_network_health exporter: it turns pod_probe
// metrics into per-pair summaries and decides when a summary is worth an API write. It does
// no I/O and never reads the clock: callers pass `now`.
//
//   - Decoder: pmetric.Metrics -> []Observation (one per source pod x target x probe type x
//     round), diffing cumulative sums and exponential histograms per stream.
//   - Summarizer: Observations -> Summary per PairKey (source pod -> target): reachability
//     verdict with hysteresis, windowed RTT quantiles and loss, per-probe-type results,
//     observers, a bounded outage history, and a feed of verdict Transitions.
//   - Decide: the write budget - whether a Summary differs enough from the last written
//     status (verdict, latency, loss) or is old enough (heartbeat) to be written.
//
// The rules and the measured write rates are documented in
// exporter/podnetworkhealthexporter/docs/summary.md.
package summary // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/summary"
