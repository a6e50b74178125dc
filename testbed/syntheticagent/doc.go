// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package syntheticagent is the test bed's one synthetic agent: pod_probe's ICMP rounds of
// pods rendered without the receiver, sockets or a cluster, for the harnesses that need
// thousands of agents (the ingest benchmark, testbed/ingestbench; the scale simulation,
// exporter/podnetworkhealthexporter/internal/scalesim). Agent.Emit renders given probes;
// Round and RoundWithLoss draw them for the shipped probing (Plan, the Shipped*
// constants). Its output is held value for value to pod_probe's golden rounds
// (receiver/podprobereceiver/testdata/golden, golden_test.go), and its shape to a running
// receiver's (testbed/ingestbench's shape test).
package syntheticagent
