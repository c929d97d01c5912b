#!/usr/bin/env bash
# Target for ../shared/bench/run.sh: writes a config for PORT and UPSTREAMS
# (set by run.sh) and runs the balancer in the foreground (exec, so run.sh
# measures our process tree). WORKERS (default auto) and ACCESS_LOG (default
# off, as the nginx and HAProxy peers) may be overridden; ENGINE=node serves the
# entry point on Node's llhttp (README "HTTP engines"; on Node < 22.12 worker 0
# alone listens, so compare it with WORKERS=1); LB_ROOT runs the lb built there
# instead of this checkout's (bench/e2e/ab.sh).
set -euo pipefail
root="${LB_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
dir="${RUN_DIR:-$(mktemp -d)}"
conf="$dir/lb-bench.toml"
{
  w="${WORKERS:-auto}"; [ "$w" = auto ] && w='"auto"'   # a number stays a TOML integer
  printf '[global]\nworkers = %s\naccess_log = "%s"\nstate_dir = "%s"\nlog_level = "warn"\n\n' \
    "$w" "${ACCESS_LOG:-off}" "$dir/run"
  printf '[entrypoints.web]\naddress = "127.0.0.1:%s"\nengine = "%s"\n\n' "${PORT:?PORT not set}" "${ENGINE:-uws}"
  printf '[routers.web]\nrule = "PathPrefix(`/`)"\nservice = "web"\n%s\n' "${MIDDLEWARES:+middlewares = [$MIDDLEWARES]}"
  printf '[services.web]\nbalance = "roundrobin"\nkeepalive = 32\n'
  i=0
  IFS=',' read -ra ups <<< "${UPSTREAMS:?UPSTREAMS not set}"
  for u in "${ups[@]}"; do
    i=$((i + 1))
    printf '[[services.web.servers]]\nname = "b%d"\naddress = "%s"\ncheck = false\n' "$i" "$u"
  done
  [ -n "${EXTRA_TOML:-}" ] && cat "$EXTRA_TOML"
} > "$conf"
exec node "$root/dist/core/cli.js" run -c "$conf"
