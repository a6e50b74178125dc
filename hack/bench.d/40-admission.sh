#!/usr/bin/env bash
# The gateway's admission (k8s_net_attributes): what N agents plus one agent inventing
# 20,000 targets a round make it remember, against the same input without limits.
set -euo pipefail
NETPULSE_BENCH=1 go test -count=1 -run TestAdmissionBench -v ./processor/k8snetattributesprocessor/internal/admission/
# The decoder's memory per source at the admission's stable-target limit (the ceiling in
# docs/security.md), against one source's unadmitted flood of 20,000 stable targets; and
# (TestDecoderMemoryBenchHostile) one source's memory under #28 item 2's flood of streams,
# against the same flood before the per-source bound and a real source at the limit.
NETPULSE_BENCH=1 go test -count=1 -run TestDecoderMemoryBench -v ./exporter/podnetworkhealthexporter/internal/decode/
