#!/usr/bin/env bash
# Side-by-side: this balancer, nginx and HAProxy (Debian packages, configured
# alike by ../shared/bench/peers), the minimal uWS+undici reference and lb's
# floor (bench/e2e/floor-proxy.ts: lb's stack with no features), in front
# of the same loopback nginx backends, loaded by wrk, in ONE run with the order
# of targets alternating per round. Prints the harness's tables plus
# CPU-seconds per 100k requests (bench/e2e/cpu-per-100k.js).
#
#   bash bench/e2e/run.sh                      # defaults below
#   bash bench/e2e/run.sh -d 10 -r 3 -c "64 256" -b "small big"
#
# Needs: ../shared/bench (beside this repository), root for its setup.sh (apt
# nginx haproxy wrk), and `npm run build` done. Extra targets: LB_TARGETS env,
# one NAME=PORT=COMMAND per line; TARGETS="lb haproxy-1t ..." keeps only those of
# the default list. lb on another build, in the same run: bench/e2e/ab.sh REF, or by hand:
#   LB_TARGETS="lb-old=9302=bash /tmp/lb-old/bench/e2e/lb-target.sh" TARGETS="haproxy-1t lb" bash bench/e2e/run.sh ...
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# beside the repository (../shared/bench), or beside the folder of worktrees it is one of
harness="${BENCH_HARNESS:-$root/../shared/bench}"
[ -n "${BENCH_HARNESS:-}" ] || [ -x "$harness/run.sh" ] || harness="$root/../../shared/bench"
[ -x "$harness/run.sh" ] || { echo "bench: no harness at $harness (set BENCH_HARNESS)" >&2; exit 1; }
[ -f "$root/dist/core/cli.js" ] || { echo "bench: run 'npm run build' first" >&2; exit 1; }
command -v wrk >/dev/null && command -v nginx >/dev/null && command -v haproxy >/dev/null || bash "$harness/setup.sh"
out="${OUT:-$root/bench/out/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)" # the harness runs in its own folder: a relative OUT would land there
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-d 10 -r 3 -c "64 256" -b "small")
targets=(nginx-1w nginx-auto nginx-1w-ka512 haproxy-1t haproxy-2t uws-2t
  "lb=9300=bash $root/bench/e2e/lb-target.sh"
  "lb-1w=9301=WORKERS=1 bash $root/bench/e2e/lb-target.sh"
  "floor=9310=node $root/dist/bench/e2e/floor-proxy.js")
if [ -n "${TARGETS:-}" ]; then
  keep=()
  for t in "${targets[@]}"; do [[ " $TARGETS " == *" ${t%%=*} "* ]] && keep+=("$t"); done
  targets=("${keep[@]}")
fi
while IFS= read -r t; do [ -n "$t" ] && targets+=("$t"); done <<< "${LB_TARGETS:-}"
(cd "$harness" && ./run.sh "${args[@]}" --out "$out" "${targets[@]}")
node "$root/bench/e2e/cpu-per-100k.js" "$out/results.jsonl" | tee -a "$out/summary.md"
echo "results: $out"
