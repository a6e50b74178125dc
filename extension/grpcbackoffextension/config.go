// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package grpcbackoffextension

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Config of the grpc_backoff extension: gRPC's connect parameters
// (google.golang.org/grpc/backoff). Each wait between connection attempts is the previous
// one times multiplier, from base_delay up to max_delay, randomised by ±jitter; an attempt
// is given min_connect_timeout at least. The defaults are gRPC's own but max_delay.
type Config struct {
	// BaseDelay is the wait after the first failed attempt (gRPC's default 1s).
	BaseDelay time.Duration `mapstructure:"base_delay"`
	// Multiplier grows the wait after each failed attempt (default 1.6).
	Multiplier float64 `mapstructure:"multiplier"`
	// Jitter randomises each wait by this fraction either way (default 0.2): clients that
	// lost one server at the same moment spread their attempts.
	Jitter float64 `mapstructure:"jitter"`
	// MaxDelay caps the wait (default 10s; gRPC's is 120s): a client is back at most about
	// this long after its server is.
	MaxDelay time.Duration `mapstructure:"max_delay"`
	// MinConnectTimeout is the least time an attempt is given (default 20s).
	MinConnectTimeout time.Duration `mapstructure:"min_connect_timeout"`
}

// DefaultMaxDelay is one round of the agents' default 10 s interval.
const DefaultMaxDelay = 10 * time.Second

func defaultConfig() *Config {
	return &Config{
		BaseDelay:         backoff.DefaultConfig.BaseDelay,
		Multiplier:        backoff.DefaultConfig.Multiplier,
		Jitter:            backoff.DefaultConfig.Jitter,
		MaxDelay:          DefaultMaxDelay,
		MinConnectTimeout: 20 * time.Second,
	}
}

// Validate checks that the backoff grows, stays bounded and gives attempts time.
func (c *Config) Validate() error {
	var errs []error
	if c.BaseDelay <= 0 {
		errs = append(errs, fmt.Errorf("base_delay must be positive, got %v", c.BaseDelay))
	}
	if c.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("multiplier must be at least 1, got %v", c.Multiplier))
	}
	if c.Jitter < 0 || c.Jitter > 1 {
		errs = append(errs, fmt.Errorf("jitter must be in [0, 1], got %v", c.Jitter))
	}
	if c.MaxDelay < c.BaseDelay {
		errs = append(errs, fmt.Errorf("max_delay (%v) must be at least base_delay (%v)", c.MaxDelay, c.BaseDelay))
	}
	if c.MinConnectTimeout <= 0 {
		errs = append(errs, fmt.Errorf("min_connect_timeout must be positive, got %v", c.MinConnectTimeout))
	}
	return errors.Join(errs...)
}

// DialOptions are the gRPC client options c stands for (what the extension gives every
// client that lists it; also what testbed/ingestbench's agents use).
func (c *Config) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  c.BaseDelay,
			Multiplier: c.Multiplier,
			Jitter:     c.Jitter,
			MaxDelay:   c.MaxDelay,
		},
		MinConnectTimeout: c.MinConnectTimeout,
	})}
}
