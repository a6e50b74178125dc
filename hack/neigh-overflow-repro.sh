#!/usr/bin/env bash
# Reproduces, with nothing but iproute2 and iputils ping, the false IPv6 loss of issue #16:
# N network namespaces on one bridge share one kernel's neighbour tables, whose size limit
# (gc_thresh3, 1024 by default) is per kernel. Every namespace pings K random peers a second,
# 3 echoes each, over IPv4 and IPv6 (the rotating probe pattern of pod_probe), and the script
# prints the loss per family and the kernel's table_fulls counter for the run.
#   sudo N=30 hack/neigh-overflow-repro.sh            # kernel defaults: IPv6 loses echoes
#   sudo N=30 SIZE=1 hack/neigh-overflow-repro.sh     # tables sized as simcluster does: none
set -euo pipefail
N=${N:-30} ROUNDS=${ROUNDS:-15} K=${K:-3} SIZE=${SIZE:-0}
[[ $(id -u) -eq 0 ]] || { echo "needs root" >&2; exit 2; }
dir=$(mktemp -d)
declare -A saved
cleanup() {
  for i in $(seq 1 "$N"); do ip netns del "nox$i" 2>/dev/null || true; done
  ip link del noxbr 2>/dev/null || true
  for k in "${!saved[@]}"; do sysctl -qw "$k=${saved[$k]}"; done
  rm -rf "$dir"
}
trap cleanup EXIT
if [[ $SIZE == 1 ]]; then
  for f in ipv4 ipv6; do
    for t in 3:1024 2:512 1:128; do
      k=net.$f.neigh.default.gc_thresh${t%%:*}
      saved[$k]=$(sysctl -n "$k")
      sysctl -qw "$k=$(( ${t#*:} * N ))"
    done
  done
fi
ip link add noxbr type bridge mcast_snooping 0 stp_state 0
ip addr add 10.77.0.1/24 dev noxbr
ip addr add fd77::1/64 dev noxbr nodad
ip link set noxbr up
for i in $(seq 1 "$N"); do
  ip netns add "nox$i"
  ip link add "noxh$i" type veth peer name eth0 netns "nox$i"
  ip link set "noxh$i" master noxbr up
  ip -n "nox$i" link set lo up
  ip -n "nox$i" addr add "10.77.0.$((10 + i))/24" dev eth0
  ip -n "nox$i" addr add "fd77::$((10 + i))/64" dev eth0 nodad
  ip -n "nox$i" link set eth0 up
done
fulls() { # table_fulls (column 13, hex) summed over the per-CPU lines
  local s=0 v
  while read -r -a f; do [[ ${f[0]} == entries ]] || s=$(( s + 16#${f[12]} )); done </proc/net/stat/ndisc_cache
  echo "$s"
}
before=$(fulls)
for i in $(seq 1 "$N"); do
  (
    for _ in $(seq 1 "$ROUNDS"); do
      for _ in $(seq 1 "$K"); do
        t=$(( RANDOM % N + 1 )); [[ $t == "$i" ]] && t=$(( t % N + 1 ))
        ip netns exec "nox$i" ping -6 -n -q -c 3 -i 0.2 -W 1 "fd77::$((10 + t))" 2>&1 | grep transmitted | sed 's/^/ipv6 /' >>"$dir/$i" &
        ip netns exec "nox$i" ping -4 -n -q -c 3 -i 0.2 -W 1 "10.77.0.$((10 + t))" 2>&1 | grep transmitted | sed 's/^/ipv4 /' >>"$dir/$i" &
      done
      sleep 1
    done
    wait
  ) &
done
wait
for f in ipv4 ipv6; do
  cat "$dir"/[0-9]* | awk -v f="$f" '$1 == f { s += $2; r += $5 } END { printf "%s: %d of %d echoes lost (%.1f%%)\n", f, s - r, s, 100 * (s - r) / s }'
done
echo "NDP table full $(( $(fulls) - before )) times during the run (/proc/net/stat/ndisc_cache table_fulls)"
