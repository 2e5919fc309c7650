#!/usr/bin/env bash
# A PostgreSQL primary with a synchronous standby and automatic failover, for gost's tests and
# for trying a failover by hand (docs/operations.md "A primary fails over", ADR 0023 §6):
# pg_auto_failover (Debian pg-auto-failover-cli, postgresql-15-auto-failover) with a monitor and
# two nodes, `a` and `b`, in private data directories on loopback ports. The standby is in the
# replication quorum, so the primary's synchronous_standby_names is 'ANY 1 (standby)': a commit
# is acknowledged only once the standby has it. (The formation's number_sync_standbys stays 0:
# pg_auto_failover refuses 1 with a single standby — "At least 2 standby nodes are required";
# with 0 it still replicates synchronously to the one quorum standby, and only when that
# standby is gone does the primary go on alone, in wait_primary, with no failover candidate.)
#   scripts/pg-ha.sh start     create on first use (monitor, a, b), start the nodes not running
#                              (a node killed rejoins as a standby), wait until one node is
#                              primary and the other its synchronous standby; the role and
#                              database gost exist
#   scripts/pg-ha.sh stop      stop the nodes and the monitor
#   scripts/pg-ha.sh status    exit 0 when a primary with its synchronous standby is serving
#   scripts/pg-ha.sh state     the monitor's view (pg_autoctl show state, settings)
#   scripts/pg-ha.sh dsn       the multi-host DSN gostd takes as pg.dsn
#   scripts/pg-ha.sh kill-primary
#                              kill -9 the primary's node (its pg_autoctl keeper and postmaster:
#                              a crash of that machine); prints the node's name
#   scripts/pg-ha.sh destroy   stop and delete the data directories
# The monitor declares a node failed sooner than pg_auto_failover's defaults (2 s instead of
# 20 s unhealthy, 2 s instead of 30 s demote timeout), so a test's failover takes seconds;
# docs/operations.md gives the defaults a production formation keeps.
# Environment: GOST_PG_HA_DIR (default var/pgha), GOST_PG_HA_PORTS (the monitor's, a's and b's
# ports; default 54349,54350,54351), GOST_PG_DB (gost).
set -euo pipefail

ha_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# pg.sh's functions (run as the server's user, die, probe, port_taken), its data directory
# being this set's parent directory (remapped under /var/tmp when root's `postgres` cannot
# reach it).
GOST_PG_DIR=${GOST_PG_HA_DIR:-$ha_root/var/pgha} source "$ha_root/scripts/pg.sh"

IFS=, read -r monitor_port a_port b_port <<<"${GOST_PG_HA_PORTS:-54349,54350,54351}"
[[ -n ${b_port:-} ]] || die "GOST_PG_HA_PORTS needs three ports: the monitor's, a's and b's"
command -v pg_autoctl >/dev/null \
  || die "pg_autoctl not found; run scripts/install-deps.sh (pg-auto-failover-cli, postgresql-15-auto-failover)"
monitor_uri="postgres://autoctl_node@127.0.0.1:$monitor_port/pg_auto_failover?sslmode=disable"

node_port() {
  case $1 in monitor) echo "$monitor_port" ;; a) echo "$a_port" ;; b) echo "$b_port" ;; esac
}

# pg_autoctl as the server's user, its configuration and state files in the set's directory.
autoctl() {
  run env XDG_CONFIG_HOME="$dir/config" XDG_DATA_HOME="$dir/share" XDG_RUNTIME_DIR="$dir/run" \
    PG_CONFIG="$bindir/pg_config" pg_autoctl "$@"
}

sql() { # sql PORT DB QUERY: one value, as the superuser pg_autoctl's initdb made
  "$bindir/psql" -X -w -h 127.0.0.1 -p "$1" -U postgres -d "$2" -tAc "$3"
}

running() { autoctl status --pgdata "$dir/$1" >/dev/null 2>&1; }

# Starts a node's keeper in a session of its own (kill-primary kills the session), its output
# appended to $dir/NAME.log: `pg_autoctl create ... --run` the first time, `run` afterwards.
launch() {
  local name=$1
  shift
  setsid "${as_owner[@]}" env XDG_CONFIG_HOME="$dir/config" XDG_DATA_HOME="$dir/share" \
    XDG_RUNTIME_DIR="$dir/run" PG_CONFIG="$bindir/pg_config" pg_autoctl "$@" \
    >>"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.session"
}

start_node() {
  local name=$1 port
  port=$(node_port "$name")
  running "$name" && return 0
  if [[ ! -f $dir/$name/PG_VERSION ]]; then
    port_taken \
      && die "port $port (node $name) is taken; set GOST_PG_HA_PORTS to free ports, or stop what listens there"
    local common=(--pgdata "$dir/$name" --pgport "$port" --hostname 127.0.0.1 --listen 127.0.0.1
                  --auth trust --no-ssl --pgctl "$bindir/pg_ctl")
    if [[ $name == monitor ]]; then
      launch "$name" create monitor "${common[@]}" --run
    else
      launch "$name" create postgres "${common[@]}" --monitor "$monitor_uri" --dbname "$db" \
        --name "$name" --run
    fi
  else
    launch "$name" run --pgdata "$dir/$name"
  fi
}

# The monitor's view: "primary secondary" once a node is primary and the other its standby.
roles() {
  sql "$monitor_port" pg_auto_failover "SELECT string_agg(goalstate::text, ' ' ORDER BY goalstate::text)
    FROM pgautofailover.node WHERE reportedstate = goalstate" 2>/dev/null || true
}

primary_name() {
  sql "$monitor_port" pg_auto_failover "SELECT nodename FROM pgautofailover.node
    WHERE goalstate IN ('primary', 'wait_primary', 'single') AND reportedstate = goalstate"
}

healthy() {
  [[ $(roles) == "primary secondary" ]] || return 1
  local p
  p=$(node_port "$(primary_name)")
  [[ -n $(sql "$p" postgres "SHOW synchronous_standby_names" 2>/dev/null) ]]
}

# wait_for WHAT SECONDS CMD...: until CMD succeeds; dies naming WHAT and the logs otherwise.
wait_for() {
  local what=$1 seconds=$2
  shift 2
  for _ in $(seq 1 $((seconds * 2))); do
    "$@" && return 0
    sleep 0.5
  done
  die "$what did not happen within ${seconds}s (logs: $dir/{monitor,a,b}.log; scripts/pg-ha.sh state)"
}

monitor_ready() { sql "$monitor_port" pg_auto_failover "SELECT 1" >/dev/null 2>&1; }

# While a standby is being made, pg_basebackup waits for a spread checkpoint (minutes); a
# CHECKPOINT on the primary ends the wait.
standby_ready() {
  healthy && return 0
  local p
  p=$(primary_name 2>/dev/null) && [[ -n $p ]] \
    && sql "$(node_port "$p")" postgres "CHECKPOINT" >/dev/null 2>&1
  return 1
}

start() {
  mkdir -p "$dir/run"
  [[ ${#as_owner[@]} -gt 0 ]] && chown postgres: "$dir" "$dir/run" 2>/dev/null
  start_node monitor
  wait_for "the monitor accepting connections" 120 monitor_ready
  local kv
  for kv in health_check_period=1000 health_check_retry_delay=500 health_check_timeout=1000 \
            health_check_max_retries=1 node_considered_unhealthy_timeout=2000 \
            primary_demote_timeout=2000; do
    sql "$monitor_port" pg_auto_failover \
      "ALTER SYSTEM SET pgautofailover.${kv%=*} = ${kv#*=}" >/dev/null
  done
  sql "$monitor_port" pg_auto_failover "SELECT pg_reload_conf()" >/dev/null
  # The first node is made alone (it becomes the primary), then the second (its standby).
  start_node a
  [[ -f $dir/b/PG_VERSION ]] || wait_for "node a becoming the primary" 120 \
    eval '[[ $(roles) == single ]]'
  start_node b
  wait_for "a primary with its synchronous standby" 180 standby_ready
  local p
  p=$(node_port "$(primary_name)")
  sql "$p" postgres "SELECT 1 FROM pg_roles WHERE rolname = '$user'" | grep -q 1 \
    || sql "$p" postgres "CREATE ROLE $user SUPERUSER LOGIN" >/dev/null
}

stop() {
  local n
  for n in b a monitor; do
    running "$n" && autoctl stop --pgdata "$dir/$n" >/dev/null 2>&1 || true
  done
  for n in b a monitor; do
    wait_for "node $n stopping" 60 eval "! running $n"
  done
}

kill_primary() {
  local name pid
  name=$(primary_name)
  [[ -n $name ]] || die "no primary to kill (scripts/pg-ha.sh state)"
  pid=$(head -n 1 "$dir/$name/postmaster.pid")
  kill -9 -- "-$(cat "$dir/$name.session")" 2>/dev/null || true
  kill -9 "$pid" 2>/dev/null || true
  echo "$name"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) monitor_ready && healthy ;;
  state) autoctl show state --pgdata "$dir/monitor"; autoctl show settings --pgdata "$dir/monitor" ;;
  dsn) echo "host=127.0.0.1,127.0.0.1 port=$a_port,$b_port user=$user dbname=$db target_session_attrs=read-write" ;;
  kill-primary) kill_primary ;;
  destroy) stop; rm -rf "$dir" ;;
  *) die "usage: pg-ha.sh start|stop|status|state|dsn|kill-primary|destroy" ;;
esac
