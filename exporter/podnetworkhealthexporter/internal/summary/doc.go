// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package summary is gone: its parts live in the stage packages (observation, decode,
// verdict, plan). What remains are aliases for the declared checks' tests until they move.
package summary // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/summary"
