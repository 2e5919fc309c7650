#!/usr/bin/env bash
# A private Redis server for the image functions' Redis layer (images.redis.address) in tests
# and demos: Debian's redis-server on loopback, a port and directory of its own, nothing saved
# to disk (a cache: PostgreSQL holds the truth), started and stopped by its pid.
#   scripts/redis.sh start    start, wait until it answers PING
#   scripts/redis.sh stop     stop the server this script started (by its pid)
#   scripts/redis.sh kill     kill -9 it (tests of an outage)
#   scripts/redis.sh status   exit 0 when it answers
#   scripts/redis.sh address  print host:port
# Environment: GOST_REDIS_PORT (16379), GOST_REDIS_DIR (var/redis).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=${GOST_REDIS_PORT:-16379}
dir=${GOST_REDIS_DIR:-$root/var/redis}
pidfile=$dir/redis.pid

die() { echo "redis.sh: $*" >&2; exit 1; }

answers() { redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; }
running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

start() {
  command -v redis-server >/dev/null || die "redis-server not found; run scripts/install-deps.sh"
  if running; then return 0; fi
  if answers; then
    die "another Redis already answers on 127.0.0.1:$port (not started with GOST_REDIS_DIR=$dir); stop it or set GOST_REDIS_PORT"
  fi
  mkdir -p "$dir"
  rm -f "$pidfile"
  redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' --appendonly no \
    --protected-mode yes --daemonize yes --pidfile "$pidfile" --logfile "$dir/redis.log" \
    || die "redis-server did not start (log: $dir/redis.log)"
  for _ in $(seq 1 100); do
    answers && return 0
    sleep 0.05
  done
  die "redis-server on 127.0.0.1:$port did not answer within 5 s (log: $dir/redis.log)"
}

stop() {
  running || { rm -f "$pidfile"; return 0; }
  local pid; pid=$(cat "$pidfile")
  kill "${1:--TERM}" "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  kill) stop -KILL ;;
  status) answers ;;
  address) echo "127.0.0.1:$port" ;;
  *) die "usage: scripts/redis.sh start|stop|kill|status|address" ;;
esac
