#!/usr/bin/env bash
# Installs the OS packages netpulse's tests and demo need, when they are missing: etcd for
# the local control plane; iproute2 and nftables for network namespaces, bridges and
# faults; ping as a second, unrelated ICMP user in the ICMP engine tests.
set -euo pipefail
pkgs=(etcd-server iproute2 nftables iputils-ping)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
((${#missing[@]})) || exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing packages: ${missing[*]} - run as root (apt-get install -y ${missing[*]})" >&2
  exit 1
fi
echo "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian may start etcd as a service on install; the tests run their own on free ports.
if command -v systemctl >/dev/null 2>&1; then systemctl stop etcd >/dev/null 2>&1 || true; fi
