#!/usr/bin/env bash
# The run command: installs what is missing, builds gostd and gostctl (preset `release`),
# starts a node with the embedded PostgreSQL (var/pg), runs a demo workload through gRPC
# (creates offers, reads them back) and prints what happened. The node is stopped with SIGTERM
# at the end unless --keep is given.
#   scripts/run.sh [--keep] [--count N]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
keep=0
count=2000
while [[ $# -gt 0 ]]; do
  case $1 in
    --keep) keep=1 ;;
    --count) count=$2; shift ;;
    *) echo "usage: scripts/run.sh [--keep] [--count N]" >&2; exit 2 ;;
  esac
  shift
done
logs=$root/var/run-logs
mkdir -p "$logs"

source "$root/scripts/lib.sh"

step "installing dependencies" "$logs/install.log" scripts/install-deps.sh
step "configuring" "$logs/configure.log" cmake --preset release
step "building" "$logs/build.log" cmake --build --preset release -j "$(nproc)" --target gostd gostctl

bin=$root/build/release/runtime
port_file=$root/var/gostd.port
rm -f "$port_file"
"$bin/gostd" --node.id=demo --grpc.listen=127.0.0.1:50051 --grpc.port_file="$port_file" \
  >"$logs/gostd.log" 2>&1 &
pid=$!
stop_node() { kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; }
for _ in $(seq 1 300); do
  [[ -s $port_file ]] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    cat "$logs/gostd.log" >&2
    echo "run.sh: gostd exited during start (log: $logs/gostd.log)" >&2
    exit 1
  fi
  sleep 0.1
done
[[ -s $port_file ]] || { stop_node; echo "run.sh: gostd did not start within 30 s" >&2; exit 1; }
addr=127.0.0.1:$(cat "$port_file")

echo "gostd is serving on $addr (embedded PostgreSQL: $(scripts/pg.sh dsn); log: $logs/gostd.log)"
if ! "$bin/gostctl" --addr "$addr" demo --count "$count" --concurrency 32; then
  stop_node
  echo "run.sh: the demo workload failed" >&2
  exit 1
fi
id=$("$bin/gostctl" --addr "$addr" create --seller demo-seller --ns demo --external-id "sku-$(date +%s%N)" \
  --title "Велосипед" --price 1500000 | sed -n 's/.*"id": "\(.*\)".*/\1/p')
echo "one offer, created and read back by id with gostctl get $id:"
"$bin/gostctl" --addr "$addr" get "$id"
if [[ $keep -eq 1 ]]; then
  echo "node left running (pid $pid); stop it with: kill -TERM $pid"
  exit 0
fi
stop_node
echo "node stopped cleanly (SIGTERM)"
