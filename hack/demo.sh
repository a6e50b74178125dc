#!/usr/bin/env bash
# make demo: builds testbed/cmd/netpulse-demo and runs it with the binaries `make kube-bins build`
# produced (bin/kube-apiserver, bin/kube-controller-manager, bin/kubectl,
# bin/otelcol-netpulse). Environment: DEMO_DURATION (default 0 = scripted scenario only;
# e.g. 10m keeps the cluster up for kubectl), DEMO_NODES, DEMO_PARTITION, DEMO_REFRESH,
# DEMO_REAL=1 (real nodes: kubelet, containerd, CNI, kube-proxy, CoreDNS; the Helm chart).
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

${GO:-go} build -o bin/netpulse-demo ./testbed/cmd/netpulse-demo
export NETPULSE_KUBE_NO_BUILD=1 NETPULSE_COLLECTOR="$PWD/bin/otelcol-netpulse"

# DEMO_REAL=1: the same story on real nodes (testbed/realcluster), netpulse installed with
# its Helm chart and image; `make demo` has built bin/helm and bin/realnode for it.
if [[ ${DEMO_REAL:-} == 1 ]]; then
  exec bin/netpulse-demo
fi

# The connectivity view (docs/view.md) beside the demo: `kubectl netpulse serve` on the
# demo cluster's admin kubeconfig once its run directory appears (a private TMPDIR tells
# it from any other simulated cluster's), and a headless Chromium screenshot of the page
# once a node's condition is True, saved in the run directory and as bin/demo-matrix.png.
view_addr=${DEMO_VIEW_ADDRESS:-127.0.0.1:8089}
TMPDIR=$(mktemp -d /tmp/netpulse-demo-XXXXXX)
export TMPDIR
view() {
  local dir="" kc serve_pid=""
  trap '[[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null; exit 0' EXIT TERM
  for _ in $(seq 1200); do
    dir=$(compgen -G "$TMPDIR/netpulse-simcluster-*" | head -1) && [[ -f $dir/admin.kubeconfig ]] && break
    dir=""; sleep 0.5
  done
  [[ -n $dir ]] || return 0
  kc=$dir/admin.kubeconfig
  bin/kubectl-netpulse serve --kubeconfig "$kc" --address "$view_addr" >"$dir/view.log" 2>&1 &
  serve_pid=$!
  command -v chromium >/dev/null || return 0
  for _ in $(seq 600); do
    if bin/kubectl-netpulse --kubeconfig "$kc" matrix 2>/dev/null | grep -q '^node problems ('; then
      sleep 2 # the page polls every 2 s
      chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
        --user-data-dir="$dir/chromium" --window-size=1400,900 --virtual-time-budget=5000 \
        --screenshot="$dir/matrix.png" "http://$view_addr/#node=${DEMO_PARTITION:-node-2}" >/dev/null 2>&1 &&
        cp "$dir/matrix.png" bin/demo-matrix.png
      break
    fi
    sleep 1
  done
  wait "$serve_pid"
}
[[ -x bin/kubectl-netpulse ]] && { view & view_pid=$!; }
echo "connectivity view: http://$view_addr/ once the control plane is up (kubectl netpulse serve; docs/view.md)"
rm -f bin/demo-matrix.png
rc=0
bin/netpulse-demo || rc=$?
if [[ -n ${view_pid:-} ]]; then kill "$view_pid" 2>/dev/null; wait "$view_pid" 2>/dev/null || true; fi
[[ -f bin/demo-matrix.png ]] &&
  echo "connectivity view screenshot (node partitioned): bin/demo-matrix.png (also matrix.png in the run directory)"
rmdir "$TMPDIR" 2>/dev/null || true
exit "$rc"
