// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package summary

import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"

// Transitional aliases for the declared checks' tests (checks_budget_test.go, owned by the
// checks work of issue #29), which still import this package; the types live in package
// observation. Delete with the last importer.
type (
	PairKey    = observation.PairKey
	Transition = observation.Transition
)

// Verdicts, as observation's.
const (
	VerdictReachable   = observation.VerdictReachable
	VerdictUnreachable = observation.VerdictUnreachable
)
