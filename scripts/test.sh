#!/usr/bin/env bash
# The test command: installs what is missing, builds (preset `ci`), starts a private
# PostgreSQL and a real Kafka broker, runs every test tier (unit, pg, kafka, e2e) and stops
# what it started. Quiet on success apart from ctest's summary; on failure it prints why.
#   scripts/test.sh [ctest args...]      e.g. scripts/test.sh -L unit
#   GOST_PG_PORT=54369 GOST_KAFKA_PORT=19192 scripts/test.sh     (ports of your own; see below)
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
# GOST_KAFKA_PORT, GOST_KAFKA_DIR; Kafka also takes GOST_KAFKA_PORT + 1 for its controller).
export GOST_PG_DIR=${GOST_PG_DIR:-$root/var/pgtest} GOST_PG_PORT=${GOST_PG_PORT:-54339}
export GOST_TEST_PG="host=127.0.0.1 port=$GOST_PG_PORT user=gost"
export GOST_KAFKA_PORT=${GOST_KAFKA_PORT:-19092} GOST_KAFKA_DIR=${GOST_KAFKA_DIR:-$root/var/kafkatest}
export GOST_TEST_KAFKA=127.0.0.1:$GOST_KAFKA_PORT
cleanup() {
  scripts/kafka.sh stop >/dev/null 2>&1 || true
  scripts/pg.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
step "starting PostgreSQL" "$logs/pg.log" scripts/pg.sh start
step "starting Kafka" "$logs/kafka.log" scripts/kafka.sh start

if ! ctest --preset ci -j 2 "$@" >"$logs/ctest.log" 2>&1; then
  grep -vE '^\s*(Start|[0-9]+/[0-9]+ Test .* Passed)' "$logs/ctest.log" | tail -n 200 >&2
  echo "test.sh: tests failed (full log: $logs/ctest.log)" >&2
  exit 1
fi
grep -E 'tests passed|Total Test time' "$logs/ctest.log"
