#!/usr/bin/env bash
# images_queue: the image functions' two queues on the same work — Ratio and MainColor of
# distinct 1 MP JPEG URLs (bench/image_bench.cpp serves them) computed by a gostd with
# images.queue=kafka (a real broker) and by one with images.queue=postgres, one after the other,
# each on a database of its own, same pools. Prints gost_image_bench's JSON line.
#   bench/images_queue.sh GOSTD IMAGE_BENCH PG_PORT
# Starts its own broker (scripts/kafka.sh, port BENCH_KAFKA_PORT (19192), var/kafkabench) and
# stops it. Options: BENCH_IMAGES_RATIO (4000 images), BENCH_IMAGES_MAIN_COLOR (600).
set -euo pipefail

gostd=$1 client=$2 port=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
admin="host=127.0.0.1 port=$port user=gost dbname=postgres"
export GOST_KAFKA_PORT=${BENCH_KAFKA_PORT:-19192} GOST_KAFKA_DIR=$root/var/kafkabench
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  "$root/scripts/kafka.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"$root/scripts/kafka.sh" start >&2
cores=$(nproc)
prefix="gost.bench-$$-$(date +%s)."
# start NAME DB FLAGS...: a node on its own database; its pid in $node_pid, its port in $node_port.
start() {
  local name=$1 db=$2
  shift 2
  psql "$admin" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  "$gostd" --pg.dsn="host=127.0.0.1 port=$port user=gost dbname=$db" --node.id="$name" \
    --grpc.listen=127.0.0.1:0 --grpc.port_file="$work/$name.port" --caf.listen=127.0.0.1:0 \
    --http.listen=127.0.0.1:0 --outbox.relay=false --log.level=warn --scheduled.enabled=false \
    --stages.photos.enabled=false --images.allow_private_sources=true --images.poll=100ms \
    --images.blob_dir="$work/blobs-$name" --images.ratio_workers=16 \
    --images.preview_workers="$cores" --images.main_color_workers="$cores" "$@" \
    >"$work/$name.log" 2>&1 &
  node_pid=$!
  pids+=($node_pid)
  for _ in $(seq 300); do [[ -s $work/$name.port ]] && break; sleep 0.1; done
  [[ -s $work/$name.port ]] || { cat "$work/$name.log" >&2; echo "images_queue: $name did not start" >&2; exit 1; }
  node_port=$(head -1 "$work/$name.port")
}
start kafka gost_images_k --images.queue=kafka --kafka.brokers="127.0.0.1:$GOST_KAFKA_PORT" \
  --images.kafka.topic_prefix="$prefix" --images.kafka.group="${prefix}group"
kafka_pid=$node_pid kafka_port=$node_port
start pg gost_images_p --images.queue=postgres
pg_pid=$node_pid pg_port=$node_port
# The client warms both nodes up first (the Kafka topics are made on first use and the
# consumers join their groups: seconds, once), unmeasured.

"$client" --addr "127.0.0.1:$kafka_port" --peer-addr "127.0.0.1:$pg_port" \
  --ratio "${BENCH_IMAGES_RATIO:-4000}" --main-color "${BENCH_IMAGES_MAIN_COLOR:-600}" \
  --gost-pid "$kafka_pid" --peer-pid "$pg_pid"
