#!/usr/bin/env bash
# What a node costs when it has nothing to do (issue 26), in two modes:
#   bench/idle.sh GOSTD PG_PORT idle          one gostd with gostd's default 64 shards and every
#       part enabled as shipped, against the same PostgreSQL with no node at all (the peer):
#       the database's transactions per second and the CPU of gostd and PostgreSQL. Goal: at
#       most 20 transactions/s, gostd's CPU within noise of a stopped node.
#   bench/idle.sh GOSTD PG_PORT actions_idle  the same node against itself with
#       scheduled.enabled=false: what the scheduled-actions workers cost at idle.
# Each measurement: a fresh database (gost_idle); after the shards are taken and a settling
# pause (BENCH_IDLE_SETTLE, 45 s: an idle shard's polls back off from queue.poll to
# queue.poll_idle in about 32 s), BENCH_IDLE_SECONDS (30) are measured: pg_stat_database.xact_commit + xact_rollback of
# that database (every statement of an idle poll is one), the CPU of gostd and of PostgreSQL (%
# of one core, proc_cpu.py) and gostd's threads.
set -euo pipefail

gostd=$1 port=$2 mode=${3:-idle}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
db=gost_idle
admin="host=127.0.0.1 port=$port user=gost dbname=postgres"
dsn="host=127.0.0.1 port=$port user=gost dbname=$db"
seconds=${BENCH_IDLE_SECONDS:-30}
settle=${BENCH_IDLE_SETTLE:-45}
work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Measures the database for BENCH_IDLE_SECONDS with no node ("none") or with one node started
# with "$@"; prints "XACT_PER_S GOST_PCT PG_PCT THREADS" (gostd's figures 0 without a node).
measure() {
  psql "$admin" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  if [[ ${1:-} != none ]]; then
    rm -f "$work/ports"
    "$gostd" --pg.dsn="$dsn" --node.id=idle --grpc.listen=127.0.0.1:0 --grpc.port_file="$work/ports" \
      --caf.listen=127.0.0.1:0 --http.listen=127.0.0.1:0 --log.level=warn "$@" >"$work/gostd.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do [[ -s $work/ports ]] && break; sleep 0.1; done
    [[ -s $work/ports ]] || { cat "$work/gostd.log" >&2; echo "idle: gostd did not start" >&2; exit 1; }
    local owned=0
    for _ in $(seq 300); do
      owned=$(psql "$dsn" -qAtc "SELECT count(*) FROM shard_leases WHERE owner = 'idle'")
      [[ $owned == 64 ]] && break
      sleep 0.1
    done
    [[ $owned == 64 ]] || { cat "$work/gostd.log" >&2; echo "idle: gostd took $owned of 64 shards" >&2; exit 1; }
  fi
  sleep "$settle"
  local postmaster xact0 xact1 s0 s1 threads=0
  postmaster=$(python3 "$here/proc_cpu.py" postmaster "$dsn")
  xact() { psql "$admin" -qAtc "SELECT pg_stat_force_next_flush(); SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$db'" | tail -1; }
  xact0=$(xact)
  s0=$(python3 "$here/proc_cpu.py" sample "$postmaster" ${pid:-})
  sleep "$seconds"
  s1=$(python3 "$here/proc_cpu.py" sample "$postmaster" ${pid:-})
  sleep 1 # the backends' statistics reach pg_stat_database about once a second
  xact1=$(xact)
  if [[ -n $pid ]]; then
    threads=$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status")
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
  fi
  awk -v x0="$xact0" -v x1="$xact1" -v s0="$s0" -v s1="$s1" -v t="$seconds" -v th="$threads" 'BEGIN {
    split(s0, a, " "); split(s1, b, " ")
    printf "%.1f %.2f %.2f %d\n", (x1 - x0) / t, (b[1] - a[1]) * 100 / t, (b[2] - a[2]) * 100 / t, th }'
}

case $mode in
  idle)
    read -r on_x on_g on_p on_t <<<"$(measure)"
    read -r off_x off_g off_p _ <<<"$(measure none)"
    echo "idle: node: $on_x tx/s, gostd ${on_g}% CPU, PostgreSQL ${on_p}%, $on_t threads;" \
      "no node: $off_x tx/s, PostgreSQL ${off_p}%" >&2
    printf '{"bench": "idle", "value": %s, "unit": "transactions/s, idle node", "gostd_cpu_pct": %s, "pg_cpu_pct": %s, "threads": %s, "peer": "the same PostgreSQL with no node", "peer_value": %s, "peer_pg_cpu_pct": %s}\n' \
      "$on_x" "$on_g" "$on_p" "$on_t" "$off_x" "$off_p"
    ;;
  actions_idle)
    read -r on_x on_g on_p on_t <<<"$(measure --scheduled.enabled=true)"
    read -r off_x off_g off_p off_t <<<"$(measure --scheduled.enabled=false)"
    echo "actions_idle: workers on: $on_x tx/s, gostd ${on_g}% CPU, PostgreSQL ${on_p}%, $on_t threads;" \
      "off: $off_x tx/s, ${off_g}%, ${off_p}%, $off_t threads" >&2
    printf '{"bench": "actions_idle", "value": %s, "unit": "database transactions/s of an idle node, 64 shards", "gost_cpu_pct": %s, "pg_cpu_pct": %s, "threads": %s, "peer": "the same node with scheduled.enabled=false", "peer_value": %s, "peer_gost_cpu_pct": %s, "peer_pg_cpu_pct": %s, "peer_threads": %s}\n' \
      "$on_x" "$on_g" "$on_p" "$on_t" "$off_x" "$off_g" "$off_p" "$off_t"
    ;;
  *) echo "usage: bench/idle.sh GOSTD PG_PORT idle|actions_idle" >&2; exit 2 ;;
esac
