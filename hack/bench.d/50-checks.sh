#!/usr/bin/env bash
# Declared checks (the exporter's internal/plan, CheckPolicy): status writes per check and hour over a simulated
# day at a 60 s interval (healthy; a 5-minute outage every hour; an hour of flapping) under
# the write policy (significant changes at once, a 10-minute heartbeat), against
# OpenShift's checker, which writes the status after every run, on the same results.
set -euo pipefail
NETPULSE_BENCH=1 go test -count=1 -run TestBenchDeclaredCheckWrites -v ./exporter/podnetworkhealthexporter/internal/plan/
