#!/usr/bin/env bash
# outbox_kafka: how fast a node publishes committed after-save events to a real Kafka broker.
# The outbox of a fresh database (gost_outbox) is filled with BENCH_OUTBOX_EVENTS events
# (gost_bench outbox_fill: batches of 100, ~420-byte events, 8 shards), then one gostd starts
# with the broker configured and relays them; the time runs from the first event leaving the
# outbox to the last (acknowledged by the broker, rows deleted). Prints one JSON line, with the
# CPU time per event of gostd and of PostgreSQL over that time (bench/proc_cpu.py; the broker's
# is in neither).
#   bench/outbox_kafka.sh GOSTD GOST_BENCH PG_PORT
# Starts its own broker (scripts/kafka.sh, port BENCH_KAFKA_PORT (19192), var/kafkabench) and
# stops it.
set -euo pipefail

gostd=$1 bench=$2 port=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
events=${BENCH_OUTBOX_EVENTS:-500000}
db=gost_outbox
admin="host=127.0.0.1 port=$port user=gost dbname=postgres"
dsn="host=127.0.0.1 port=$port user=gost dbname=$db"
export GOST_KAFKA_PORT=${BENCH_KAFKA_PORT:-19192} GOST_KAFKA_DIR=$root/var/kafkabench
work=$(mktemp -d)
node=
cleanup() {
  [[ -n $node ]] && kill -9 "$node" 2>/dev/null || true
  "$root/scripts/kafka.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"$root/scripts/kafka.sh" start >&2
psql "$admin" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
echo "outbox_kafka: filling the outbox with $events events..." >&2
"$bench" outbox_fill --dsn "$dsn" --offers "$events" --shards 8 >&2
left() { psql "$dsn" -qAtc "SELECT coalesce(sum(events), 0) FROM outbox_batches"; }
postmaster=$(python3 "$root/bench/proc_cpu.py" postmaster "$dsn")
cpu() { python3 "$root/bench/proc_cpu.py" sample "$postmaster" "$node"; }

"$gostd" --pg.dsn="$dsn" --shard.count=8 --grpc.listen=127.0.0.1:0 --caf.listen=127.0.0.1:0 \
  --http.listen=127.0.0.1:0 --kafka.brokers=127.0.0.1:$GOST_KAFKA_PORT \
  --kafka.topic="gost.bench-$$-$(date +%s)" --stages.expire.enabled=false --log.level=warn \
  >"$work/gostd.log" 2>&1 &
node=$!
t0= start_left=
deadline=$((SECONDS + 600))
while :; do
  n=$(left)
  now=$(date +%s%N)
  if [[ -z $t0 && $n -lt $events ]]; then t0=$now start_left=$n cpu0=$(cpu); fi
  [[ $n -eq 0 ]] && break
  ((SECONDS < deadline)) || { tail -5 "$work/gostd.log" >&2; echo "outbox_kafka: timed out with $n events left" >&2; exit 1; }
  if [[ -n $t0 ]]; then echo "outbox_kafka: $n events left" >&2; fi
  sleep 0.2
done
t1=$(date +%s%N)
cpu_fields=$(python3 "$root/bench/proc_cpu.py" fields "$cpu0" "$(cpu)" "$start_left")
kill -TERM "$node"; wait "$node" || true; node=
awk -v n="$start_left" -v ns=$((t1 - t0)) -v total="$events" -v cpu="$cpu_fields" 'BEGIN {
  printf "{\"bench\": \"outbox_kafka\", \"value\": %.0f, \"unit\": \"events/s published and acknowledged\", \"events\": %d, %s}\n", n / (ns / 1e9), total, cpu }'
