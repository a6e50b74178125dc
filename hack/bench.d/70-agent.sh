#!/usr/bin/env bash
# What one agent costs per node in memory: otelcol-netpulse (a fresh build of
# ./cmd/otelcol-netpulse) with deploy/agent-gateway/config/agent.yaml, the DaemonSet's
# GOMEMLIMIT and memory limit (in a memory cgroup of its own), TLS and bearer token to an
# OTLP sink, probing its peers, on a local kube-apiserver with 30 and then 1,000 nodes (each
# with an agent pod and 3 other pods), against the same binary with only an idle OTLP
# receiver into the same exporter: RSS (anonymous, file-backed), cgroup working set and
# peak, the Go runtime's live heap and total, after 150 s of probing; the heap profiles' tops in the log. ~8 min.
# NETPULSE_AGENTBENCH_NODES, _PODS_PER_NODE, _WARM, _WINDOW, _INTERVAL, _CACHED, _PROFILE_DIR tune it
# (testbed/agentbench).
set -euo pipefail
NETPULSE_BENCH=1 go test -count=1 -run TestAgentBench -v -timeout 30m ./testbed/agentbench/
