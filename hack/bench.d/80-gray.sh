#!/usr/bin/env bash
# The gray judgement against the statistical bound (exporter/podnetworkhealthexporter/
# internal/plan, TestGrayDetectionAgainstTheBound): at the shipped budget (10 s rounds, K+M =
# 4, 3 echoes), the seconds until a node losing 1-50 % of its input is blamed (p50 and p99
# over 200 seeds) against h/KL(p‖p0) echoes; the budget 1 % in 5 minutes needs; and the false
# verdicts per 1,000 nodes per day at 0.1 % background (20,000 target-hours). ~15 s.
set -euo pipefail
echo "# gray bench at commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '-dirty')"
NETPULSE_BENCH=1 go test -count=1 -run 'TestGrayDetectionAgainstTheBound|TestGrayFalseVerdictsAtBackground' -v ./exporter/podnetworkhealthexporter/internal/plan/
