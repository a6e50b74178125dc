#!/usr/bin/env bash
# Gateway scale simulation (exporter/podnetworkhealthexporter/internal/scalesim): agents'
# pod_probe OTLP through the real admission, binding, decoder, engine and apply.Writer against
# counting fake clientsets, in simulated time: N = 1,000 over 2 h and 5,000 over 1 h, with the
# references measured in the same run (full mesh at N = 16/32/64, write-on-change off) and
# detection over 12 seeds x fault phases at N = 500. ~17 min on 2 cores (1,044 s at 976c439,
# of which N = 5,000 took 9.5 min; 1,790 s at acce259 on a busier machine), peak RSS ~1 GiB.
# hack/scale-figures.sh writes its table into docs/figures.md.
set -euo pipefail
echo "# scale bench at commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '-dirty')"
NETPULSE_BENCH=1 go test -count=1 -timeout 60m -run TestScaleBench -v ./exporter/podnetworkhealthexporter/internal/scalesim/
