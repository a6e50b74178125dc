#!/usr/bin/env bash
# make bench: runs each component's benchmark against its reference in the same run and
# prints one line per comparison: name, our figure, the reference figure, the ratio.
# Benchmarks print lines "BENCH <name> ours=<v> reference=<v> ratio=<x>"; this collects them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '-dirty')"
echo "make bench at commit $commit" >&2

run() {
  echo "== $*" >&2
  if ! "$@" 2>&1 | tee -a "$out" | grep -E '^(BENCH|--- FAIL|FAIL|panic)' >&2; then :; fi
}

# ICMP engine vs one pro-bing Pinger per target (needs root: network namespace).
run env NETPULSE_BENCH=1 go test -count=1 -run TestICMPEngineVsProBing -v ./receiver/podprobereceiver/internal/icmpengine/
# Sampling planner vs a full mesh (simulator, N = 100, 1000, 5000, 3 zones).
run go test -count=1 -run '^$' -bench BenchmarkSimulate -benchtime 1x ./internal/planner/
# Further benchmarks register here as their components land.
for extra in hack/bench.d/*.sh; do
  [ -e "$extra" ] || continue
  run bash "$extra"
done

echo
echo "make bench at commit $commit ($(date -u +%Y-%m-%dT%H:%MZ))"
printf '%-52s %-22s %-34s %s\n' NAME OURS REFERENCE RATIO
grep -E '^BENCH ' "$out" | sed -E 's/^BENCH ([^ ]+) ours=([^ ]+) reference=([^ ]+) ratio=([^ ]+).*/\1 \2 \3 \4/' |
  while read -r name ours ref ratio; do printf '%-52s %-22s %-34s %s\n' "$name" "$ours" "$ref" "$ratio"; done
if grep -qE '^(--- FAIL|FAIL)' "$out"; then
  echo "a benchmark failed" >&2
  exit 1
fi
