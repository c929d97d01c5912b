#!/usr/bin/env bash
# User and system CPU per request of running proxies, side by side: for each
# NAME=PID=PORT, one `wrk -t1 -cCONNS -dSECS` on 127.0.0.1:PORT/PATH, and the
# utime and stime the process tree PID spent meanwhile (/proc, every thread of
# PID and of its children). ROUNDS rounds alternate the targets; the last lines
# are the means. Where a proxy's time goes (its own code or the kernel's
# sockets) shows here; the harness (run.sh) gives only the sum.
#
#   ROUNDS=4 PATH_=/big bash bench/e2e/cpu-split.sh lb=1234=9300 nginx=5678=9201
set -euo pipefail
rounds="${ROUNDS:-4}" path="${PATH_:-/}" conns="${CONNS:-64}" secs="${SECS:-5}"
hz="$(getconf CLK_TCK)"

source "$(dirname "${BASH_SOURCE[0]}")/ticks.sh"

for r in $(seq "$rounds"); do
  for spec in "$@"; do
    IFS='=' read -r name pid port <<< "$spec"
    read -r u0 s0 <<< "$(ticks "$pid")"
    n="$(wrk -t1 -c"$conns" -d"$secs" "http://127.0.0.1:$port$path" | awk '/requests in/{print $1}')"
    read -r u1 s1 <<< "$(ticks "$pid")"
    awk -v r="$r" -v name="$name" -v n="$n" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v hz="$hz" \
      'BEGIN { printf "round %d %-12s %8d req  user %6.2f  sys %6.2f  total %6.2f µs/req\n", r, name, n, u*1e6/hz/n, s*1e6/hz/n, (u+s)*1e6/hz/n }'
  done
done | tee /dev/stderr | awk '{ u[$3] += $7; s[$3] += $9; t[$3] += $11; c[$3]++; if (!($3 in o)) { o[$3] = ++k; names[k] = $3 } }
  END { for (i = 1; i <= k; i++) { x = names[i]; printf "mean  %-12s user %6.2f  sys %6.2f  total %6.2f µs/req\n", x, u[x]/c[x], s[x]/c[x], t[x]/c[x] } }'
