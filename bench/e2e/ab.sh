#!/usr/bin/env bash
# A/B of this working tree against another build of lb with the side-by-side
# harness (bench/e2e/run.sh): `lb` (this tree, built here) and `lb-ref` (REF)
# alternate in every round with a peer, in RUNS runs of fresh processes (one
# process can be 15-20% off for its whole life: an A/A run once read 1.20),
# then every round's ratios are printed with that round's noise, and the
# medians over all rounds. The habit before merging a change to the request
# path; its last lines go in the commit message. How to read the noise:
# bench/RESULTS.md, "A/B against a commit".
#
#   bash bench/e2e/ab.sh [options] REF
#
# REF: a commit of this repository (main, HEAD~3, 43dead2...), built once into
# $AB_CACHE/<commit> (default ${TMPDIR:-/tmp}/lb-ab): its files from git
# archive, this tree's node_modules linked when its package-lock.json is the
# same (else `npm install --omit=optional` there: the lockfile leaves out other
# platforms' packages, which `npm ci` refuses), then tsc. Or the directory of a
# built checkout.
# Options: -n RUNS (3), -r ROUNDS per run (2), -d SECS per load (5), -w SECS warm-up (3),
#   -c "CONNS..." (64), -b "BODIES..." (small big), -p PEER (haproxy-1t; "" for
#   none), WORKERS=N in the environment for both builds (default auto).
# Needs what bench/e2e/run.sh needs (the harness, nginx, haproxy, wrk). Ports:
# lb 9300, lb-ref 9302, the harness's backends 9101/9102 and peers; the
# harness refuses to start when one is taken (another benchmark running).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
runs=3 rounds=2 secs=5 warm=3 conns=64 bodies='small big' peer=haproxy-1t
while getopts 'n:r:d:w:c:b:p:' o; do
  case $o in
    n) runs=$OPTARG ;; r) rounds=$OPTARG ;; d) secs=$OPTARG ;; w) warm=$OPTARG ;; c) conns=$OPTARG ;; b) bodies=$OPTARG ;; p) peer=$OPTARG ;;
    *) sed -n 2,24p "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { sed -n 2,24p "$0"; exit 2; }
ref=$1

# the reference build
sha=''
if [ -f "$ref/dist/core/cli.js" ]; then
  refdir=$(cd "$ref" && pwd)
else
  sha=$(git -C "$root" rev-parse --verify --quiet "$ref^{commit}") || { echo "ab: $ref is neither a commit nor a built checkout" >&2; exit 2; }
  refdir="${AB_CACHE:-${TMPDIR:-/tmp}/lb-ab}/${sha:0:12}"
  if [ ! -f "$refdir/.built" ]; then
    echo "ab: building $ref (${sha:0:12}) in $refdir"
    rm -rf "$refdir" && mkdir -p "$refdir"
    git -C "$root" archive "$sha" | tar -x -C "$refdir"
    if cmp -s "$root/package-lock.json" "$refdir/package-lock.json" && cmp -s "$root/native/uws.json" "$refdir/native/uws.json" 2>/dev/null; then
      ln -s "$root/node_modules" "$refdir/node_modules"
      [ -d "$root/native/build" ] && cp -a "$root/native/build" "$refdir/native/"
    else
      (cd "$refdir" && npm install --omit=optional --no-audit --no-fund > npm-install.log 2>&1) || { echo "ab: npm install failed in $refdir (npm-install.log)" >&2; exit 1; }
    fi
    (cd "$refdir" && node_modules/.bin/tsc -p tsconfig.json > tsc.log 2>&1) || true # type errors of an old commit still emit
    [ -f "$refdir/dist/core/cli.js" ] || { echo "ab: $ref did not build (see $refdir/tsc.log)" >&2; exit 1; }
    touch "$refdir/.built"
  fi
fi
[ "${AB_BUILD:-1}" = 0 ] || (cd "$root" && npm run build > /dev/null) || { echo "ab: npm run build failed in $root" >&2; exit 1; }

out="${OUT:-$root/bench/out/ab-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
# the reference's own target script when it has one: it writes the config that build reads
target="bash $refdir/bench/e2e/lb-target.sh"
[ -f "$refdir/bench/e2e/lb-target.sh" ] || target="LB_ROOT=$refdir bash $root/bench/e2e/lb-target.sh"
dirty=$(git -C "$root" status --porcelain --untracked-files=no | wc -l)
echo "ab: lb = $root at $(git -C "$root" rev-parse --short HEAD)$([ "$dirty" = 0 ] || echo " + $dirty changed files"); lb-ref = $ref${sha:+ (${sha:0:12})} in $refdir"
files=()
mine="lb=9300=bash $root/bench/e2e/lb-target.sh" theirs="lb-ref=9302=$target"
for i in $(seq "$runs"); do
  # started in turn first: the harness starts and warms its targets in order
  if [ $((i % 2)) = 1 ]; then pair="$mine"$'\n'"$theirs"; else pair="$theirs"$'\n'"$mine"; fi
  OUT="$out/run$i" TARGETS="$peer" LB_TARGETS="$pair" \
    bash "$root/bench/e2e/run.sh" -d "$secs" -r "$rounds" -w "$warm" -c "$conns" -b "$bodies" > "$out/run$i.log" 2>&1 ||
    { tail -20 "$out/run$i.log" >&2; echo "ab: the harness failed (log: $out/run$i.log)" >&2; exit 1; }
  files+=("$out/run$i/results.jsonl")
done
node "$root/bench/e2e/pair-ratio.js" "${files[@]}" lb lb-ref --rounds
echo
for i in $(seq "$runs"); do
  echo "Noise, run $i (rounds $i.*):"
  awk '/^### Noise/ {on = 1; next} on && /^### / {exit} on && NF' "$out/run$i/summary.md"
done
if [ -n "$peer" ]; then
  node "$root/bench/e2e/pair-ratio.js" "${files[@]}" lb "$peer"
  node "$root/bench/e2e/pair-ratio.js" "${files[@]}" lb-ref "$peer"
fi
echo "results: $out"
