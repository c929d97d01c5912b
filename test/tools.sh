#!/usr/bin/env bash
# Installs the programs some tests drive (Debian packages), when one is missing
# and this machine allows it (root or password-less sudo, apt-get). Where it
# cannot, it says so and the tests that need the program are skipped with that
# reason (test/admin/util.ts requireTool). Never fails the test command itself.
set -uo pipefail
need=()
want () { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }
want chromium chromium               # the dashboard page in a real browser
want promtool prometheus             # promtool check metrics
want socat socat                     # the runtime socket as documented
want openssl openssl                 # TLS certificates and s_client
want systemd-analyze systemd         # systemd-analyze verify conf/lb.service
want haproxy haproxy                 # show info / show stat beside a real HAProxy
want hatop hatop                     # hatop on the runtime socket
want tmux tmux                       # the terminal hatop runs in
want pebble pebble                   # Let's Encrypt's test CA (and pebble-challtestsrv) for the ACME tests
want redis-server redis-server       # the cluster tests' Redis (test/cluster)
want ab apache2-utils                # ApacheBench (HTTP/1.0) against engine = "node" (test/e2e/node-engine-clients.test.ts)
want nginx nginx                     # nginx in front of lb, and the fuzz campaign's reference proxy
want curl curl                       # curl -0 (HTTP/1.0)
want redis-sentinel redis-sentinel   # Redis Sentinel for the failover test (test/cluster/sentinel.test.ts)
want h2load nghttp2-client           # h2load: HTTP/2 load through lb (test/h2)
[ ${#need[@]} -eq 0 ] && exit 0
say () { echo "test tools: $*" >&2; }
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n)
  else say "missing ${need[*]}; not root, so the tests that need them are skipped (apt-get install ${need[*]})"; exit 0; fi
fi
if ! command -v apt-get >/dev/null 2>&1; then say "missing ${need[*]} and no apt-get: the tests that need them are skipped"; exit 0; fi
say "installing ${need[*]}"
# the packages' services (prometheus) must not be started by the install
rc=/usr/sbin/policy-rc.d
own_rc=0
if [ ! -e "$rc" ]; then printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$rc" >/dev/null && "${sudo[@]}" chmod +x "$rc" && own_rc=1; fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 &&
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2 ||
  say "could not install ${need[*]}: the tests that need them are skipped"
[ $own_rc -eq 1 ] && "${sudo[@]}" rm -f "$rc"
exit 0
