// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package ingestbench measures what the gateway's ingest path costs per data point and per
// agent: the otelcol-netpulse binary (the distribution ocb generates, built from
// cmd/otelcol-netpulse) run as a child process with the shipped gateway configuration
// (deploy/agent-gateway/config/gateway.yaml: TLS, k8s_token_auth, k8s_net_attributes with
// admission, pod_network_health as the Lease holder, the stable-pairs export path), fed
// over OTLP/gRPC by N simulated agents with batches shaped exactly like pod_probe's
// (testbed/syntheticagent), against a real kube-apiserver holding N Node and agent Pod
// objects and the agents' pod-bound ServiceAccount tokens. The reference is the same
// input, over the same TLS, into an otlp -> nop pipeline in the same run: the ceiling any
// processing can reach.
//
// The CPU figures are CPU time of the collector process (/proc/<pid>/stat), not wall
// clock, so they stay meaningful on a shared machine; the heap is the collector's live heap
// after a forced GC (the in-use bytes of the pprof extension's heap profile with gc=1), the
// median of five such readings a second apart while the agents keep sending, and at rest:
// with the agents paused (connections kept) and nothing in flight.
//
// Run it with `make bench` or NETPULSE_BENCH=1 go test -run TestIngestBench -v ./testbed/ingestbench/.
//
// TestIngestFanIn (NETPULSE_BENCH=1, not in `make bench`) is the other question: how many
// agents' connections one gateway holds at the shipped 10 s rounds, gateway.yaml untouched
// and no reference, read as an operator sizes a replica (resident set, CPU over minutes,
// the GC's share, the agents' export latency, time until every agent is admitted); with
// NETPULSE_INGEST_RESTART_DOWN it then restarts the gateway and measures the fleet coming
// back (issue #39 item 6); with NETPULSE_INGEST_RELAY_SHARDS=S it runs S relaying gateway
// shards as the Helm chart renders them instead, each agent connected to its own node's
// shard only, and reads each shard's cost and its relay's forwarding.
package ingestbench
