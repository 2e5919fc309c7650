#!/usr/bin/env bash
# The longer test run, beyond CI's budget (scripts/test.sh runs the unit and pg tiers under
# ASan/UBSan; this adds what takes too long there):
#   1. every tier but the package under ASan/UBSan (preset `dev`: gostd, gostctl and the e2e,
#      kafka and redis tiers included; `ctest --preset dev`);
#   2. the unit tier under ThreadSanitizer (preset `tsan`, target `unit-tests`;
#      `ctest --preset tsan-unit`, suppressions in tests/tsan.supp: Debian's CAF, libpqxx,
#      librdkafka, libvips are not instrumented, so races with them on a stack are not
#      checked; gost_images.unit is left out (libvips' decodes stall under TSan) and the two
#      librdkafka delivery tests skip (its broker threads crash in TSan's allocator)).
# Installs what is missing and starts its own PostgreSQL, Kafka and Redis like scripts/test.sh
# (same ports and variables). Quiet on success apart from ctest's summaries. On this two-core
# machine a first run builds two more trees (about an hour); later runs reuse ccache.
#   scripts/nightly.sh            both parts
#   scripts/nightly.sh asan       only the first
#   scripts/nightly.sh tsan       only the second
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
logs=$root/var/test-logs
mkdir -p "$logs"
source "$root/scripts/lib.sh"
what=${1:-all}

step "installing dependencies" "$logs/install.log" scripts/install-deps.sh --kafka

# run_tier NAME PRESET LOG: ctest with a preset; on failure prints the failures and stops.
run_tier() {
  local name=$1 preset=$2 log=$3
  if ! ctest --preset "$preset" -j 2 >"$log" 2>&1; then
    grep -vE '^\s*(Start|[0-9]+/[0-9]+ Test .* Passed)' "$log" | tail -n 200 >&2
    echo "nightly.sh: $name failed (full log: $log)" >&2
    exit 1
  fi
  grep -E 'tests passed|Total Test time' "$log" | sed "s/^/$name: /"
}

if [[ $what == all || $what == asan ]]; then
  step "configuring (preset dev: ASan/UBSan)" "$logs/configure-dev.log" cmake --preset dev
  step "building everything (preset dev)" "$logs/build-dev-all.log" \
    cmake --build --preset dev -j "$(nproc)"
  start_test_services "$logs"
  run_tier "ASan/UBSan, every tier" dev "$logs/ctest-dev-all.log"
  stop_test_services
fi

if [[ $what == all || $what == tsan ]]; then
  step "configuring (preset tsan)" "$logs/configure-tsan.log" cmake --preset tsan
  step "building the unit tier (preset tsan)" "$logs/build-tsan.log" \
    cmake --build --preset tsan -j "$(nproc)" --target unit-tests
  run_tier "TSan, unit tier" tsan-unit "$logs/ctest-tsan-unit.log"
fi
