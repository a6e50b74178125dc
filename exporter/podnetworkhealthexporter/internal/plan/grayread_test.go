// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/internal/matrix"
)

// The Degraded messages GrayMessage writes are read back by kubectl netpulse why and the
// view (internal/matrix ParseGray): each side, its node or zone pair and its figures
// survive the round trip, so a change of wording here that the reader does not follow
// fails here rather than in a cluster.
func TestGrayMessagesReadBack(t *testing.T) {
	loss := verdict.GrayStatus{Lossy: true, Sent: 1440, Lost: 75, Span: 2 * time.Minute, Contributors: 4}
	slow := verdict.GrayStatus{HighLatency: true, Median: 20 * time.Millisecond, Baseline: 200 * time.Microsecond, Exceeding: 4, Voters: 5}
	for _, tc := range []struct {
		g                            verdict.PairGray
		side, node, fromZone, toZone string
	}{
		{verdict.PairGray{Reason: DegradedPacketLoss, Side: verdict.SideTarget, Node: "node-5", Status: loss}, matrix.SideTarget, "node-5", "", ""},
		{verdict.PairGray{Reason: DegradedPacketLoss, Side: verdict.SideObserver, Node: "node-3", Status: loss}, matrix.SideObserver, "node-3", "", ""},
		{verdict.PairGray{Reason: DegradedPacketLoss, Side: verdict.SidePath, Status: loss}, matrix.SidePath, "", "", ""},
		{verdict.PairGray{Reason: DegradedPacketLoss, Side: verdict.SideZone, FromZone: "eu-west-1a", ToZone: "eu-west-1b", TargetNodes: 3, Status: loss},
			matrix.SideZone, "", "eu-west-1a", "eu-west-1b"},
		{verdict.PairGray{Reason: DegradedHighLatency, Side: verdict.SideTarget, Node: "node-6", Status: slow}, matrix.SideTarget, "node-6", "", ""},
		{verdict.PairGray{Reason: DegradedHighLatency, Side: verdict.SideObserver, Node: "node-7", Status: slow}, matrix.SideObserver, "node-7", "", ""},
	} {
		msg := GrayMessage(tc.g)
		got := matrix.ParseGray(tc.g.Reason, msg)
		require.NotNil(t, got, msg)
		assert.Equal(t, []string{tc.g.Reason, tc.side, tc.node, tc.fromZone, tc.toZone},
			[]string{got.Reason, got.Side, got.Node, got.FromZone, got.ToZone}, msg)
		assert.NotEmpty(t, got.Figures, msg)
		assert.NotEqual(t, msg, got.Figures, "the side is cut off the figures: %s", msg)
	}
}
