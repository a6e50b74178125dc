// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package summary keeps per-pair summaries and decides when a summary is worth an API
// write. It does no I/O and never reads the clock: callers pass `now`.
//
//   - Summarizer: observation.Observations -> observation.Summary per PairKey
//     (source pod -> target): reachability verdict with hysteresis, windowed RTT quantiles
//     and loss, per-probe-type results, observers, a bounded outage history, and a feed of
//     verdict Transitions.
//   - Decide: the write budget - whether a Summary differs enough from the last written
//     status (verdict, latency, loss) or is old enough (heartbeat) to be written.
//
// The rules and the measured write rates are documented in
// exporter/podnetworkhealthexporter/docs/summary.md.
package summary // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/summary"
