#!/usr/bin/env bash
# api_updates: one gostd on a fresh database (gost_api), loaded by gost_api_bench: many
# concurrent clients sending UpdateOffer (a field-masked title change), each acknowledged after
# its commit. Prints the client's JSON line.
#   bench/api_updates.sh GOSTD API_BENCH PG_PORT
# Options through the environment: BENCH_API_OFFERS (20000), BENCH_API_CLIENTS (1024),
# BENCH_API_SECONDS (20), BENCH_API_NODE_ARGS (extra gostd flags; default --shard.count=8:
# fewer, larger group commits on 2 cores).
set -euo pipefail

gostd=$1 client=$2 port=$3
db=gost_api
admin="host=127.0.0.1 port=$port user=gost dbname=postgres"
dsn="host=127.0.0.1 port=$port user=gost dbname=$db"
work=$(mktemp -d)
node=
cleanup() {
  [[ -n $node ]] && kill -9 "$node" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

psql "$admin" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
"$gostd" --pg.dsn="$dsn" --grpc.listen=127.0.0.1:0 --grpc.port_file="$work/ports" \
  --caf.listen=127.0.0.1:0 --http.listen=127.0.0.1:0 --outbox.relay=false \
  --pg.pool_size=4 --log.level=warn ${BENCH_API_NODE_ARGS:---shard.count=8} >"$work/gostd.log" 2>&1 &
node=$!
for _ in $(seq 300); do [[ -s $work/ports ]] && break; sleep 0.1; done
[[ -s $work/ports ]] || { cat "$work/gostd.log" >&2; echo "api_updates: gostd did not start" >&2; exit 1; }
grpc_port=$(head -1 "$work/ports")
"$client" --addr "127.0.0.1:$grpc_port" --offers "${BENCH_API_OFFERS:-20000}" \
  --concurrency "${BENCH_API_CLIENTS:-1024}" --seconds "${BENCH_API_SECONDS:-20}"
kill -TERM "$node"
wait "$node" || true
node=
