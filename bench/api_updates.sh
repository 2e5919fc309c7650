#!/usr/bin/env bash
# api_updates: one gostd on a fresh database (gost_api), loaded by gost_api_bench: many
# concurrent clients sending UpdateOffer (a field-masked title change), each acknowledged after
# its commit. Prints the client's JSON line, with the CPU time per acknowledged update of the
# gostd processes, of PostgreSQL and of the client over the measured seconds (proc_cpu.hpp).
#   bench/api_updates.sh GOSTD API_BENCH PG_PORT [NODES]
# NODES (1): that many gostd processes share the database as a cluster (distinct node ids);
# the client spreads its connections over all of them.
# Options through the environment: BENCH_API_OFFERS (20000), BENCH_API_CLIENTS (1024),
# BENCH_API_SECONDS (20), BENCH_API_NODE_ARGS (extra gostd flags; default --shard.count=8:
# fewer, larger group commits on 2 cores), BENCH_API_CONSOLE (a gostctl binary: it runs
# `gostctl top --interval 1` against the first node for the whole run, as an operator would;
# bench/run.sh console_cost), BENCH_API_GROUPS (1; 2: the shards split into two shard groups,
# the second on another database of the same server, ADR 0023; bench/run.sh api_groups).
set -euo pipefail

gostd=$1 client=$2 port=$3 nodes=${4:-1}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
db=gost_api
admin="host=127.0.0.1 port=$port user=gost dbname=postgres"
dsn="host=127.0.0.1 port=$port user=gost dbname=$db"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

psql "$admin" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
node_args=(${BENCH_API_NODE_ARGS:---shard.count=8})
if [[ -n ${BENCH_API_GROUPS:-} ]]; then
  # The same parts on in both runs of api_groups: those serving the catalog only are off.
  node_args+=(--scheduled.enabled=false --images.enabled=false --tasks.enabled=false)
fi
if [[ ${BENCH_API_GROUPS:-1} == 2 ]]; then
  # A first start migrates the catalog; then the upper half of the shards goes to group 1.
  psql "$admin" -qc "DROP DATABASE IF EXISTS ${db}_g1" -c "CREATE DATABASE ${db}_g1" >/dev/null
  "$gostd" --pg.dsn="$dsn" --node.id=api-init --grpc.listen=127.0.0.1:0 \
    --grpc.port_file="$work/ports-init" --caf.listen=127.0.0.1:0 --http.listen=127.0.0.1:0 \
    --outbox.relay=false --log.level=warn "${node_args[@]}" >"$work/gostd-init.log" 2>&1 &
  init=$!
  for _ in $(seq 300); do [[ -s $work/ports-init ]] && break; sleep 0.1; done
  [[ -s $work/ports-init ]] || { cat "$work/gostd-init.log" >&2; echo "api_updates: gostd did not start" >&2; exit 1; }
  kill -TERM "$init"
  wait "$init" || true
  count=$(psql "$dsn" -qAtc "SELECT shard_count FROM installation")
  psql "$dsn" -qc "INSERT INTO shard_groups (id, name, dsn) VALUES (1, 'g1', 'host=127.0.0.1 port=$port user=gost dbname=${db}_g1')" \
    -c "INSERT INTO shard_ranges (first_shard, last_shard, group_id) VALUES (0, $((count / 2 - 1)), 0), ($((count / 2)), $((count - 1)), 1)" >/dev/null
fi
addrs=
for ((i = 0; i < nodes; ++i)); do
  "$gostd" --pg.dsn="$dsn" --node.id="api$i" --grpc.listen=127.0.0.1:0 \
    --grpc.port_file="$work/ports$i" --caf.listen=127.0.0.1:0 --http.listen=127.0.0.1:0 \
    --outbox.relay=false --pg.pool_size=4 --log.level=warn "${node_args[@]}" \
    >"$work/gostd$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do [[ -s $work/ports$i ]] && break; sleep 0.1; done
  [[ -s $work/ports$i ]] || { cat "$work/gostd$i.log" >&2; echo "api_updates: gostd did not start" >&2; exit 1; }
  addrs+="${addrs:+,}127.0.0.1:$(head -1 "$work/ports$i")"
done
if ((nodes > 1)); then # until the shards are spread over every node
  for _ in $(seq 300); do
    [[ $(psql "$dsn" -qAtc "SELECT count(*) || ':' || (max(n) - min(n) <= 1) FROM (SELECT count(*) n
         FROM shard_leases WHERE owner IS NOT NULL GROUP BY owner) o") == "$nodes:true" ]] && break
    sleep 0.1
  done
fi
if [[ -n ${BENCH_API_CONSOLE:-} ]]; then # an operator watching the node, one frame a second
  "$BENCH_API_CONSOLE" --addr "${addrs%%,*}" top --interval 1 >"$work/top.out" 2>"$work/top.log" &
  console=$!
  pids+=($console)
fi
postmaster=$(python3 "$here/proc_cpu.py" postmaster "$dsn")
"$client" --addr "$addrs" --offers "${BENCH_API_OFFERS:-20000}" \
  --concurrency "${BENCH_API_CLIENTS:-1024}" --seconds "${BENCH_API_SECONDS:-20}" \
  --gost-pids "$(IFS=,; echo "${pids[*]}")" --pg-postmaster "$postmaster" \
  | sed -E "s/\}\$/, \"nodes\": $nodes, \"groups\": ${BENCH_API_GROUPS:-1}}/"
if [[ -n ${console:-} ]]; then # it polled the whole run: still alive, and drew frames
  kill -0 "$console" 2>/dev/null || { cat "$work/top.log" >&2; echo "api_updates: gostctl top stopped" >&2; exit 1; }
  frames=$(grep -c 'shard(s), resident=' "$work/top.out" || true)
  echo "api_updates: gostctl top drew $frames frame(s)" >&2
  ((frames >= ${BENCH_API_SECONDS:-20})) || { echo "api_updates: gostctl top drew too few frames" >&2; exit 1; }
fi
for p in "${pids[@]}"; do kill -TERM "$p"; done
for p in "${pids[@]}"; do wait "$p" || true; done
pids=()
