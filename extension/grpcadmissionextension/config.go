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
	return nil
}
