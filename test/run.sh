#!/usr/bin/env bash
# The test command (npm test): installs the programs tests drive when missing
# (test/tools.sh), builds, runs the test files (all, or those given) with a
# private TMPDIR, and fails when a test leaves anything in it.
#   npm test                                   every test
#   npm test -- dist/test/e2e/health.test.js   one file (after a build)
# Files run one at a time in each of LB_TEST_LANES lanes (default 2): each lane
# takes the next file of the list when its last one ends. Most of a test's time
# is spent waiting (on time-outs, processes starting, Redis failovers), so two
# lanes take about half the time of one on two cores. Every file starts its
# own processes on free ports in its own temporary directory, so files in two
# lanes do not meet. Each file's output is printed whole when it ends; the
# totals come last.
set -uo pipefail
cd "$(dirname "$0")/.."
bash test/tools.sh
npm run build || exit 1
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  # the slowest folders first, so that no lane is left with a long file at the end
  mapfile -t files < <(
    find dist/test \( -path '*/cluster/*' -o -path '*/fuzz/*' -o -path '*/gen/*' \) -name '*.test.js' | sort
    find dist/test -name '*.test.js' ! -path '*/cluster/*' ! -path '*/fuzz/*' ! -path '*/gen/*' | sort
  )
fi
lanes=${LB_TEST_LANES:-2}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lb-tests-XXXXXX") || exit 1
# others may enter it: the install test runs lb as the user nobody from a folder in it
chmod 0755 "$tmp"
run=$(mktemp -d "${TMPDIR:-/tmp}/lb-test-run-XXXXXX") || exit 1
echo 0 > "$run/next"

# One lane: takes the next file's index under a lock, runs the file, prints its output under another lock.
lane() {
  local i f
  while :; do
    i=$(flock "$run/next" bash -c 'n=$(cat "$1"); echo $((n + 1)) > "$1"; echo "$n"' _ "$run/next")
    [ "$i" -lt ${#files[@]} ] || return 0
    f=${files[$i]}
    TMPDIR=$tmp node --test --test-timeout=120000 "$f" > "$run/out-$i" 2>&1
    echo $? > "$run/status-$i"
    flock "$run/print" bash -c 'echo "# file: $1"; cat "$2"' _ "$f" "$run/out-$i"
  done
}
for _ in $(seq "$lanes"); do lane & done
wait

status=0
failed=()
total=0 pass=0 fail=0
for i in "${!files[@]}"; do
  read -r s < "$run/status-$i" || s=1
  [ "$s" = 0 ] || { status=1; failed+=("${files[$i]}"); }
  t=$(sed -n 's/^# tests \([0-9]*\)$/\1/p' "$run/out-$i" | tail -1)
  p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$run/out-$i" | tail -1)
  x=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$run/out-$i" | tail -1)
  total=$((total + ${t:-0})) pass=$((pass + ${p:-0})) fail=$((fail + ${x:-0}))
done
echo "# files ${#files[@]}"
echo "# tests $total"
echo "# pass $pass"
echo "# fail $fail"
[ "$status" = 0 ] || printf '# failed: %s\n' "${failed[@]}"
# node-compile-cache: the module cache tsc enables on Node 22 (module.enableCompileCache) when a test packs lb (prepack builds); not a test's
left=$(find "$tmp" -mindepth 1 -maxdepth 1 ! -name node-compile-cache -printf '  %f\n' | sort)
if [ -n "$left" ]; then
  echo "test run: the tests left these in TMPDIR ($tmp); a test must remove what it creates:" >&2
  echo "$left" >&2
  status=1
fi
rm -rf "$tmp" "$run"
exit $status
