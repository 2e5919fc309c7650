#!/usr/bin/env bash
# Peer benchmark: graphile-worker processing JOBS jobs of one of its scripts (see README.md
# beside this file): noop.js (default; each job upserts a state row, the same write a gost no-op
# stage does) or tasks.js (each job writes a task's row and a result row, as gost's tasks
# benchmark does; it takes --tasks N --groups G).
#   bench/peers/graphile-worker/run.sh DSN JOBS [SCRIPT [ARGS...]]
# DSN is a libpq keyword DSN (or postgres:// URL); the benchmark drops and recreates the
# graphile_worker schema and the peer_states table in that database, so give it its own.
# Installs the pinned npm dependencies when needed (quietly; the log is shown on failure),
# then prints the script's one JSON line on stdout; progress goes to stderr.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 DSN JOBS [noop.js|tasks.js [ARGS...]]" >&2
  exit 2
fi
dsn=$1 jobs=$2 script=${3:-noop.js}
shift $(($# < 3 ? $# : 3))
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

# npm ci only when node_modules is missing or was installed from another lock file.
stamp=node_modules/.gost-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  log=$(mktemp)
  if ! npm ci --no-audit --no-fund --silent >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "$0: npm ci failed" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$want" >"$stamp"
fi

exec node "$script" --dsn "$dsn" --jobs "$jobs" "$@"
