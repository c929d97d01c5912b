#!/usr/bin/env bash
# The test command (npm test): installs the programs tests drive when missing
# (test/tools.sh), builds, runs the test files (all, or those given) one at a
# time with a private TMPDIR, and fails when a test leaves anything in it.
#   npm test                                   every test
#   npm test -- dist/test/e2e/health.test.js   one file (after a build)
set -uo pipefail
cd "$(dirname "$0")/.."
bash test/tools.sh
npm run build || exit 1
files=("$@")
[ ${#files[@]} -eq 0 ] && mapfile -t files < <(find dist/test -name '*.test.js' | sort)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lb-tests-XXXXXX") || exit 1
# others may enter it: the install test runs lb as the user nobody from a folder in it
chmod 0755 "$tmp"
TMPDIR=$tmp node --test --test-concurrency=1 --test-timeout=120000 "${files[@]}"
status=$?
# node-compile-cache: the module cache tsc enables on Node 22 (module.enableCompileCache) when a test packs lb (prepack builds); not a test's
left=$(find "$tmp" -mindepth 1 -maxdepth 1 ! -name node-compile-cache -printf '  %f\n' | sort)
if [ -n "$left" ]; then
  echo "test run: the tests left these in TMPDIR ($tmp); a test must remove what it creates:" >&2
  echo "$left" >&2
  status=1
fi
rm -rf "$tmp"
exit $status
