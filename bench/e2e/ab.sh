#!/usr/bin/env bash
# A/B of two builds of the balancer: CPU per request, alternating, with a fresh
# lb process for every measurement (so one process's luck is not counted as the
# build's). For differences too small for the side-by-side harness.
#
#   bash bench/e2e/ab.sh ROOT_A ROOT_B [PAIRS] [PATH]
#
# ROOT_*: checkouts with `npm run build` done (node_modules may be a symlink).
# PAIRS: default 6. PATH: default /big (4 KiB); / is the 16-byte body.
# Backend: the harness's peers/backend-nginx.conf on ports 9101/9102
# (BENCH_HARNESS, default ../shared/bench); lb listens on 9300 with the config
# of bench/e2e/lb-target.sh.
# Env: WORKERS (default auto), CONNS (default 64), SECONDS_ (default 6).
# Prints one line per measurement and the mean per build, in µs of CPU (user +
# system, all threads of the process) per request.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,15p "$0"; exit 2; }
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); PAIRS=${3:-6}; URLPATH=${4:-/big}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
harness="${BENCH_HARNESS:-$root/../shared/bench}"
dir=$(mktemp -d)
lb=0
cleanup () { [ "$lb" != 0 ] && kill "$lb" 2>/dev/null; [ -n "${backend:-}" ] && kill "$backend" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

mkdir -p "$dir/backend/tmp"
nginx -p "$dir/backend/" -e error.log -c "$harness/peers/backend-nginx.conf" -g 'daemon off;' > /dev/null 2>&1 < /dev/null &
backend=$!
until curl -sf -o /dev/null http://127.0.0.1:9101/; do sleep 0.2; done

source "$root/bench/e2e/ticks.sh"
cpu () { local u s; read -r u s <<< "$(ticks "$1")"; echo $((u + s)); } # user + system ticks of process $1
hz=$(getconf CLK_TCK)
declare -A sum=()

for i in $(seq "$PAIRS"); do
  for root in "$A" "$B"; do
    mkdir -p "$dir/lb"
    PORT=9300 UPSTREAMS=127.0.0.1:9101,127.0.0.1:9102 RUN_DIR="$dir/lb" WORKERS="${WORKERS:-auto}" \
      bash "$root/bench/e2e/lb-target.sh" > "$dir/lb.log" 2>&1 < /dev/null &
    lb=$!
    until curl -sf -o /dev/null "http://127.0.0.1:9300$URLPATH"; do
      kill -0 "$lb" 2>/dev/null || { cat "$dir/lb.log" >&2; exit 1; }
      sleep 0.2
    done
    wrk -t1 -c"${CONNS:-64}" -d2 "http://127.0.0.1:9300$URLPATH" > /dev/null # warm-up, not counted
    t0=$(cpu "$lb")
    out=$(wrk -t1 -c"${CONNS:-64}" -d"${SECONDS_:-6}" --latency "http://127.0.0.1:9300$URLPATH")
    t1=$(cpu "$lb")
    n=$(awk '/requests in/ {print $1}' <<< "$out")
    us=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$n" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')
    echo "pair $i  $root  $(awk '/Requests\/sec/ {r=$2} /^ +99%/ {p=$2} END {print "req/s", r, " p99", p}' <<< "$out")  µs/req $us"
    sum[$root]=$(awk -v a="${sum[$root]:-0}" -v b="$us" 'BEGIN {print a + b}')
    kill "$lb"; wait "$lb" 2>/dev/null || true; lb=0
    rm -rf "$dir/lb"
  done
done
for root in "$A" "$B"; do awk -v s="${sum[$root]}" -v n="$PAIRS" -v r="$root" 'BEGIN {printf "mean %s: %.2f µs/req\n", r, s / n}'; done
