// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package monitoringtest proves netpulse against a stock Prometheus 2.x (Debian's 2.42, no
// feature flags): the RTT histogram the gateway exports is queryable with
// histogram_quantile, remote write keeps every series, and the alert rules and the Grafana
// dashboard in deploy/monitoring name only series the collector exports. Its tests run the
// built otelcol-netpulse and the real prometheus and promtool binaries on loopback.
package monitoringtest
