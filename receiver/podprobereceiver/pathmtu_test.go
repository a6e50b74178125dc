// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/icmpengine"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// TestJudgePathMTU: only "small passes, large vanishes without an ICMP error" is a black
// hole; a target that answers nothing, or a sender that refuses the size, says nothing.
func TestJudgePathMTU(t *testing.T) {
	tg := target{addr: netip.MustParseAddr("10.0.0.2"), probe: "icmp", kind: kindPod, stable: true}
	router := netip.MustParseAddr("10.0.0.1")
	passed := icmpengine.Result{Sent: 2, Received: 2}
	lost := icmpengine.Result{Sent: 2, Lost: 2}
	timeout := &icmpengine.ProbeError{Kind: icmpengine.KindTimeout}
	for _, tc := range []struct {
		name         string
		small, large icmpengine.Result
		err          error
		ok           bool
		status       metadata.AttributeNetpulsePathMtuStatus
		passes       int
	}{
		{"both pass", passed, passed, nil, true, metadata.AttributeNetpulsePathMtuStatusOk, 1500},
		{"one large echo passes", passed, icmpengine.Result{Sent: 2, Received: 1, Lost: 1}, nil, true, metadata.AttributeNetpulsePathMtuStatusOk, 1500},
		{"black hole", passed, lost, timeout, true, metadata.AttributeNetpulsePathMtuStatusBlackHole, 1280},
		{"packet too big from a hop", passed, lost, &icmpengine.ProbeError{Kind: icmpengine.KindPacketTooBig, From: router}, true, metadata.AttributeNetpulsePathMtuStatusFragmentationNeeded, 1280},
		{"refused by the sender", passed, lost, &icmpengine.ProbeError{Kind: icmpengine.KindPacketTooBig}, false, 0, 0},
		{"nothing answers (ICMP dropped)", lost, lost, timeout, false, 0, 0},
		{"unreachable", passed, lost, &icmpengine.ProbeError{Kind: icmpengine.KindUnreachable, From: router}, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := judgePathMTU(tg, 1500, 1280, tc.small, tc.large, tc.err)
			assert.Equal(t, tc.ok, ok)
			if ok {
				assert.Equal(t, tc.status, r.status)
				assert.Equal(t, tc.passes, r.passes)
				assert.Equal(t, 1500, r.probed)
			}
		})
	}
}

func TestPathMTUConfigValidate(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Peers.Enabled = false
	cfg.Static = []StaticConfig{{Target: "192.0.2.1"}}
	cfg.ICMP.PathMTU.Enabled = true
	assert.NoError(t, cfg.Validate())
	cfg.ICMP.PathMTU.Size = 1200 // not above small_size
	assert.ErrorContains(t, cfg.Validate(), "icmp::path_mtu::size: 1200 must be 0 (the interface MTU) or in (small_size=1280, 65535]")
	cfg.ICMP.PathMTU.Size, cfg.ICMP.PathMTU.Every = 0, 0
	assert.ErrorContains(t, cfg.Validate(), "icmp::path_mtu::every: 0 out of range")
}
