#!/usr/bin/env bash
# Where a request's CPU goes (#35): system calls and context switches per
# request, CPU per request split by layer, and the physical limit of a
# zero-work proxy on this machine, for lb (2 workers and 1), its floor
# (bench/e2e/floor-proxy.ts), nginx-1w-ka512 and haproxy-1t, each alone with
# the harness's backend nginx under `wrk -t1 -cCONNS` keep-alive, 16 B and
# 4 KiB bodies. Per target and body, three loads of SECS seconds, one at a time:
#   1. count:  `perf stat` (context switches, migrations, task-clock, cycles and
#              instructions where the VM has them, every system call and the
#              epoll_wait and futex calls as tracepoints) + user/sys CPU and
#              voluntary/involuntary switches of every thread from /proc;
#   2. strace: `strace -c -f` on every thread: system calls by name (strace
#              slows the proxy, so its batches grow: epoll_wait per request is
#              read from the count load, the rest per request stays valid);
#   3. record: `perf record -g` (Node with --perf-basic-prof, which worker
#              threads share: V8 flags are per process), split by
#              bench/e2e/perf-layers.js.
# Then bench/e2e/syscost.c measures µs per write, read and epoll_wait on
# loopback (16 B and 4 KiB) and bench/e2e/syscalls-report.js prints the tables
# and each proxy's requests per CPU-second as a fraction of the limit.
#
#   bash bench/e2e/syscalls.sh                     # -d 5 -w 3 -c 64 -b "small big"
#   TARGETS="lb floor" bash bench/e2e/syscalls.sh -d 2 -w 1 -b small
#
# Counts per request do not depend on the machine's load; times do: the report
# prints the noise (CPU used by others during the count loads) and says whether
# its time-based figures count. Needs root (perf, strace), the harness
# (../shared/bench: its peers' configs and lib/proc-cpu.js), nginx, haproxy,
# wrk, strace, perf, cc, and `npm run build`. Ports: the backend's 9101/9102
# (status 9109), lb 9300, lb-1w 9301, floor 9310, nginx-1w-ka512 9203,
# haproxy-1t 9211; a port in use stops the script before it starts anything.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
harness="${BENCH_HARNESS:-$root/../shared/bench}"
[ -n "${BENCH_HARNESS:-}" ] || [ -d "$harness/peers" ] || harness="$root/../../shared/bench"
[ -d "$harness/peers" ] || { echo "syscalls: no harness at $harness (set BENCH_HARNESS)" >&2; exit 1; }
harness="$(cd "$harness" && pwd)"
secs=5 warm=3 conns=64 bodies='small big'
while getopts 'd:w:c:b:' o; do
  case $o in
    d) secs=$OPTARG ;; w) warm=$OPTARG ;; c) conns=$OPTARG ;; b) bodies=$OPTARG ;;
    *) sed -n 2,31p "$0"; exit 2 ;;
  esac
done
for tool in wrk nginx haproxy strace perf cc curl ss node timeout; do
  command -v "$tool" > /dev/null || { echo "syscalls: missing '$tool' (the harness's setup.sh installs wrk nginx haproxy)" >&2; exit 2; }
done
[ -f "$root/dist/core/cli.js" ] || { echo "syscalls: run 'npm run build' first" >&2; exit 1; }
source "$root/bench/e2e/ticks.sh"

declare -A TPORT TCMD # not PORT: start() exports PORT
perfprof='NODE_OPTIONS=--perf-basic-prof'
TPORT[lb]=9300 TCMD[lb]="$perfprof bash $root/bench/e2e/lb-target.sh"
TPORT[lb-1w]=9301 TCMD[lb-1w]="WORKERS=1 $perfprof bash $root/bench/e2e/lb-target.sh"
TPORT[floor]=9310 TCMD[floor]="$perfprof node $root/dist/bench/e2e/floor-proxy.js"
TPORT[nginx-1w-ka512]=9203 TCMD[nginx-1w-ka512]="nginx -p \"\$RUN_DIR/\" -e error.log -c $harness/peers/nginx-proxy-1w-ka512.conf -g 'daemon off;'"
TPORT[haproxy-1t]=9211 TCMD[haproxy-1t]="haproxy -db -f $harness/peers/haproxy-1t.cfg"
read -r -a targets <<< "${TARGETS:-lb lb-1w floor nginx-1w-ka512 haproxy-1t}"
for t in "${targets[@]}"; do [ -n "${TPORT[$t]:-}" ] || { echo "syscalls: unknown target $t (known: ${!TPORT[*]})" >&2; exit 2; }; done

port_busy () { [ -n "$(ss -Hltn "sport = :$1" 2> /dev/null)" ]; }
for p in 9101 9102 9109 $(for t in "${targets[@]}"; do echo "${TPORT[$t]}"; done); do
  if port_busy "$p"; then echo "syscalls: 127.0.0.1:$p is in use (another benchmark?): try again later" >&2; exit 1; fi
done

out="${OUT:-$root/bench/out/syscalls-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
echo "${targets[*]}" > "$out/targets" # the report's column order
log () { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$out/run.log" >&2; }
export UPSTREAMS=127.0.0.1:9101,127.0.0.1:9102

# only the process trees started here are ever signalled, by PID
started=()
tree () { local p; echo "$1"; for p in $(pgrep -P "$1" || true); do tree "$p"; done; }
stop_tree () {
  local pids p i
  pids="$(tree "$1")"
  for p in $pids; do kill -TERM "$p" 2> /dev/null || true; done
  for i in $(seq 50); do
    local alive=0
    for p in $pids; do kill -0 "$p" 2> /dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for p in $pids; do kill -KILL "$p" 2> /dev/null || true; done
  for p in $pids; do rm -f "/tmp/perf-$p.map"; done # written by --perf-basic-prof
}
cleanup () {
  local i
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do stop_tree "${started[$i]}"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME PORT CMD DIR: the command in the foreground of a subshell (exec: its PID is the proxy's)
start () {
  local name=$1 port=$2 cmd=$3 dir=$4 i
  mkdir -p "$dir/tmp"
  ( export PORT="$port" RUN_DIR="$dir"; exec bash -c "$cmd" ) > "$dir/stdout.log" 2>&1 < /dev/null &
  pid=$!
  started+=("$pid")
  for i in $(seq 100); do
    kill -0 "$pid" 2> /dev/null || { log "$name exited during start-up:"; tail -5 "$dir/stdout.log" >&2; return 1; }
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$port/" || true)" = 200 ] && return 0
    sleep 0.2
  done
  log "$name did not answer 200 on 127.0.0.1:$port within 20 s"; return 1
}

# load URL SECS FILE: one wrk run, its output in FILE
load () { timeout -k 5 $(($2 + 30)) wrk -t1 -c"$conns" -d"$2s" "$1" > "$3" 2>&1 || true; }
# children's CPU ticks of this shell (wrk and the tools it waited for), as the harness counts wrk's
child_ticks () { local st; read -r -a st < "/proc/$$/stat"; echo $((st[15] + st[16])); } # $$: the main shell, also inside $(...)
# voluntary and involuntary context switches of every thread of PIDs, from /proc
ctx () {
  local v=0 n=0 p f
  for p in "$@"; do
    for f in /proc/"$p"/task/*/status; do
      v=$((v + $(awk '/^voluntary_ctxt_switches/ {print $2}' "$f" 2> /dev/null || echo 0)))
      n=$((n + $(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$f" 2> /dev/null || echo 0)))
    done
  done
  echo "$v $n"
}
# a tool attached to PIDs for one load: TOOL... is started in the background, then the load, then SIGINT
attached () {
  local url=$1 file=$2 tpid; shift 2
  "$@" > "$file.tool.log" 2>&1 &
  tpid=$!
  sleep 1 # strace attaches thread by thread; perf opens its counters
  load "$url" "$secs" "$file"
  kill -INT "$tpid" 2> /dev/null || true
  wait "$tpid" 2> /dev/null || true
}

events='context-switches,cpu-migrations,task-clock,cycles,instructions,raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex'
log "targets: ${targets[*]}; bodies: $bodies; wrk -t1 -c$conns, ${secs}s per load, 3 loads per target and body; results in $out"
mkdir -p "$out/backend/tmp"
nginx -p "$out/backend/" -e error.log -c "$harness/peers/backend-nginx.conf" -g 'daemon off;' > "$out/backend/stdout.log" 2>&1 < /dev/null &
backend=$!
started+=("$backend")
for i in $(seq 50); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 http://127.0.0.1:9101/ || true)" = 200 ] && break
  sleep 0.2
done

for t in "${targets[@]}"; do
  port=${TPORT[$t]}
  start "$t" "$port" "${TCMD[$t]}" "$out/$t" || { log "skipping $t"; continue; }
  log "started $t (pid $pid) on 127.0.0.1:$port"
  for b in $bodies; do
    path=/; [ "$b" = big ] && path=/big
    url="http://127.0.0.1:$port$path"
    d="$out/$t/$b"
    mkdir -p "$d"
    [ "$warm" -gt 0 ] && load "$url" "$warm" "$d/warm.wrk"
    pids=$(tree "$pid" | tr '\n' ' ')
    csv=$(tr ' ' ',' <<< "${pids% }")

    # 1. count: perf stat + /proc
    node "$harness/lib/proc-cpu.js" snap "proxy=$pid" "backend=$backend" > "$d/count.cpu0"
    read -r u0 s0 <<< "$(ticks "$pid")"; read -r v0 n0 <<< "$(ctx $pids)"; c0=$(child_ticks)
    attached "$url" "$d/count.wrk" perf stat -x, -e "$events" -p "$csv" -o "$d/count.perf"
    c1=$(child_ticks); read -r u1 s1 <<< "$(ticks "$pid")"; read -r v1 n1 <<< "$(ctx $pids)"
    node "$harness/lib/proc-cpu.js" snap "proxy=$pid" "backend=$backend" > "$d/count.cpu1"
    printf '{"user_ticks":%d,"sys_ticks":%d,"voluntary":%d,"involuntary":%d,"child_ticks":%d,"hz":%d,"threads":%d}\n' \
      $((u1 - u0)) $((s1 - s0)) $((v1 - v0)) $((n1 - n0)) $((c1 - c0)) "$(getconf CLK_TCK)" \
      "$(for p in $pids; do ls "/proc/$p/task"; done | wc -l)" > "$d/count.json"
    sleep 1

    # 2. strace -c on every thread of every process of the tree
    sargs=(); for p in $pids; do sargs+=(-p "$p"); done
    attached "$url" "$d/strace.wrk" strace -c -f -q -o "$d/strace.txt" "${sargs[@]}"
    sleep 1

    # 3. perf record -g, split by layer
    attached "$url" "$d/record.wrk" perf record -g -F 4000 -o "$d/perf.data" -p "$csv"
    perf script -i "$d/perf.data" 2> /dev/null | node "$root/bench/e2e/perf-layers.js" "$root/dist/" > "$d/layers.json"
    rm -f "$d/perf.data" # tens of MB; the split is kept
    log "$t $b: $(awk '/requests in/ {print $1}' "$d/count.wrk") requests counted, $(awk '/requests in/ {print $1}' "$d/strace.wrk") under strace, $(awk '/requests in/ {print $1}' "$d/record.wrk") recorded"
    sleep 1
  done
  stop_tree "$pid"
done

log "syscost: µs per write, read, epoll_wait on loopback"
cc -O2 -Wall -o "$out/syscost" "$root/bench/e2e/syscost.c" -lpthread
"$out/syscost" 16 4096 > "$out/syscost.txt"
node "$root/bench/e2e/syscalls-report.js" "$out" | tee "$out/summary.md"
echo "results: $out"
