#!/usr/bin/env bash
# The test command: installs what is missing, builds (preset `ci`), starts a private
# PostgreSQL, a real Kafka broker and a private Redis, runs every test tier (unit, pg, kafka, e2e,
# install) and stops what it started; then, as root and with no ctest args, the Debian packages
# (`ctest --preset package`: built, installed with apt-get, run, purged; tests/package/); then
# builds the unit tier alone under ASan/UBSan (preset `dev`, target `unit-tests`) and runs it
# (`ctest --preset unit`). Quiet on success apart from ctest's
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

# Test services on their own ports and directories, so a developer's demo node is untouched.
# Another checkout testing at the same time sets its own (GOST_PG_PORT, GOST_PG_DIR,
# GOST_KAFKA_PORT, GOST_KAFKA_DIR; Kafka also takes GOST_KAFKA_PORT + 1 for its controller;
# GOST_REDIS_PORT, GOST_REDIS_DIR).
export GOST_PG_DIR=${GOST_PG_DIR:-$root/var/pgtest} GOST_PG_PORT=${GOST_PG_PORT:-54339}
export GOST_TEST_PG="host=127.0.0.1 port=$GOST_PG_PORT user=gost"
export GOST_KAFKA_PORT=${GOST_KAFKA_PORT:-19092} GOST_KAFKA_DIR=${GOST_KAFKA_DIR:-$root/var/kafkatest}
export GOST_TEST_KAFKA=127.0.0.1:$GOST_KAFKA_PORT
export GOST_REDIS_PORT=${GOST_REDIS_PORT:-16379} GOST_REDIS_DIR=${GOST_REDIS_DIR:-$root/var/redistest}
export GOST_TEST_REDIS=127.0.0.1:$GOST_REDIS_PORT
cleanup() {
  scripts/redis.sh stop >/dev/null 2>&1 || true
  scripts/kafka.sh stop >/dev/null 2>&1 || true
  scripts/pg.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
step "starting PostgreSQL" "$logs/pg.log" scripts/pg.sh start
step "starting Kafka" "$logs/kafka.log" scripts/kafka.sh start
step "starting Redis" "$logs/redis.log" scripts/redis.sh start

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

# The unit tier again under ASan/UBSan: it needs no services, and only its binaries are built.
[[ ${GOST_TEST_SANITIZE:-1} == 0 ]] && exit 0
cleanup
step "configuring (preset dev: ASan/UBSan)" "$logs/configure-dev.log" cmake --preset dev
step "building the unit tier (preset dev)" "$logs/build-dev.log" \
  cmake --build --preset dev -j "$(nproc)" --target unit-tests
if ! ctest --preset unit -j 2 >"$logs/ctest-unit-dev.log" 2>&1; then
  grep -vE '^\s*(Start|[0-9]+/[0-9]+ Test .* Passed)' "$logs/ctest-unit-dev.log" | tail -n 200 >&2
  echo "test.sh: the unit tier failed under ASan/UBSan (full log: $logs/ctest-unit-dev.log)" >&2
  exit 1
fi
grep -E 'tests passed|Total Test time' "$logs/ctest-unit-dev.log" | sed 's/^/ASan\/UBSan, unit tier: /'
