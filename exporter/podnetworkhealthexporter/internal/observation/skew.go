// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import "time"

// Bounds of FutureSkew, and its value for the default min_probe_interval (1 s).
const (
	MinFutureSkew        = time.Second
	MaxFutureSkewBound   = 2 * time.Second
	DefaultMaxFutureSkew = 2 * time.Second
)

// FutureSkew is how far after its arrival a point may be dated (DecoderConfig.MaxFutureSkew)
// for agents whose shortest probe round is minRound: 2 × minRound, at least MinFutureSkew
// and at most MaxFutureSkewBound.
//
// Derivation: an agent stamps a round's points when it emits them; its batch processor holds
// them up to its timeout (1 s) and the network delays them further, so a correct agent's
// point always arrives after its timestamp and is only ever dated in the gateway's future
// by the offset between the two nodes' clocks (NTP keeps it to milliseconds). The skew
// tolerates that offset, never more than two of the fastest agents' rounds: a point dated
// ahead stands as its node's newest result for at most that long after the node's next real
// round, and pins a pair's window no longer.
func FutureSkew(minRound time.Duration) time.Duration {
	return min(max(2*minRound, MinFutureSkew), MaxFutureSkewBound)
}
