#!/usr/bin/env bash
# Gateway scale simulation: the real planner and decision engine over 2 simulated hours at
# N = 1,000 and 5,000 (objects, API writes/s, dead-target latency, heap, series) against the
# pair-per-object model. Takes a few minutes on 2 cores.
set -euo pipefail
NETPULSE_BENCH=1 go test -count=1 -timeout 60m -run TestScaleBench -v ./exporter/podnetworkhealthexporter/internal/scalesim/
