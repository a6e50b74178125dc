// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package explicitbucketsprocessor implements the explicit_buckets processor: it turns
// exponential histograms into explicit-bucket histograms with power-of-two bounds, exactly
// (every bound is a bucket boundary of the exponential layout), for backends without native
// histograms.
//
//go:generate mdatagen metadata.yaml
package explicitbucketsprocessor // import "github.com/netpulse/netpulse/processor/explicitbucketsprocessor"
