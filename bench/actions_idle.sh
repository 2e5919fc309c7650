#!/usr/bin/env bash
# actions_idle: what scheduled actions cost a node that has nothing to fire. One gostd on a fresh
# database (gost_idle), gostd's default 64 shards, no action at all; after the shards are taken
# and a settling pause, BENCH_IDLE_SECONDS (30) are measured: the database's transactions per
# second (pg_stat_database.xact_commit: every statement of an idle worker's look is one), the
# CPU of gostd and of PostgreSQL (% of one core, proc_cpu.py) and gostd's threads. The same node
# with scheduled.enabled=false is measured right after as the peer: the difference is what the
# scheduled-actions workers cost at idle.
#   bench/actions_idle.sh GOSTD PG_PORT
set -euo pipefail

gostd=$1 port=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
db=gost_idle
admin="host=127.0.0.1 port=$port user=gost dbname=postgres"
dsn="host=127.0.0.1 port=$port user=gost dbname=$db"
seconds=${BENCH_IDLE_SECONDS:-30}
work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Measures one node started with "$@"; prints "XACT_PER_S GOST_PCT PG_PCT THREADS".
measure() {
  psql "$admin" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  rm -f "$work/ports"
  "$gostd" --pg.dsn="$dsn" --node.id=idle --grpc.listen=127.0.0.1:0 --grpc.port_file="$work/ports" \
    --caf.listen=127.0.0.1:0 --http.listen=127.0.0.1:0 --log.level=warn "$@" >"$work/gostd.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do [[ -s $work/ports ]] && break; sleep 0.1; done
  [[ -s $work/ports ]] || { cat "$work/gostd.log" >&2; echo "actions_idle: gostd did not start" >&2; exit 1; }
  for _ in $(seq 300); do
    [[ $(psql "$dsn" -qAtc "SELECT count(*) FROM shard_leases WHERE owner = 'idle'") == 64 ]] && break
    sleep 0.1
  done
  sleep 5
  local postmaster xact0 xact1 s0 s1 threads
  postmaster=$(python3 "$here/proc_cpu.py" postmaster "$dsn")
  xact() { psql "$admin" -qAtc "SELECT pg_stat_force_next_flush(); SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$db'" | tail -1; }
  xact0=$(xact)
  s0=$(python3 "$here/proc_cpu.py" sample "$postmaster" "$pid")
  sleep "$seconds"
  s1=$(python3 "$here/proc_cpu.py" sample "$postmaster" "$pid")
  sleep 1 # the backends' statistics reach pg_stat_database about once a second
  xact1=$(xact)
  threads=$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status")
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
  awk -v x0="$xact0" -v x1="$xact1" -v s0="$s0" -v s1="$s1" -v t="$seconds" -v th="$threads" 'BEGIN {
    split(s0, a, " "); split(s1, b, " ")
    printf "%.1f %.2f %.2f %d\n", (x1 - x0) / t, (b[1] - a[1]) * 100 / t, (b[2] - a[2]) * 100 / t, th }'
}

read -r on_x on_g on_p on_t <<<"$(measure --scheduled.enabled=true)"
read -r off_x off_g off_p off_t <<<"$(measure --scheduled.enabled=false)"
echo "actions_idle: workers on: $on_x tx/s, gostd ${on_g}% CPU, PostgreSQL ${on_p}%, $on_t threads;" \
  "off: $off_x tx/s, ${off_g}%, ${off_p}%, $off_t threads" >&2
printf '{"bench": "actions_idle", "value": %s, "unit": "database transactions/s of an idle node, 64 shards", "gost_cpu_pct": %s, "pg_cpu_pct": %s, "threads": %s, "peer": "the same node with scheduled.enabled=false", "peer_value": %s, "peer_gost_cpu_pct": %s, "peer_pg_cpu_pct": %s, "peer_threads": %s}\n' \
  "$on_x" "$on_g" "$on_p" "$on_t" "$off_x" "$off_g" "$off_p" "$off_t"
