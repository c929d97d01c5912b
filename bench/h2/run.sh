#!/usr/bin/env bash
# HTTP/2 and gRPC per proxy CPU-second against nginx and HAProxy, and HTTP/1.1
# over TLS with http2 on and off (bench/h2/h2.ts says what and how). Run it on a
# quiet machine after `npm run build`; the figures go to bench/out/h2-DATE/.
#   bash bench/h2/run.sh                          3 rounds of 10 s per target
#   bash bench/h2/run.sh -d 30 -r 5               longer
#   bash bench/h2/run.sh -n 2000 -r 1             a check that it all works
#   bash bench/h2/run.sh --only grpc-unary        one load (h2-16B, h2-4KiB, h1-tls-16B, grpc-unary)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
for tool in nginx haproxy h2load openssl; do
  command -v "$tool" >/dev/null || { echo "bench/h2: needs $tool (Debian: nginx, haproxy, nghttp2-client, openssl)" >&2; exit 1; }
done
[ -f "$root/dist/bench/h2/h2.js" ] || { echo "bench/h2: build first (npm run build)" >&2; exit 1; }
exec node "$root/dist/bench/h2/h2.js" "$@"
