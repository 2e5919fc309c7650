#!/usr/bin/env bash
# A private PostgreSQL server for gost: Debian's server binaries, initdb into a data directory
# the project owns, loopback only, a fixed non-default port, durable settings (fsync and
# synchronous_commit on). Used by gostd's embedded mode, the demo and the test tiers.
#   scripts/pg.sh start    initdb on first use, start, wait until it accepts connections,
#                          make sure the database exists
#   scripts/pg.sh stop     fast shutdown
#   scripts/pg.sh stop immediate
#                          immediate shutdown: the server's processes quit at once, clients'
#                          connections break, recovery runs at the next start (a crash, for
#                          tests of outages)
#   scripts/pg.sh status   exit 0 when it accepts connections
#   scripts/pg.sh dsn      print the connection string
#   scripts/pg.sh destroy  stop and delete the data directory
# `start` and `status` never use a server that merely answers on the port: it must be the one
# whose data directory is this script's (SHOW data_directory). Another server there (another
# checkout's, a system PostgreSQL) is refused with one line saying what to do.
# Environment: GOST_PG_DIR (default var/pg), GOST_PG_PORT (54329), GOST_PG_DB (gost).
# Sourced (scripts/pg-ha.sh), it only defines its variables and functions.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${GOST_PG_DIR:-$root/var/pg}
port=${GOST_PG_PORT:-54329}
db=${GOST_PG_DB:-gost}
user=gost

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

bindir=""
for d in /usr/lib/postgresql/*/bin; do [[ -x $d/pg_ctl ]] && bindir=$d; done
[[ -n $bindir ]] || die "PostgreSQL server binaries not found; run scripts/install-deps.sh"

# The server refuses to run as root: as root, run it as the `postgres` system user. That user
# must reach the data directory; when the checkout lives somewhere it cannot (e.g. under
# /root), the data goes to /var/tmp instead, keyed by the requested path.
as_owner=()
if [[ $(id -u) -eq 0 ]]; then
  id postgres >/dev/null 2>&1 || die "user 'postgres' missing; run scripts/install-deps.sh"
  as_owner=(runuser -u postgres --)
  mkdir -p "$(dirname "$dir")"
  if ! runuser -u postgres -- test -x "$(dirname "$dir")"; then
    dir=/var/tmp/gost-pg/$(echo -n "$dir" | sha1sum | cut -c1-12)
  fi
fi
logfile=$dir.log

run() { "${as_owner[@]}" "$@"; }

# What answers on the port: 0 a PostgreSQL server accepting connections (any server: pg_isready
# does not log in), 1 one rejecting them (starting up, shutting down), 2 none.
probe() {
  local rc=0
  "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres -U "$user" -t 5 >/dev/null 2>&1 \
    || rc=$?
  return "$rc"
}

# Anything at all listening on the port (a TCP connect succeeds)?
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

# The server accepting connections on the port must be this script's: its data directory,
# compared after resolving both paths, is $dir (the effective one, /var/tmp/... as root when
# remapped). Anything else stops the script with one line. A foreign server usually does not
# let user gost in without a password, or not read data_directory: that is "not ours" too.
ensure_ours() {
  local theirs err
  if ! theirs=$(PGCONNECT_TIMEOUT=5 "$bindir/psql" -X -w -h 127.0.0.1 -p "$port" -U "$user" \
                  -d postgres -tAc "SHOW data_directory" 2>&1) || [[ $theirs != /* ]]; then
    err=$(echo "$theirs" | tr -s ' \n' ' ' | sed 's/^psql: error: //; s/ $//')
    die "port $port is taken by another PostgreSQL server, not this script's ($dir): user $user cannot log in there or read its data directory ($err); set GOST_PG_PORT to a free port, or stop that server"
  fi
  if [[ $(realpath -m "$theirs") != "$(realpath -m "$dir")" ]]; then
    die "port $port is taken by another PostgreSQL server (data directory $theirs), not this script's ($dir); set GOST_PG_PORT to a free port, or stop that server"
  fi
}

start() {
  # Who answers on the port, first: a refusal must not leave a new data directory behind.
  local state=0
  probe || state=$?
  # A server starting up or shutting down there: wait (bounded) until it settles.
  for _ in $(seq 1 120); do
    [[ $state -eq 1 ]] || break
    sleep 1
    state=0
    probe || state=$?
  done
  case $state in
    0) ensure_ours ;;   # already running (the usual case): fine only when it is ours
    1) die "port $port: a PostgreSQL server there has rejected connections for 2 minutes; set GOST_PG_PORT to a free port, or check that server" ;;
    *) ! port_taken \
         || die "port $port is taken by something that is not a PostgreSQL server; set GOST_PG_PORT to a free port, or stop it" ;;
  esac
  if [[ ! -f $dir/PG_VERSION ]]; then
    mkdir -p "$dir"
    [[ ${#as_owner[@]} -gt 0 ]] && chown postgres: "$dir" "$(dirname "$dir")" 2>/dev/null || true
    run "$bindir/initdb" -D "$dir" -U "$user" --auth=trust -E UTF8 --locale=C.UTF-8 \
      >"$dir.initdb.log" 2>&1 || { cat "$dir.initdb.log" >&2; die "initdb failed"; }
    cat >>"$dir/postgresql.conf" <<CONF
# gost: private server, loopback only; durability settings stay at their safe defaults.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = ''
max_connections = 300
shared_buffers = 512MB
max_wal_size = 4GB
checkpoint_timeout = 15min
log_min_messages = warning
CONF
  fi
  touch "$logfile"; [[ ${#as_owner[@]} -gt 0 ]] && chown postgres: "$logfile"
  if [[ $state -ne 0 ]]; then
    # Ours already running on another port (started with another GOST_PG_PORT): pg_ctl would
    # fail on its lock file, so say which port instead (line 4 of postmaster.pid).
    if [[ -f $dir/postmaster.pid ]] && run "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
      local other
      other=$(sed -n 4p "$dir/postmaster.pid")
      die "this script's server ($dir) is running on port $other, not $port; use GOST_PG_PORT=$other, or stop it with GOST_PG_PORT=$other scripts/pg.sh stop"
    fi
    # -t: generous, a first start on a loaded 2-core machine can be slow.
    run "$bindir/pg_ctl" -D "$dir" -l "$logfile" -w -t 120 -o "-p $port" start >/dev/null \
      || { tail -n 20 "$logfile" >&2; die "server did not start (log: $logfile)"; }
  fi
  if ! "$bindir/psql" -X -h 127.0.0.1 -p "$port" -U "$user" -d postgres -tAc \
       "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
    "$bindir/psql" -X -h 127.0.0.1 -p "$port" -U "$user" -d postgres -qc "CREATE DATABASE \"$db\"" \
      || die "cannot create database $db"
  fi
}

stop() {
  local mode=${1:-fast}
  [[ $mode == fast || $mode == immediate ]] || die "usage: pg.sh stop [fast|immediate]"
  [[ -f $dir/postmaster.pid ]] || return 0
  run "$bindir/pg_ctl" -D "$dir" -m "$mode" -w stop >/dev/null
}

[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-fast}" ;;
  status) probe || exit 1; ensure_ours ;;
  dsn) echo "postgresql://$user@127.0.0.1:$port/$db" ;;
  destroy) stop; rm -rf "$dir" "$dir.log" "$dir.initdb.log" ;;
  *) die "usage: pg.sh start|stop [immediate]|status|dsn|destroy" ;;
esac
