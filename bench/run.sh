#!/usr/bin/env bash
# Runs gost's benchmarks: builds the release preset, starts a private PostgreSQL (var/pgbench,
# port 54349) and prints one JSON line per benchmark, last on its output.
#   bench/run.sh [NAME...]     names: stage_noop stage_offer resident (default: all)
# Options through the environment: BENCH_OFFERS (100000), BENCH_SHARDS (4).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(stage_noop stage_offer resident)
logs=$root/var/bench-logs
mkdir -p "$logs"

source "$root/scripts/lib.sh"

step "installing dependencies" "$logs/install.log" scripts/install-deps.sh
step "configuring" "$logs/configure.log" cmake --preset release
step "building" "$logs/build.log" cmake --build --preset release -j "$(nproc)" --target gost_bench

export GOST_PG_DIR=$root/var/pgbench GOST_PG_PORT=54349 GOST_PG_DB=gost_bench
step "starting PostgreSQL" "$logs/pg.log" scripts/pg.sh start
dsn="host=127.0.0.1 port=$GOST_PG_PORT user=gost dbname=gost_bench"

for name in "${names[@]}"; do
  case $name in
    stage_noop|stage_offer|resident)
      build/release/bench/gost_bench "$name" --dsn "$dsn" --offers "${BENCH_OFFERS:-100000}" \
        --shards "${BENCH_SHARDS:-4}" 2>"$logs/$name.log" \
        || { tail -n 20 "$logs/$name.log" >&2; echo "bench/run.sh: $name failed" >&2; exit 1; }
      ;;
    *) echo "bench/run.sh: unknown benchmark $name (known: stage_noop stage_offer resident)" >&2; exit 2 ;;
  esac
done
