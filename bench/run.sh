#!/usr/bin/env bash
# Runs gost's benchmarks: builds the release preset, starts a private PostgreSQL (var/pgbench,
# port 54349 unless GOST_PG_DIR / GOST_PG_PORT say otherwise) and prints one JSON line per
# benchmark, last on its output.
#   bench/run.sh [NAME...]     names: stage_noop (with the graphile-worker peer) stage_offer
#                              resident timers failover api_updates api_cluster api_groups outbox_kafka
#                              tasks (with the graphile-worker peer) console_cost images (with
#                              the thumbor peer) images_queue (the Kafka queue, with the
#                              PostgreSQL queue as peer) actions (with the graphile-worker peer)
#                              actions_idle idle (an idle node against PostgreSQL alone) feed
#                              (a feed load end to end, with xmllint as the parse floor) evolve
#                              (offers moved to a new catalog version)
#                              (default: all but console_cost, images, images_queue, actions,
#                              actions_idle, idle, feed and evolve)
# Options through the environment: BENCH_OFFERS (100000), BENCH_SHARDS (4; 64 for tasks), BENCH_PEER (1: run
# the graphile-worker peer beside stage_noop and tasks, in database gost_peer; 0: skip it),
# BENCH_TIMERS (1000000), BENCH_SPAN (240) and BENCH_MEASURE (0: all; else the timers due in its first
# seconds are measured while the rest stay pending), BENCH_LEAD (seconds until the first timer is due;
# default 15 + 35 µs per timer), BENCH_TASKS (1000000), BENCH_TASK_EVENTS (100000), BENCH_TASK_GROUPS (8), GOST_PG_PORT
# (54349) and GOST_PG_DIR (var/pgbench): another server for this checkout's benchmarks, so that
# two checkouts benchmarking at once do not share one (scripts/pg.sh refuses a server on the
# port whose data directory is not GOST_PG_DIR), BENCH_KAFKA_PORT (19192, the broker of outbox_kafka, images_queue and feed),
# BENCH_FEED_OFFERS (100000) and BENCH_FEED_SEED (1): the feed benchmark's file,
# BENCH_EVOLVE_OFFERS (1000000) and BENCH_EVOLVE_AFFECTED (0.1): the offers of evolve and the
# fraction the new catalog version moves.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(stage_noop stage_offer resident timers failover api_updates api_cluster outbox_kafka tasks)
logs=$root/var/bench-logs
mkdir -p "$logs"

source "$root/scripts/lib.sh"

step "installing dependencies" "$logs/install.log" scripts/install-deps.sh
step "configuring" "$logs/configure.log" cmake --preset release
step "building" "$logs/build.log" cmake --build --preset release -j "$(nproc)" --target gost_bench

export GOST_PG_DIR=${GOST_PG_DIR:-$root/var/pgbench} GOST_PG_PORT=${GOST_PG_PORT:-54349} GOST_PG_DB=gost_bench
step "starting PostgreSQL" "$logs/pg.log" scripts/pg.sh start
dsn="host=127.0.0.1 port=$GOST_PG_PORT user=gost dbname=gost_bench"

# The peer's database: the peer drops and recreates its own tables there.
peer_dsn="host=127.0.0.1 port=$GOST_PG_PORT user=gost dbname=gost_peer"

# Runs one gost benchmark; prints its JSON line.
gost_bench() {
  local name=$1
  build/release/bench/gost_bench "$name" --dsn "$dsn" --offers "${BENCH_OFFERS:-100000}" \
    --shards "${BENCH_SHARDS:-4}" 2>"$logs/$name.log" \
    || { tail -n 20 "$logs/$name.log" >&2; echo "bench/run.sh: $name failed" >&2; exit 1; }
}

# The number in field NAME of a JSON line: field NAME LINE.
field() { sed -E "s/.*\"$1\": *([0-9.]+).*/\1/" <<<"$2"; }

# Runs graphile-worker on the same work and prints gost's line extended by the peer's figure,
# the ratio and the peer's CPU per job (node's and PostgreSQL's, peer_cpu_us_per_op and
# peer_pg_cpu_us_per_op, beside gost's gost_cpu_us_per_op and pg_cpu_us_per_op):
# with_graphile_peer LINE JOBS [SCRIPT [ARGS...]] (peers/graphile-worker/run.sh; noop.js by
# default: one job per offer writing its state row).
peer_db() {
  psql "host=127.0.0.1 port=$GOST_PG_PORT user=gost dbname=postgres" -qAtc \
    "SELECT 1 FROM pg_database WHERE datname = 'gost_peer'" | grep -q 1 \
    || createdb -h 127.0.0.1 -p "$GOST_PG_PORT" -U gost gost_peer
}
with_graphile_peer() {
  local line=$1 jobs=$2 peer value peer_value
  shift 2
  peer_db
  peer=$(bench/peers/graphile-worker/run.sh "$peer_dsn" "$jobs" "$@" \
           2>"$logs/graphile-worker.log") \
    || { tail -n 20 "$logs/graphile-worker.log" >&2; echo "bench/run.sh: peer failed" >&2; exit 1; }
  value=$(field value "$line")
  peer_value=$(field value "$peer")
  printf '%s, "peer": "graphile-worker 0.17.3", "peer_value": %s, "ratio": %.2f, "peer_cpu_us_per_op": %s, "peer_pg_cpu_us_per_op": %s}\n' \
    "${line%\}}" "$peer_value" "$(awk -v a="$value" -v b="$peer_value" 'BEGIN { print a / b }')" \
    "$(field cpu_us_per_op "$peer")" "$(field pg_cpu_us_per_op "$peer")"
}

for name in "${names[@]}"; do
  case $name in
    stage_noop)
      line=$(gost_bench stage_noop)
      if [[ ${BENCH_PEER:-1} == 1 ]]; then with_graphile_peer "$line" "${BENCH_OFFERS:-100000}"; else echo "$line"; fi
      ;;
    tasks)
      # BENCH_TASKS tasks created, BENCH_TASK_EVENTS verdicts among them, in BENCH_TASK_GROUPS
      # groups, on gostd's default 64 shards (a group runs up to 8 tasks at once per shard);
      # graphile-worker does the same work in the same run (tasks.js).
      tasks=${BENCH_TASKS:-1000000} events=${BENCH_TASK_EVENTS:-100000} groups=${BENCH_TASK_GROUPS:-8}
      line=$(build/release/bench/gost_bench tasks --dsn "$dsn" --tasks "$tasks" --events "$events" \
               --groups "$groups" --shards "${BENCH_SHARDS:-64}" 2>"$logs/tasks.log") \
        || { tail -n 20 "$logs/tasks.log" >&2; echo "bench/run.sh: tasks failed" >&2; exit 1; }
      if [[ ${BENCH_PEER:-1} == 1 ]]; then
        with_graphile_peer "$line" "$events" tasks.js --tasks "$tasks" --groups "$groups"
      else
        echo "$line"
      fi
      ;;
    actions)
      # BENCH_ACTIONS (1,000,000) scheduled actions due over BENCH_ACTIONS_SPAN (3600) seconds on
      # BENCH_SHARDS (64, gostd's default) shards, the lag of those due in the first
      # BENCH_ACTIONS_MEASURE (60) seconds, then a burst of BENCH_ACTIONS_BURST (100,000) due at
      # one second; graphile-worker does the same with run_at (peers/graphile-worker/actions.js,
      # pollInterval BENCH_PEER_POLL, 100 ms). ratio: the peer's lag p99 over gost's.
      a_args=(--span "${BENCH_ACTIONS_SPAN:-3600}" --measure "${BENCH_ACTIONS_MEASURE:-60}"
              --burst "${BENCH_ACTIONS_BURST:-100000}")
      line=$(build/release/bench/gost_bench actions --dsn "$dsn" --actions "${BENCH_ACTIONS:-1000000}" \
               --shards "${BENCH_SHARDS:-64}" "${a_args[@]}" 2>"$logs/actions.log") \
        || { tail -n 20 "$logs/actions.log" >&2; echo "bench/run.sh: actions failed" >&2; exit 1; }
      if [[ ${BENCH_PEER:-1} == 1 ]]; then
        peer_db
        peer=$(bench/peers/graphile-worker/run.sh "$peer_dsn" "${BENCH_ACTIONS:-1000000}" actions.js \
                 "${a_args[@]}" --poll "${BENCH_PEER_POLL:-100}" 2>"$logs/graphile-worker.log") \
          || { tail -n 20 "$logs/graphile-worker.log" >&2; echo "bench/run.sh: peer failed" >&2; exit 1; }
        value=$(field value "$line")
        peer_value=$(field value "$peer")
        printf '%s, "peer": "graphile-worker 0.17.3 (run_at, pollInterval %s ms)", "peer_value": %s, "peer_p50_ms": %s, "peer_burst_per_s": %s, "ratio": %.2f}\n' \
          "${line%\}}" "${BENCH_PEER_POLL:-100}" "$peer_value" "$(field p50_ms "$peer")" \
          "$(field burst_per_s "$peer")" "$(awk -v a="$value" -v b="$peer_value" 'BEGIN { print b / a }')"
      else
        echo "$line"
      fi
      ;;
    idle|actions_idle)
      step "building gostd" "$logs/build-gostd.log" cmake --build --preset release -j "$(nproc)" --target gostd
      bench/idle.sh build/release/runtime/gostd "$GOST_PG_PORT" "$name" 2>"$logs/$name.log" \
        || { tail -n 20 "$logs/$name.log" >&2; echo "bench/run.sh: $name failed" >&2; exit 1; }
      ;;
    stage_offer|resident)
      gost_bench "$name"
      ;;
    evolve)
      # A catalog version merging two categories and renaming an attribute over
      # BENCH_EVOLVE_OFFERS offers, BENCH_EVOLVE_AFFECTED of them moved (evolve_bench.cpp).
      build/release/bench/gost_bench evolve --dsn "$dsn" --offers "${BENCH_EVOLVE_OFFERS:-1000000}" \
        --affected "${BENCH_EVOLVE_AFFECTED:-0.1}" --shards "${BENCH_SHARDS:-4}" 2>"$logs/evolve.log" \
        || { tail -n 20 "$logs/evolve.log" >&2; echo "bench/run.sh: evolve failed" >&2; exit 1; }
      ;;
    failover)
      step "building gostd" "$logs/build-gostd.log" cmake --build --preset release -j "$(nproc)" --target gostd
      bench/failover.sh build/release/runtime/gostd "$GOST_PG_PORT" "${BENCH_RUNS:-5}" 2>"$logs/failover.log" \
        || { tail -n 20 "$logs/failover.log" >&2; echo "bench/run.sh: failover failed" >&2; exit 1; }
      ;;
    api_updates)
      step "building gostd and the client" "$logs/build-api.log" \
        cmake --build --preset release -j "$(nproc)" --target gostd gost_api_bench
      bench/api_updates.sh build/release/runtime/gostd build/release/bench/gost_api_bench \
        "$GOST_PG_PORT" 2>"$logs/api_updates.log" \
        || { tail -n 20 "$logs/api_updates.log" >&2; echo "bench/run.sh: api_updates failed" >&2; exit 1; }
      ;;
    api_cluster)
      # The same load on three nodes against one node, 12 shards each time, on this machine.
      step "building gostd and the client" "$logs/build-api.log" \
        cmake --build --preset release -j "$(nproc)" --target gostd gost_api_bench
      one=$(BENCH_API_NODE_ARGS=--shard.count=12 bench/api_updates.sh build/release/runtime/gostd \
              build/release/bench/gost_api_bench "$GOST_PG_PORT" 1 2>"$logs/api_cluster-1.log") \
        || { tail -n 20 "$logs/api_cluster-1.log" >&2; echo "bench/run.sh: api_cluster failed" >&2; exit 1; }
      three=$(BENCH_API_NODE_ARGS=--shard.count=12 bench/api_updates.sh build/release/runtime/gostd \
              build/release/bench/gost_api_bench "$GOST_PG_PORT" 3 2>"$logs/api_cluster-3.log") \
        || { tail -n 20 "$logs/api_cluster-3.log" >&2; echo "bench/run.sh: api_cluster failed" >&2; exit 1; }
      v1=$(field value "$one")
      v3=$(field value "$three")
      # CPU per acknowledged update: of the three nodes together, and of the one node (peer_).
      printf '{"bench": "api_cluster", "value": %s, "unit": "updates/s acknowledged, 3 nodes", "gost_cpu_us_per_op": %s, "pg_cpu_us_per_op": %s, "peer": "1 node", "peer_value": %s, "ratio": %.2f, "peer_gost_cpu_us_per_op": %s, "peer_pg_cpu_us_per_op": %s}\n' \
        "$v3" "$(field gost_cpu_us_per_op "$three")" "$(field pg_cpu_us_per_op "$three")" "$v1" \
        "$(awk -v a="$v3" -v b="$v1" 'BEGIN { print a / b }')" \
        "$(field gost_cpu_us_per_op "$one")" "$(field pg_cpu_us_per_op "$one")"
      ;;
    api_groups)
      # The same load on one shard group and on two (ADR 0023: the upper half of the shards in
      # a second database of the same server), one node, same run. On one two-core machine this
      # says what the routing and a second pool cost, not how groups scale (docs/sharding.md).
      step "building gostd and the client" "$logs/build-api.log" \
        cmake --build --preset release -j "$(nproc)" --target gostd gost_api_bench
      one=$(BENCH_API_GROUPS=1 bench/api_updates.sh build/release/runtime/gostd \
              build/release/bench/gost_api_bench "$GOST_PG_PORT" 2>"$logs/api_groups-1.log") \
        || { tail -n 20 "$logs/api_groups-1.log" >&2; echo "bench/run.sh: api_groups failed" >&2; exit 1; }
      two=$(BENCH_API_GROUPS=2 bench/api_updates.sh build/release/runtime/gostd \
              build/release/bench/gost_api_bench "$GOST_PG_PORT" 2>"$logs/api_groups-2.log") \
        || { tail -n 20 "$logs/api_groups-2.log" >&2; echo "bench/run.sh: api_groups failed" >&2; exit 1; }
      v1=$(field value "$one")
      v2=$(field value "$two")
      printf '{"bench": "api_groups", "value": %s, "unit": "updates/s acknowledged, 2 shard groups", "gost_cpu_us_per_op": %s, "pg_cpu_us_per_op": %s, "peer": "1 shard group", "peer_value": %s, "ratio": %.2f, "peer_gost_cpu_us_per_op": %s, "peer_pg_cpu_us_per_op": %s}\n' \
        "$v2" "$(field gost_cpu_us_per_op "$two")" "$(field pg_cpu_us_per_op "$two")" "$v1" \
        "$(awk -v a="$v2" -v b="$v1" 'BEGIN { print a / b }')" \
        "$(field gost_cpu_us_per_op "$one")" "$(field pg_cpu_us_per_op "$one")"
      ;;
    console_cost)
      # The console's own cost: the api_updates load (every update committed and run through
      # the node's stages) without and with `gostctl top --interval 1` polling the node,
      # alternated BENCH_CONSOLE_ROUNDS times (2) in one run; value: updates/s with it, peer:
      # without it; the gostd CPU per update of both.
      step "building gostd, gostctl and the client" "$logs/build-api.log" \
        cmake --build --preset release -j "$(nproc)" --target gostd gostctl gost_api_bench
      off=() on=() off_cpu=() on_cpu=()
      for ((r = 0; r < ${BENCH_CONSOLE_ROUNDS:-2}; ++r)); do
        for mode in off on; do
          line=$(BENCH_API_CONSOLE=$([[ $mode == on ]] && echo build/release/runtime/gostctl) \
                   bench/api_updates.sh build/release/runtime/gostd build/release/bench/gost_api_bench \
                   "$GOST_PG_PORT" 2>"$logs/console_cost-$mode.log") \
            || { tail -n 20 "$logs/console_cost-$mode.log" >&2; echo "bench/run.sh: console_cost failed" >&2; exit 1; }
          if [[ $mode == on ]]; then on+=("$(field value "$line")"); on_cpu+=("$(field gost_cpu_us_per_op "$line")")
          else off+=("$(field value "$line")"); off_cpu+=("$(field gost_cpu_us_per_op "$line")"); fi
        done
      done
      mean() { awk '{ s = 0; for (i = 1; i <= NF; ++i) s += $i; printf "%.1f", s / NF }' <<<"$*"; }
      v_on=$(mean "${on[@]}") v_off=$(mean "${off[@]}")
      printf '{"bench": "console_cost", "value": %s, "unit": "updates/s acknowledged with gostctl top polling every second", "gost_cpu_us_per_op": %s, "peer": "the same load without the console", "peer_value": %s, "ratio": %.3f, "peer_gost_cpu_us_per_op": %s, "rounds": "%s | %s"}\n' \
        "$v_on" "$(mean "${on_cpu[@]}")" "$v_off" "$(awk -v a="$v_on" -v b="$v_off" 'BEGIN { print a / b }')" \
        "$(mean "${off_cpu[@]}")" "on ${on[*]}" "off ${off[*]}"
      ;;
    outbox_kafka)
      step "building gostd" "$logs/build-gostd.log" cmake --build --preset release -j "$(nproc)" --target gostd gost_bench
      bench/outbox_kafka.sh build/release/runtime/gostd build/release/bench/gost_bench \
        "$GOST_PG_PORT" 2>"$logs/outbox_kafka.log" \
        || { tail -n 20 "$logs/outbox_kafka.log" >&2; echo "bench/run.sh: outbox_kafka failed" >&2; exit 1; }
      ;;
    images)
      # gostd's ImageService against thumbor (PyPI) on the same 1 MP JPEGs (bench/images.sh).
      step "building gostd and the client" "$logs/build-images.log" \
        cmake --build --preset release -j "$(nproc)" --target gostd gost_image_bench
      bench/images.sh build/release/runtime/gostd build/release/bench/gost_image_bench \
        "$GOST_PG_PORT" 2>"$logs/images.log" \
        || { tail -n 20 "$logs/images.log" >&2; echo "bench/run.sh: images failed" >&2; exit 1; }
      ;;
    images_queue)
      # The image functions' Kafka queue against the PostgreSQL one, same work (bench/images_queue.sh).
      step "building gostd and the client" "$logs/build-images.log" \
        cmake --build --preset release -j "$(nproc)" --target gostd gost_image_bench
      bench/images_queue.sh build/release/runtime/gostd build/release/bench/gost_image_bench \
        "$GOST_PG_PORT" 2>"$logs/images_queue.log" \
        || { tail -n 20 "$logs/images_queue.log" >&2; echo "bench/run.sh: images_queue failed" >&2; exit 1; }
      ;;
    feed)
      # One seller's Avito feed of BENCH_FEED_OFFERS (100,000) ads fetched over HTTP, checked,
      # unified and sent to a real broker, applied by one gostd; xmllint --stream as the parse
      # floor (bench/feed.sh).
      step "building gostd and the driver" "$logs/build-feed.log" \
        cmake --build --preset release -j "$(nproc)" --target gostd gost_feed_bench
      bench/feed.sh build/release/runtime/gostd build/release/bench/gost_feed_bench \
        "$GOST_PG_PORT" 2>"$logs/feed.log" \
        || { tail -n 20 "$logs/feed.log" >&2; echo "bench/run.sh: feed failed" >&2; exit 1; }
      ;;
    timers)
      build/release/bench/gost_bench timers --dsn "$dsn" --offers "${BENCH_TIMERS:-1000000}" \
        --span "${BENCH_SPAN:-240}" --measure "${BENCH_MEASURE:-0}" ${BENCH_LEAD:+--lead "$BENCH_LEAD"} --shards "${BENCH_SHARDS:-4}" \
        2>"$logs/timers.log" \
        || { tail -n 20 "$logs/timers.log" >&2; echo "bench/run.sh: timers failed" >&2; exit 1; }
      ;;
    *) echo "bench/run.sh: unknown benchmark $name (known: stage_noop stage_offer resident timers failover api_updates api_cluster outbox_kafka tasks console_cost images images_queue actions actions_idle idle feed evolve)" >&2; exit 2 ;;
  esac
done
