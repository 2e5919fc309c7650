#!/usr/bin/env bash
# The test command: installs what is missing, builds (preset `ci`), starts a private
# PostgreSQL, a real Kafka broker and a private Redis, runs every test tier (unit, pg, kafka, e2e,
# install) and stops what it started; then, as root and with no ctest args, the Debian packages
# (`ctest --preset package`: built, installed with apt-get, run, purged; tests/package/); then
# builds the unit and pg tiers' binaries under ASan/UBSan (preset `dev`, target `unit-tests`)
# and runs those tiers on the same PostgreSQL (`ctest --preset sanitized`). The longer runs
# (e2e under ASan/UBSan, unit under TSan) are scripts/nightly.sh. Quiet on success apart from ctest's
# summaries; on failure it prints why.
#   scripts/test.sh [ctest args...]      e.g. scripts/test.sh -L unit   (args: the `ci` run only)
#   GOST_PG_PORT=54369 GOST_KAFKA_PORT=19192 GOST_REDIS_PORT=16479 scripts/test.sh
#                                                                (ports of your own; see below)
#   GOST_TEST_SANITIZE=0 scripts/test.sh                         (without the ASan/UBSan run)
#   GOST_TEST_PACKAGE=0 scripts/test.sh                          (without the package test)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
logs=$root/var/test-logs
mkdir -p "$logs"

source "$root/scripts/lib.sh"

step "installing dependencies" "$logs/install.log" scripts/install-deps.sh --kafka
step "configuring" "$logs/configure.log" cmake --preset ci
step "building" "$logs/build.log" cmake --build --preset ci -j "$(nproc)"

start_test_services "$logs"

if ! ctest --preset ci -j 2 "$@" >"$logs/ctest.log" 2>&1; then
  grep -vE '^\s*(Start|[0-9]+/[0-9]+ Test .* Passed)' "$logs/ctest.log" | tail -n 200 >&2
  echo "test.sh: tests failed (full log: $logs/ctest.log)" >&2
  exit 1
fi
grep -E 'tests passed|Total Test time' "$logs/ctest.log"

# The Debian packages, while PostgreSQL still runs (the packaged node uses it). apt-get needs
# root; the test leaves the machine as it found it (apt-get purge) and refuses to start when a
# gost package or user is there already.
if [[ $# -eq 0 && ${GOST_TEST_PACKAGE:-1} != 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "test.sh: package test skipped: it installs packages with apt-get and needs root" >&2
  elif ! ctest --preset package >"$logs/ctest-package.log" 2>&1; then
    tail -n 100 "$logs/ctest-package.log" >&2
    echo "test.sh: the package test failed (full log: $logs/ctest-package.log)" >&2
    exit 1
  else
    grep -E 'tests passed' "$logs/ctest-package.log" | sed 's/^/Debian packages: /'
  fi
fi

# The unit and pg tiers again under ASan/UBSan, on the same PostgreSQL; only their binaries
# are built (target unit-tests). The e2e tier under ASan and the unit tier under TSan take
# longer than CI's budget: scripts/nightly.sh runs them.
[[ ${GOST_TEST_SANITIZE:-1} == 0 ]] && exit 0
scripts/kafka.sh stop >/dev/null 2>&1 || true
scripts/redis.sh stop >/dev/null 2>&1 || true
step "configuring (preset dev: ASan/UBSan)" "$logs/configure-dev.log" cmake --preset dev
step "building the unit and pg tiers (preset dev)" "$logs/build-dev.log" \
  cmake --build --preset dev -j "$(nproc)" --target unit-tests
if ! ctest --preset sanitized -j 2 >"$logs/ctest-sanitized.log" 2>&1; then
  grep -vE '^\s*(Start|[0-9]+/[0-9]+ Test .* Passed)' "$logs/ctest-sanitized.log" | tail -n 200 >&2
  echo "test.sh: the unit or pg tier failed under ASan/UBSan (full log: $logs/ctest-sanitized.log)" >&2
  exit 1
fi
grep -E 'tests passed|Total Test time' "$logs/ctest-sanitized.log" \
  | sed 's/^/ASan\/UBSan, unit and pg tiers: /'
