// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package observation holds the leaf types every stage of the pod_network_health exporter
// shares: what one probe round says (Observation, Source, Target, PairKey), the RTT
// histogram, and a pair's verdict and summary (Verdict, Summary, Transition, Outage). It
// has no logic beyond the types' own methods and imports no other stage.
package observation // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
