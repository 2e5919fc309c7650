#!/usr/bin/env bash
# The run command: installs what is missing, builds gostd and gostctl (preset `release`),
# starts a node with the embedded PostgreSQL, runs a demo workload through gRPC (creates
# active offers, reads them back), waits until the stages have run on them and prints a short
# summary. The stages: `expire` (made to act after 3 s instead of 180 days: every active
# offer becomes inactive 3 s after its creation), `audit` (runs once on every new offer and
# records in its state where it ran), the photo stages and `video.check` on a few offers with
# photos and videos, and `price.predict` (examples/price_predict, a stage in Python) on all.
#
# The photos and videos are served by a local HTTP server this script starts on 127.0.0.1
# (scripts/demo_media.py); the demo's node alone is allowed to fetch from loopback
# (`images.allow_private_sources`, `stages.video.allow_private` with `stages.video.allowed_hosts`
# 127.0.0.1), never the defaults. price.predict runs from a venv (its setup.sh, grpcio from
# PyPI) with a model train.py makes from the offers in the store (on a fresh database, from the
# demo's own priced offers); without PyPI the demo runs without it and says so.
#
# The node, the HTTP server and the Python stage are stopped at the end unless --keep is given.
# The embedded PostgreSQL server keeps running either way, so the next run starts fast:
# `scripts/pg.sh stop` stops it (with the same GOST_PG_* variables).
#
# Nothing collides with what else runs on the machine: the gRPC API takes 127.0.0.1:50051 when
# that is free and a free port otherwise, the node link and the admin HTTP endpoint take free
# ports, and the PostgreSQL server on GOST_PG_PORT must be this checkout's (scripts/pg.sh).
#   scripts/run.sh [--keep] [--count N]
# Environment: GOST_PG_DIR (default var/pg), GOST_PG_PORT (54329): the embedded PostgreSQL,
# as for scripts/pg.sh.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pg_dir=${GOST_PG_DIR:-$root/var/pg}
[[ $pg_dir == /* ]] || pg_dir=$PWD/$pg_dir   # relative to where run.sh was started
pg_port=${GOST_PG_PORT:-54329}
export GOST_PG_DIR=$pg_dir GOST_PG_PORT=$pg_port   # for scripts/pg.sh, here and in gostd
cd "$root"
keep=0
count=2000
usage() { echo "usage: scripts/run.sh [--keep] [--count N]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --keep) keep=1 ;;
    --count) [[ $# -ge 2 ]] || usage; count=$2; shift ;;
    *) usage ;;
  esac
  shift
done
[[ $count =~ ^[1-9][0-9]*$ ]] || usage
logs=$root/var/run-logs
mkdir -p "$logs"

source "$root/scripts/lib.sh"

die() { echo "run.sh: $*" >&2; exit 1; }

# Anything listening on 127.0.0.1:PORT (a TCP connect succeeds)?
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

bin=$root/build/release/runtime
pid_file=$root/var/gostd.pid     # the node of a `run.sh --keep`, while it runs
port_file=$root/var/gostd.port   # written by gostd: the gRPC port, then the admin HTTP port

# How to reach this run's PostgreSQL with scripts/pg.sh (the variables only when not default).
pg_cmd=scripts/pg.sh
if [[ $pg_dir != "$root/var/pg" || $pg_port != 54329 ]]; then
  pg_cmd="GOST_PG_DIR=$pg_dir GOST_PG_PORT=$pg_port scripts/pg.sh"
fi

# A node left running by `run.sh --keep` uses the same database: a second one would join it.
if [[ -s $pid_file ]]; then
  old=$(cat "$pid_file")
  # Still that gostd? (Its exe link reads "... (deleted)" when gostd was rebuilt since.)
  if [[ $(readlink "/proc/$old/exe" 2>/dev/null) == "$bin/gostd"* ]]; then
    die "the node of an earlier 'scripts/run.sh --keep' is still running (pid $old); stop it with: kill -TERM $old"
  fi
  rm -f "$pid_file"
fi

step "installing dependencies" "$logs/install.log" scripts/install-deps.sh
step "configuring" "$logs/configure.log" cmake --preset release
step "building" "$logs/build.log" cmake --build --preset release -j "$(nproc)" --target gostd gostctl
# Started here rather than by gostd, so that a refusal (another server on the port) is shown
# as pg.sh's own one line. gostd's own `pg.sh start` then finds it running.
step "starting PostgreSQL" "$logs/pg.log" scripts/pg.sh start
media_dir=$root/var/demo-media
step "making the demo's photos and videos" "$logs/media.log" \
  python3 scripts/demo_media.py media "$media_dir"

# price.predict's venv (PyPI) and model. Any failure here skips the stage, with the reason.
price_dir=$root/var/price_predict
price_venv=$price_dir/venv
price_model=$price_dir/demo-model.json
price_skipped=""
model_from=""
if ! examples/price_predict/setup.sh "$price_venv" >"$logs/price-setup.log" 2>&1; then
  price_skipped="its Python environment could not be made: $(tail -n 1 "$logs/price-setup.log" \
    | sed 's/ (log above: .*)$//') (log: $logs/price-setup.log)"
elif "$price_venv/bin/python" examples/price_predict/train.py --dsn "$(scripts/pg.sh dsn)" \
  --out "$price_model" >"$logs/price-train.log" 2>&1; then
  model_from="trained by train.py on the $(sed -n 's/.* samples=\([0-9]*\).*/\1/p' \
    "$logs/price-train.log") priced offers in the store"
else
  # A fresh database: no offers yet (not even the table). The model learns from the offers
  # this run is about to create instead.
  step "training price.predict on the demo's offers" "$logs/price-seed.log" \
    python3 scripts/demo_media.py seed-model "$price_model"
  model_from="trained on the demo's offers with a category (the store had none to learn from: $logs/price-train.log)"
fi

pid=""
media_pid=""
price_pid=""
# Stops the node (SIGTERM, then waits up to 60 s). Returns gostd's exit code.
stop_node() {
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  local rc=0
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    rc=124
  fi
  wait "$pid" 2>/dev/null || rc=$?
  pid=""
  return "$rc"
}
# start_server VAR PORT_FILE LOG CMD...: starts CMD in the background (its pid in VAR) and
# waits until it has written the port it serves on to PORT_FILE. 1 when it exited first.
start_server() {
  local var=$1 port_file=$2 log=$3 what="$4 $5"
  shift 3
  rm -f "$port_file"
  "$@" >"$log" 2>&1 &
  printf -v "$var" %s $!
  for _ in $(seq 1 300); do
    [[ -s $port_file ]] && return 0
    kill -0 "${!var}" 2>/dev/null || return 1
    sleep 0.1
  done
  die "$what did not serve within 30 s (log: $log)"
}
# Stops the HTTP server and the Python stage (after the node: it calls them until it stops).
stop_servers() {
  local p
  for p in $price_pid $media_pid; do
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  price_pid=""
  media_pid=""
}
trap 'stop_node || true; stop_servers' EXIT

start_server media_pid "$root/var/demo-media.port" "$logs/media-server.log" \
  python3 scripts/demo_media.py serve "$media_dir" "$root/var/demo-media.port" \
  || die "the demo's HTTP server exited (log: $logs/media-server.log)"
media_base=http://127.0.0.1:$(cat "$root/var/demo-media.port")
# The demo node may fetch from loopback: the images of any loopback address (the image
# functions have no allow-list), the videos of 127.0.0.1 only.
node_args=(--images.allow_private_sources=true
  --stages.video.enabled=true --stages.video.allow_private=true
  --stages.video.allowed_hosts=127.0.0.1)
if [[ -z $price_skipped ]]; then
  if start_server price_pid "$price_dir/port" "$logs/price-server.log" \
    "$price_venv/bin/python" examples/price_predict/server.py --model "$price_model" \
    --listen 127.0.0.1:0 --port-file "$price_dir/port"; then
    node_args+=("--stages.external=price.predict=127.0.0.1:$(cat "$price_dir/port");interests=category|address|attributes")
  else
    price_pid=""
    price_skipped="its server exited: $(tail -n 1 "$logs/price-server.log") (log: $logs/price-server.log)"
  fi
fi

# start_node GRPC_PORT: starts gostd and waits until it serves. Returns 1 when it exited.
start_node() {
  rm -f "$port_file"
  # Every listener on loopback; node link and admin HTTP on free ports (their defaults, given
  # here so that a GOST_* variable or config file cannot move them onto a taken port).
  # pg.dsn empty: the embedded server of GOST_PG_DIR / GOST_PG_PORT.
  "$bin/gostd" --node.id=demo \
    --grpc.listen="127.0.0.1:$1" --grpc.port_file="$port_file" \
    --caf.listen=127.0.0.1:0 --http.listen=127.0.0.1:0 \
    --pg.dsn= --pg.embedded_dir="$pg_dir" --pg.embedded_port="$pg_port" \
    --pg.embedded_script="$root/scripts/pg.sh" \
    --stages.expire.enabled=true --stages.expire.after=3s \
    --stages.audit.enabled=true --stages.audit.every=1h "${node_args[@]}" \
    >"$logs/gostd.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    [[ -s $port_file ]] && return 0   # written whole (renamed into place) once it serves
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      pid=""
      return 1
    fi
    sleep 0.1
  done
  die "gostd did not start within 60 s (log: $logs/gostd.log)"
}

# The gRPC API on 50051 when that is free. Checked first rather than left to the bind: gRPC
# binds with SO_REUSEPORT, so a node on 50051 would silently share the port with another one.
grpc_port=50051
port_taken 50051 && grpc_port=0
if ! start_node "$grpc_port"; then
  # Lost a race for 50051 (taken meanwhile): once more on a free port. Else a real failure.
  if [[ $grpc_port -eq 50051 ]] && port_taken 50051; then
    grpc_port=0
    start_node 0 || true
  fi
  if [[ -z $pid ]]; then
    tail -n 30 "$logs/gostd.log" >&2
    die "gostd exited during start (log: $logs/gostd.log)"
  fi
fi
addr=127.0.0.1:$(sed -n 1p "$port_file")
http_addr=127.0.0.1:$(sed -n 2p "$port_file")
ctl=("$bin/gostctl" --addr "$addr")

# The database must be this node's alone: another live node on it would share the shards.
nodes=$("${ctl[@]}" nodes) || die "gostctl nodes failed (log: $logs/gostd.log)"
others=$(awk 'NR > 1 && $2 == "alive" && $1 != "demo" { printf " %s", $1 }' <<<"$nodes")
[[ -z $others ]] \
  || die "another node is running on the demo's database ($pg_dir):$others; stop it, or set GOST_PG_DIR and GOST_PG_PORT to another database"
caf_addr=$(awk '$1 == "demo" { print $5 }' <<<"$nodes")

note=""
[[ $grpc_port -eq 0 ]] && note=" (50051 is taken, so a free port)"
echo "gostd serving gRPC on $addr$note, admin HTTP on http://$http_addr/, node link on $caf_addr"
echo "  PostgreSQL $(scripts/pg.sh dsn) ($pg_dir); log: $logs/gostd.log"

# The workload: active offers (so that `expire` acts on them), and the demo's offers with a
# category, photos and videos on the local HTTP server (scripts/demo_media.py), the first of
# them looked at in detail below.
"${ctl[@]}" demo --count "$count" --concurrency 32 --status active \
  || die "the demo workload failed (log: $logs/gostd.log)"
created_at=$(date +%s%N)
media_ids=()
while IFS= read -r offer; do
  id=$("${ctl[@]}" create --json "$offer" | sed -n 's/^ "id": "\(.*\)".*/\1/p')
  [[ -n $id ]] || die "gostctl create printed no offer id (log: $logs/gostd.log)"
  media_ids+=("$id")
done < <(python3 scripts/demo_media.py offers "$media_base" "$created_at")

# Wait (bounded) until the stages have run on every offer of this run: `expire` (3 s after
# each creation), `audit` and `price.predict` (at creation), and the photo stages and
# `video.check` have a final result for every photo and video. `runs` (column 8: the header's
# "oldest due" is one column in the rows) counts this node's committed runs since it started.
expected=$((count + ${#media_ids[@]}))
runs_of() { awk -v s="$1" '$1 == s { print $8 }' <<<"$stages"; }
deadline=$((SECONDS + 120))
report=$((SECONDS + 5))
while :; do
  stages=$("${ctl[@]}" stages) || die "gostctl stages failed (log: $logs/gostd.log)"
  expire_runs=$(runs_of expire)
  audit_runs=$(runs_of audit)
  price_runs=$(runs_of price.predict)
  [[ -n $price_skipped ]] && price_runs=$expected
  media=$(python3 scripts/demo_media.py progress "${ctl[@]}" -- "${media_ids[@]}") \
    || die "reading the demo's offers failed (log: $logs/gostd.log)"
  ((${expire_runs:-0} >= expected && ${audit_runs:-0} >= expected
    && ${price_runs:-0} >= expected)) && [[ $media == "photos=done videos=done" ]] && break
  if ((SECONDS >= deadline)); then
    echo "$stages" >&2
    die "the stages did not finish on the $expected demo offers within 120 s ($media; log: $logs/gostd.log)"
  fi
  if ((SECONDS >= report)); then
    echo "  waiting for the stages: expire ${expire_runs:-0}/$expected, audit ${audit_runs:-0}/$expected, price.predict ${price_runs:-0}/$expected, $media"
    report=$((SECONDS + 5))
  fi
  sleep 0.5
done
waited=$((($(date +%s%N) - created_at) / 1000000))
echo "stage runs committed (gostctl stages), $((waited / 1000)).$((waited % 1000 / 100)) s after the last offer was created:"
echo "  expire  $expire_runs  (active offers made inactive 3 s after creation)"
echo "  audit   $audit_runs  (records on each offer where its run happened)"
if [[ -n $price_skipped ]]; then
  echo "  price.predict  skipped: $price_skipped"
  price_log=-
else
  echo "  price.predict  $price_runs  (prices predicted by the Python stage examples/price_predict; model $model_from)"
  price_log=$logs/price-server.log
fi
echo "the ${#media_ids[@]} offers with photos and videos on $media_base ($media_dir):"
python3 scripts/demo_media.py summary "$price_log" "${ctl[@]}" -- "${media_ids[@]}" \
  || die "reading the demo's offers failed (log: $logs/gostd.log)"
id=${media_ids[0]}
echo "the first of them, as 'gostctl offer $id' shows it (created active at version 1):"
"${ctl[@]}" offer "$id" | sed 's/^./  &/'

if [[ $keep -eq 1 ]]; then
  echo "$pid" >"$pid_file"
  trap - EXIT
  price_left=""
  [[ -n $price_pid ]] && price_left=" and the price.predict server (pid $price_pid)"
  echo "node left running (pid $pid) on $addr: try '$bin/gostctl --addr $addr stages'"
  echo "  with the demo's HTTP server on $media_base (pid $media_pid)$price_left; stop them with: kill -TERM $pid $media_pid $price_pid"
  echo "the embedded PostgreSQL keeps running on 127.0.0.1:$pg_port; '$pg_cmd stop' stops it"
  exit 0
fi
stop_node || die "gostd did not stop cleanly on SIGTERM (log: $logs/gostd.log)"
stop_servers
echo "node stopped cleanly (SIGTERM); the embedded PostgreSQL keeps running on 127.0.0.1:$pg_port for the next run: '$pg_cmd stop' stops it"
