// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/checks"
)

// Every written kind has the one shape the exporter runs; the declared checks' controller
// too.
var (
	_ Controller = (*Pairs)(nil)
	_ Controller = (*Nodes)(nil)
	_ Controller = (*GrayNodes)(nil)
	_ Controller = (*Zones)(nil)
	_ Controller = (*Readiness)(nil)
	_ Controller = (*checks.Controller)(nil)
)

// Node and pod conditions are judged on a term's first tick, at once after a per-target
// verdict change, and every 5 s otherwise.
func TestCadence(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var c cadence
	assert.True(t, c.due(t0, 0), "the first tick")
	assert.False(t, c.due(t0.Add(time.Second), 0))
	assert.True(t, c.due(t0.Add(2*time.Second), 1), "a target verdict changed")
	assert.False(t, c.due(t0.Add(3*time.Second), 1))
	assert.False(t, c.due(t0.Add(6*time.Second), 1), "5 s after the last judgement, not the first")
	assert.True(t, c.due(t0.Add(7*time.Second), 1))
	c.reset()
	assert.True(t, c.due(t0.Add(8*time.Second), 1), "a new term's first tick")
}
