// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ratelog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestBurstThenSuppressedCount(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := New(zap.New(core), 300*time.Millisecond, 2)
	for range 5 {
		l.Log(zap.WarnLevel, "rejected")
	}
	require.Equal(t, 2, logs.Len(), "the burst, then nothing within the interval")
	time.Sleep(400 * time.Millisecond) // one more line allowed: it reports what was suppressed
	l.Log(zap.WarnLevel, "rejected")
	require.Equal(t, 3, logs.Len())
	require.Equal(t, int64(3), logs.All()[2].ContextMap()["suppressed_since_last"])
	l.Log(zap.DebugLevel, "below the level") // allowed by the rate, dropped by the level
	require.Equal(t, 3, logs.Len())
}
