// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/checkstatus"
)

// Which verdict changes become Events: an outage, its end, a flapping period's start; a
// pair that flapped back within one reconcile, or went Unknown, gets none.
func TestPairEvents(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	k := observation.PairKey{SourceNamespace: "ns", SourcePod: "a"}
	evs := PairEvents([]observation.Transition{
		{Key: k, Old: observation.VerdictReachable, New: observation.VerdictUnreachable, At: at, Message: "down"},
		{Key: k, Old: observation.VerdictUnreachable, New: observation.VerdictReachable, At: at},
		{Key: k, Old: observation.VerdictReachable, New: observation.VerdictUnreachable, At: at, Flapping: true, Message: "flapping"},
		{Key: k, Old: observation.VerdictReachable, New: observation.VerdictReachable, Flips: 2, At: at},
		{Key: k, Old: observation.VerdictReachable, New: observation.VerdictUnknown, At: at},
	})
	var reasons []string
	for _, e := range evs {
		reasons = append(reasons, e.Reason)
	}
	assert.Equal(t, []string{checkstatus.EventOutageDetected, checkstatus.EventRestored, EventFlapping}, reasons)
	assert.Equal(t, "flapping", evs[2].Message)
}
