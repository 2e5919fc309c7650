#!/usr/bin/env bash
# Failover benchmark: three gostd nodes on one PostgreSQL.
# - killed process: kill -9 one and time until every shard is owned by a live node again;
#   restart it, let the shards spread, repeat. The dead process's connections close, its
#   liveness lock goes with them, the others notice within a poll (~200 ms): `value`.
# - partition: SIGSTOP one (its connections stay open, as when it is cut off) and time the
#   same; SIGCONT, let the shards spread, repeat. That path waits for the lease timeout (2 s
#   here) plus a heartbeat: `partition_ms`.
# Prints one JSON line with the medians.
#   bench/failover.sh GOSTD PG_PORT RUNS
# Uses database gost_failover (dropped and created). Node settings: 64 shards, heartbeat
# 250 ms, lease timeout 2 s.
set -euo pipefail

gostd=$1 port=$2 runs=${3:-5}
db=gost_failover
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
q() { psql "$dsn" -qAtc "$1"; }

start_node() { # index
  "$gostd" --pg.dsn="$dsn" --node.id="f$1" --grpc.listen=127.0.0.1:0 --caf.listen=127.0.0.1:0 \
    --http.listen=127.0.0.1:0 --shard.count=64 --cluster.heartbeat=250ms \
    --cluster.lease_timeout=2s --cluster.max_moves=16 --stages.expire.enabled=false \
    >"$work/f$1.log" 2>&1 &
  pids[$1]=$!
  disown # killing it is the point: no job report
}

# Live owners holding all 64 shards, `$1` of them.
spread() {
  [[ $(q "SELECT count(DISTINCT owner) || ':' || count(*) FROM shard_leases
           WHERE owner IS NOT NULL AND heartbeat_at > now() - interval '2 s'") == "$1:64" ]]
}

wait_until() { # seconds command...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || { echo "failover: timed out waiting for: $*" >&2; tail -5 "$work"/*.log >&2; exit 1; }
    sleep 0.05
  done
}

for i in 0 1 2; do start_node "$i"; done
wait_until 60 spread 3
times=()
for ((r = 0; r < runs; ++r)); do
  victim=$((r % 3))
  kill -9 "${pids[$victim]}"
  t0=$(date +%s%N)
  wait_until 60 spread 2
  t1=$(date +%s%N)
  times+=($(((t1 - t0) / 1000000)))
  echo "failover: run $((r + 1))/$runs: node f$victim killed, shards owned again after ${times[-1]} ms" >&2
  start_node "$victim"
  wait_until 60 spread 3
done
paused=()
for ((r = 0; r < runs; ++r)); do
  victim=$((r % 3))
  kill -STOP "${pids[$victim]}"
  t0=$(date +%s%N)
  wait_until 60 spread 2
  t1=$(date +%s%N)
  paused+=($(((t1 - t0) / 1000000)))
  echo "failover: partition run $((r + 1))/$runs: node f$victim paused, shards owned again after ${paused[-1]} ms" >&2
  kill -CONT "${pids[$victim]}"
  wait_until 60 spread 3
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '{"bench": "failover", "value": %s, "unit": "ms until a killed node'"'"'s shards are owned again (median of %d)", "runs_ms": [%s], "partition_ms": %s, "partition_runs_ms": [%s], "lease_timeout_ms": 2000}\n' \
  "$(median "${times[@]}")" "$runs" "$(IFS=,; echo "${times[*]}")" \
  "$(median "${paused[@]}")" "$(IFS=,; echo "${paused[*]}")"
