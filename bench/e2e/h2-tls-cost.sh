#!/usr/bin/env bash
# What `http2 = true` costs HTTP/1.1 over TLS: one lb (2 workers) with two https
# entry points in front of one backend, `uws` served by uWS in every worker (as
# without http2) and `h2` with http2 = true (worker 0 accepts; clients offering h2
# are served there on node:tls, the others handed unread to the workers' uWS apps).
# h2load --h1 drives each in turn, ROUNDS times, SECS seconds, C connections;
# prints requests/s and lb's CPU seconds per 10,000 requests for each, the h2 run
# over TLS for reference, and, where ab is installed, `ab -n 3000 -c C`: a new
# connection (TLS handshake, no ALPN, Nagle on) per request.
#   bash bench/e2e/h2-tls-cost.sh            (after npm run build; needs h2load, openssl)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ROUNDS="${ROUNDS:-3}" SECS="${SECS:-5}" C="${C:-16}"
dir="$(mktemp -d)"
trap 'kill $lbpid $bpid 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
bash "$root/conf/make-cert.sh" "$dir/certs" localhost >/dev/null 2>&1
node "$root/examples/backend.js" 19771 >/dev/null 2>&1 & bpid=$!
cat > "$dir/lb.toml" <<TOML
[global]
workers = 2
state_dir = "$dir"
log_level = "warn"
[entrypoints.uws]
address = "127.0.0.1:19772"
protocol = "https"
[entrypoints.uws.tls]
cert = "$dir/certs/lb.crt"
key = "$dir/certs/lb.key"
[entrypoints.h2]
address = "127.0.0.1:19773"
protocol = "https"
http2 = true
[entrypoints.h2.tls]
cert = "$dir/certs/lb.crt"
key = "$dir/certs/lb.key"
[routers.r]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "127.0.0.1:19771"
check = false
TOML
node "$root/dist/core/cli.js" run -c "$dir/lb.toml" >/dev/null 2>&1 & lbpid=$!
sleep 2
cpu () { awk '{ print $14 + $15 }' "/proc/$lbpid/stat"; }
hz=$(getconf CLK_TCK)
one () { # name port h2load-args...
  local name=$1 port=$2; shift 2
  local c0 out c1 n
  c0=$(cpu)
  out=$(h2load "$@" -c "$C" -D "$SECS" "https://127.0.0.1:$port/" 2>&1)
  c1=$(cpu)
  n=$(sed -n 's/^requests: [0-9]* total, [0-9]* started, \([0-9]*\) done.*/\1/p' <<< "$out")
  awk -v name="$name" -v n="$n" -v s="$SECS" -v t=$((c1 - c0)) -v hz="$hz" \
    'BEGIN { printf "%-14s %8.0f req/s  %6.3f lb CPU s per 10k requests\n", name, n / s, (t / hz) / n * 10000 }'
}
fresh () { # name port: ab, one connection per request
  local name=$1 port=$2 c0 out c1
  c0=$(cpu)
  out=$(ab -q -n 3000 -c "$C" "https://127.0.0.1:$port/" 2>&1)
  c1=$(cpu)
  awk -v name="$name" -v t=$((c1 - c0)) -v hz="$hz" '/^Requests per second/ { r = $4 } /^Complete requests/ { n = $3 }
    END { printf "%-14s %8.0f req/s  %6.3f lb CPU s per 10k requests (ab, new connections)\n", name, r, (t / hz) / n * 10000 }' <<< "$out"
}
for r in $(seq "$ROUNDS"); do
  one "uws h1" 19772 --h1
  one "http2=true h1" 19773 --h1
  one "http2=true h2" 19773 -m 10
  if command -v ab >/dev/null; then
    fresh "uws h1" 19772
    fresh "http2=true h1" 19773
  fi
done
