// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A pair's loss episode ends once; a verdict whose evidence began before that end is the
// same episode (not written again), one whose evidence began after is a new one.
func TestPairGrayEpisodeEndsOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var p pairInfo
	loss := func(evidence time.Time) PairGray {
		return PairGray{Reason: reasonPacketLoss, Side: SideTarget, Status: GrayStatus{Lossy: true, EvidenceStart: evidence}}
	}
	assert.Equal(t, reasonPacketLoss, p.episode(loss(t0), t0.Add(time.Minute)).Reason, "a first episode")
	assert.Equal(t, reasonPacketLoss, p.episode(loss(t0), t0.Add(2*time.Minute)).Reason, "it goes on")
	cleared := t0.Add(3 * time.Minute)
	assert.Empty(t, p.episode(PairGray{}, cleared).Reason, "it ends")
	// Another window, set on the episode's echoes after it ended: nothing.
	assert.Empty(t, p.episode(loss(t0.Add(90*time.Second)), cleared.Add(5*time.Second)).Reason)
	assert.Empty(t, p.episode(loss(t0.Add(90*time.Second)), cleared.Add(30*time.Second)).Reason)
	// Latency is judged on the newest rounds: not held back.
	assert.Equal(t, reasonHighLatency, p.episode(PairGray{Reason: reasonHighLatency}, cleared.Add(40*time.Second)).Reason)
	assert.Empty(t, p.episode(PairGray{}, cleared.Add(50*time.Second)).Reason)
	// A loss whose evidence begins after the end is a new episode.
	assert.Equal(t, reasonPacketLoss, p.episode(loss(cleared.Add(time.Minute)), cleared.Add(2*time.Minute)).Reason)
}
