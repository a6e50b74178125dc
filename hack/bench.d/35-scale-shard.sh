#!/usr/bin/env bash
# One gateway shard at the goal (exporter/podnetworkhealthexporter/internal/scalesim,
# TestScaleShardBench): shard 0 of 8 of a 65,000-node cluster at 10 s rounds (the probe budget
# raised to N·(K+M)·1.25/10 s), 6 simulated minutes with a node of that shard dying at 4,
# against the same shard of an 8,125-node cluster in the same run: objects, heap, writes,
# detection, series. ~5 min and ~1.5 GiB on 2 shared cores.
# NETPULSE_SCALE_N, NETPULSE_SCALE_SHARDS and NETPULSE_SCALE_DURATION tune it;
# NETPULSE_SCALE_QPS, _PAIR_OBJECTS=problems and _FRESHNESS=lease the exporter;
# NETPULSE_SCALE_SCENARIO=faults runs 24 minutes through a zone cut, a DaemonSet roll and a
# writer failover before the node dies (~25 min at 65,000 nodes).
set -euo pipefail
echo "# shard scale bench at commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '-dirty')"
NETPULSE_BENCH=1 NETPULSE_SCALE_SHARD=1 go test -count=1 -timeout 60m -run TestScaleShardBench -v ./exporter/podnetworkhealthexporter/internal/scalesim/
