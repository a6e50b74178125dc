#!/usr/bin/env bash
# make demo: builds cmd/netpulse-demo and runs it with the binaries `make kube-bins build`
# produced (bin/kube-apiserver, bin/kube-controller-manager, bin/kubectl,
# bin/otelcol-netpulse). Environment: DEMO_DURATION (default 0 = scripted scenario only;
# e.g. 10m keeps the cluster up for kubectl), DEMO_NODES, DEMO_PARTITION, DEMO_REFRESH.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) -ne 0 ]]; then
  echo "make demo: needs root (network namespaces, veths, a bridge, nftables): sudo make demo" >&2
  exit 2
fi
missing=()
for cmd in ip nft ping; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
if [[ -z ${NETPULSE_ETCD:-} ]] && ! command -v etcd >/dev/null; then missing+=(etcd); fi
if ((${#missing[@]})); then
  echo "make demo: missing commands: ${missing[*]} (Debian: apt-get install etcd-server iproute2 nftables iputils-ping)" >&2
  exit 2
fi
for b in bin/otelcol-netpulse bin/kube-apiserver bin/kube-controller-manager bin/kubectl; do
  [[ -x $b ]] || { echo "make demo: $b is missing: run 'make kube-bins build' (make demo does)" >&2; exit 2; }
done

${GO:-go} build -o bin/netpulse-demo ./cmd/netpulse-demo
export NETPULSE_KUBE_NO_BUILD=1 NETPULSE_COLLECTOR="$PWD/bin/otelcol-netpulse"
exec bin/netpulse-demo
