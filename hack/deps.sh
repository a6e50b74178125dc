#!/usr/bin/env bash
# Installs the OS packages netpulse's tests and demo need, when they are missing: etcd for
# the local control plane; iproute2 and nftables for network namespaces, bridges and
# faults (iptables for the NFQUEUE target the delay fault uses: this kernel has no nft
# queue); ping as a second, unrelated ICMP user in the ICMP engine tests; prometheus (the
# server and promtool, 2.42 on bookworm) for the Prometheus compatibility and alert-rule
# tests (testbed/monitoringtest); unshare and mount (util-linux, mount) for the image test,
# which runs the image's entrypoint on a read-only root (tools/image); chromium (headless)
# opens the netpulse_view page like a user would (testbed/viewtest, make demo's screenshot);
# runc is the OCI runtime under the real nodes' containerd (testbed/realcluster), gcc
# compiles Kubernetes' pause.c for their sandbox image, patch adapts kube-network-policies
# (their NetworkPolicy engine) to this kernel (Makefile, tools/netpol).
set -euo pipefail
pkgs=(etcd-server iproute2 nftables iptables iputils-ping prometheus util-linux mount chromium runc gcc libc6-dev patch)
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
# Debian may start etcd and prometheus as services on install (prometheus on :9090); the
# tests run their own on free ports, so neither is left running.
for svc in etcd prometheus; do
  if command -v systemctl >/dev/null 2>&1; then systemctl stop "$svc" >/dev/null 2>&1 || true; fi
  if command -v service >/dev/null 2>&1; then service "$svc" stop >/dev/null 2>&1 || true; fi
done
