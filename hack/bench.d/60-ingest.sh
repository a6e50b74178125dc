#!/usr/bin/env bash
# The gateway's ingest path, measured: otelcol-netpulse (a fresh build of ./cmd/otelcol-netpulse,
# the ocb-generated distribution) with deploy/agent-gateway/config/gateway.yaml, TLS and
# k8s_token_auth, on a local kube-apiserver with 1,000 nodes, agent pods and their pod-bound
# tokens, fed by 1,000 agents' batches of pod_probe's shape (K=3 rotating + M=1 stable pairs,
# 1 s rounds), against the same input into otlp -> nop: data points/s and agent-rounds/s per
# core (collector CPU time), heap per agent (under load, and at rest: agents connected and paused),
# nodes per core at 1 s and 10 s rounds. ~2.5 min.
# NETPULSE_INGEST_AGENTS, _INTERVAL, _WINDOW, _READ_BUFFER tune it (testbed/ingestbench).
set -euo pipefail
NETPULSE_BENCH=1 go test -count=1 -run TestIngestBench -v -timeout 20m ./testbed/ingestbench/
# One shard of 8 (docs/sharding.md): each agent sends it its targets on that shard's nodes
# and its heartbeat; ~2 min more.
NETPULSE_BENCH=1 NETPULSE_INGEST_SHARDS=8 go test -count=1 -run TestIngestBench -v -timeout 20m ./testbed/ingestbench/
