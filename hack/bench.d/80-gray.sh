#!/usr/bin/env bash
# The gray judgement against the statistical bound (exporter/podnetworkhealthexporter/
# internal/plan, TestGrayDetectionAgainstTheBound): at the shipped budget (10 s rounds, K+M =
# 4, 3 echoes), the seconds until a node losing 1-50 % of its input is blamed (p50 and p99
# over 200 seeds) against h/KL(p‖p0) echoes and against the ideal CUSUM (p known) on the same budget; the budget 1 % in 5 minutes needs; and the false
# verdicts per 1,000 nodes per day at 0.1 % background (20,000 target-hours); latency shifts
# of +5 to +200 ms against 2hσ²/δ² samples and false HighLatency verdicts in 1,200 node-hours
# of a noisy mesh. ~1 min.
set -euo pipefail
echo "# gray bench at commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '-dirty')"
NETPULSE_BENCH=1 go test -count=1 -run 'TestGrayDetectionAgainstTheBound|TestGrayFalseVerdictsAtBackground|TestGrayLatency' -v ./exporter/podnetworkhealthexporter/internal/plan/
# The gray state's heap and time per simulated hour at 1,000 and 5,000 nodes, against the
# same engine with gray.enabled: false in the same run (~2 min).
go test -run '^$' -bench BenchmarkGrayState -benchtime 1x ./exporter/podnetworkhealthexporter/internal/verdict/ | tee /dev/stderr |
  awk '/^BenchmarkGrayState/ { split($1, a, "/"); n = a[2]; sub("nodes=", "", n); on = (a[3] ~ /gray=true/);
         for (i = 1; i <= NF; i++) { if ($(i+1) == "heap-B/node") h = $i; if ($(i+1) == "s/hour") s = $i }
         if (on) { H[n] = h; S[n] = s } else { printf "BENCH gray_heap_per_node_n%s ours=%.0fB reference=%.0fB ratio=%.2fx\n", n, H[n], h, H[n]/h;
                                            printf "BENCH gray_engine_seconds_per_hour_n%s ours=%.2f reference=%.2f ratio=%.2fx\n", n, S[n], s, S[n]/s } }'
