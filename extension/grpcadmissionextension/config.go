// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package grpcadmissionextension

import "fmt"

// Config of the grpc_admission extension.
type Config struct {
	// MaxInFlight bounds the requests (unary RPCs) the servers that list the extension
	// handle at once, together; one more is refused with Unavailable at once (default
	// 1000).
	MaxInFlight int `mapstructure:"max_in_flight"`
	// MaxInFlightPerSender bounds the requests of one sender at once (0: off, the
	// default): its authenticated pod (k8s_token_auth), else its service account, else its
	// peer IP address. One more of its requests is refused with Unavailable at once, before
	// it takes one of max_in_flight's slots: a compromised agent opening connections
	// cannot hold the bound that every other agent shares.
	MaxInFlightPerSender int `mapstructure:"max_in_flight_per_sender"`
}

// DefaultMaxInFlight: about a second of a gateway's work at ~1 ms of CPU a request on a
// few cores, well inside the agents' 5 s deadline; in a steady state a gateway of 4,000
// agents at 10 s rounds has ~1 request in flight on average (docs/figures.md).
const DefaultMaxInFlight = 1000

// Validate checks the bound.
func (c *Config) Validate() error {
	if c.MaxInFlight < 1 || c.MaxInFlight > 1_000_000 {
		return fmt.Errorf("max_in_flight: %d out of range [1, 1000000]", c.MaxInFlight)
	}
	if c.MaxInFlightPerSender < 0 || c.MaxInFlightPerSender > c.MaxInFlight {
		return fmt.Errorf("max_in_flight_per_sender: %d out of range [0, max_in_flight=%d] (0: off)", c.MaxInFlightPerSender, c.MaxInFlight)
	}
	return nil
}
